"""The cluster a chaos run owns: a ZooKeeper ensemble, brokers behind fault-injecting proxies,
and what the nemesis and the checker ask of it (who is controller, who leads a partition,
which brokers are registered, each replica's records on disk).

Each broker also has a Kafka listener (`kafka.listeners`) that Kafka's own clients reach
directly, not through a proxy: a listener proxy tells peers from clients by parsing the first
request in Keel's own wire, which a Kafka-protocol connection does not speak. Network
partitions therefore do not cut Kafka clients from a broker; kills, pauses, ZooKeeper faults
and controller faults reach them as they reach everything else."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from node.chaos.proxy import Link, PeerLinks, Proxy
from node.cluster.local import BrokerProcess, LocalCluster, PlannerProcess
from node.cluster.zookeeper import EmbeddedZooKeeper, four_letter_word, free_ports
from node.zk import data, paths
from node.zk.client import ZooKeeperClient
from wire import records
from wire.errors import CorruptMessage

# Reads of ZooKeeper while part of the ensemble is down must not hang the run.
ZK_READ_TIMEOUT_S = 3.0
# The consumer group's settings: few __consumer_offsets partitions (fewer to elect after each
# fault), and a group's first rebalance without Kafka's wait for more members. Its replication
# factor stays Kafka's 3 (a chaos run has at least 3 brokers).
GROUP_SETTINGS = {
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
}


class ChaosCluster:
    def __init__(
        self,
        directory: Path,
        *,
        brokers: int,
        zookeeper_servers: int,
        session_timeout_ms: int,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.broker_ids = list(range(1, brokers + 1))
        self.session_timeout_s = session_timeout_ms / 1000
        self.zookeeper = EmbeddedZooKeeper(directory / "zookeeper", servers=zookeeper_servers)
        self.local = LocalCluster(directory, "", session_timeout_ms=session_timeout_ms, settings=settings)
        self.ports = dict(zip(self.broker_ids, free_ports(brokers), strict=True))
        # Each broker's Kafka listener, the same port for every incarnation.
        self.kafka_ports = dict(zip(self.broker_ids, free_ports(brokers), strict=True))
        # broker → its listener's link (clients, the controller and peers reach it through it),
        # and → the link of its connections to ZooKeeper.
        self.listener_links = {b: Link(f"broker-{b}") for b in self.broker_ids}
        self.zookeeper_links = {b: Link(f"broker-{b}/zookeeper") for b in self.broker_ids}
        # Each two brokers' link: the connections either opened to the other (its listener's
        # proxy tells them from the clients' by their first request).
        self.peer_links = PeerLinks()
        self.proxies: dict[int, Proxy] = {}
        self._zookeeper_proxies: dict[int, list[Proxy]] = {}
        self.zk: ZooKeeperClient | None = None
        self.planners: list[PlannerProcess] = []

    # --- lifecycle ---

    async def start(self, timeout: float = 90.0) -> None:
        await asyncio.to_thread(self.zookeeper.start, timeout)
        for b in self.broker_ids:
            self.proxies[b] = await Proxy(
                self.listener_links[b], self.ports[b], peers=self.peer_links, broker=b
            ).start()
            self._zookeeper_proxies[b] = [
                await Proxy(self.zookeeper_links[b], s.client_port).start() for s in self.zookeeper.servers
            ]
        await self.renew_zk(timeout)
        for b in self.broker_ids:
            self.launch(b)
        await self.local.wait_for_full_metadata(timeout)

    async def start_planners(self, count: int = 2, timeout: float = 180.0) -> None:
        """An active planner and a standby (the standby takes over when the active one dies),
        each on one Spark core: they share the machine with the brokers."""
        for i in range(1, count + 1):
            planner = self.local.new_planner(
                {
                    "zookeeper.connect": self.zookeeper.connect_string,
                    "spark.master": "local[1]",
                    "spark.driver.memory": "768m",
                },
                home=self.directory / f"planner-{i}",
            )
            planner.log_path = self.directory / "logs" / f"planner-{i}.log"
            planner.start()
            self.planners.append(planner)
        deadline = asyncio.get_running_loop().time() + timeout
        while await self.active_planner() is None:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"no planner registered within {timeout:g} s")
            await asyncio.sleep(0.5)

    async def active_planner(self) -> PlannerProcess | None:
        """The planner process that holds /keel/planner."""
        got = await self._read(paths.PLANNER)
        if got is None:
            return None
        with contextlib.suppress(Exception):
            port = data.decode_planner(got[0]).port
            return next((p for p in self.planners if p.port == port and p.running), None)
        return None

    async def renew_zk(self, timeout: float = 10.0) -> None:
        """A new ZooKeeper session for the driver's own reads: after the ensemble lost its
        quorum, the old session's client can take tens of seconds to come back by itself."""
        if self.zk is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.zk.close(), 5)
        self.zk = ZooKeeperClient(
            self.zookeeper.connect_string, session_timeout_s=10.0, connection_timeout_s=timeout
        )
        await self.zk.start()

    async def close(self) -> None:
        await asyncio.to_thread(self.local.kill_all)
        if self.zk is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.zk.close(), 5)
        for proxy in [*self.proxies.values(), *(p for ps in self._zookeeper_proxies.values() for p in ps)]:
            await proxy.close()
        await asyncio.to_thread(self.zookeeper.stop)

    def launch(self, broker_id: int) -> BrokerProcess:
        """Start broker `broker_id` (again), on its own port, data and log file."""
        zookeeper_connect = ",".join(f"127.0.0.1:{p.port}" for p in self._zookeeper_proxies[broker_id])
        return self.local.new(
            broker_id,
            {
                "zookeeper.connect": zookeeper_connect,
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.proxies[broker_id].port}",
                "kafka.listeners": f"PLAINTEXT://127.0.0.1:{self.kafka_ports[broker_id]}",
                **GROUP_SETTINGS,
            },
            port=self.ports[broker_id],
            home=self.directory / f"broker-{broker_id}",
            log_path=self.directory / "logs" / f"broker-{broker_id}.log",
        ).start()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p.port}" for p in self.proxies.values())

    @property
    def kafka_bootstrap(self) -> str:
        """The brokers' Kafka listeners, for Kafka's own clients (no proxy in between)."""
        return ",".join(f"127.0.0.1:{self.kafka_ports[b]}" for b in self.broker_ids)

    def process(self, broker_id: int) -> BrokerProcess | None:
        """The broker's newest process, running or not."""
        return next((b for b in reversed(self.local.all) if b.broker_id == broker_id), None)

    def running(self, broker_id: int) -> bool:
        process = self.process(broker_id)
        return process is not None and process.running

    def log_dir(self, broker_id: int) -> Path:
        """Where the broker writes its controller.log and state-change.log (node/broker/logs.py),
        every incarnation appending to the same files."""
        return self.directory / f"broker-{broker_id}" / "data"

    # --- ZooKeeper reads ---

    async def _read(self, path: str) -> tuple[bytes | None, object] | None:
        assert self.zk is not None
        try:
            return await asyncio.wait_for(self.zk.get_or_none(path), ZK_READ_TIMEOUT_S)
        except Exception:
            return None

    async def controller(self) -> int | None:
        got = await self._read(paths.CONTROLLER)
        if got is None:
            return None
        with contextlib.suppress(Exception):
            return data.decode_controller(got[0])
        return None

    async def leader(self, topic: str, partition: int) -> int | None:
        got = await self._read(paths.partition_state(topic, partition))
        if got is None:
            return None
        with contextlib.suppress(Exception):
            leader = data.decode_partition_state(topic, got[0], 0).leader_and_isr.leader
            return leader if leader >= 0 else None
        return None

    async def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        """The partition's assigned replicas (none when ZooKeeper does not answer)."""
        got = await self._read(paths.topic(topic))
        if got is None:
            return ()
        with contextlib.suppress(Exception):
            return data.decode_topic(topic, got[0]).partitions[partition].replicas
        return ()

    async def controller_and_epoch(self) -> tuple[int, int, int] | None:
        """(the controller, its epoch, /controller_epoch's znode version), or None when no
        broker holds /controller, its election's epoch is not written, or ZooKeeper does not
        answer."""
        assert self.zk is not None
        try:
            got = await asyncio.wait_for(
                self.zk.get_many([paths.CONTROLLER, paths.CONTROLLER_EPOCH]), ZK_READ_TIMEOUT_S
            )
        except Exception:
            return None
        controller, epoch = got
        # An election creates /controller and bumps /controller_epoch in one multi (as the
        # observer reads them): a /controller newer than the epoch is no election's.
        if controller is None or epoch is None or epoch[1].last_modified_zxid < controller[1].created_zxid:
            return None
        with contextlib.suppress(Exception):
            return (
                data.decode_controller(controller[0]),
                data.decode_controller_epoch(epoch[0]),
                epoch[1].version,
            )
        return None

    async def delete_controller(self, epoch_version: int) -> bool | None:
        """Delete /controller if /controller_epoch is still at `epoch_version`: the controller
        deleted is the one that was read, not one elected since. True: deleted; False: another
        election, or a resignation, came first; None: ZooKeeper did not answer in time (the
        delete may or may not have been applied)."""
        zk = self.zk
        assert zk is not None
        ops = [zk.check_op(paths.CONTROLLER_EPOCH, epoch_version), zk.delete_op(paths.CONTROLLER)]
        try:
            results = await asyncio.wait_for(zk.multi(ops), ZK_READ_TIMEOUT_S)
        except Exception:
            return None
        return not any(isinstance(r, Exception) for r in results)

    def zookeeper_serving(self, server_id: int) -> bool:
        """Whether ZooKeeper server `server_id` serves requests: up and in a quorum (`srvr`
        names its mode only then). Blocks for up to a second."""
        port = self.zookeeper.servers[server_id - 1].client_port
        try:
            return "Mode:" in four_letter_word(port, "srvr")
        except OSError:
            return False

    async def registered_brokers(self) -> list[int] | None:
        assert self.zk is not None
        try:
            return sorted(int(b) for b in await asyncio.wait_for(self.zk.children(paths.BROKER_IDS), 3))
        except Exception:
            return None

    # --- the replicas on disk ---

    def replica_records(self, broker_id: int, topic: str, partition: int) -> dict[int, str]:
        """offset → value of the whole batches in a replica's segment files (a batch cut short
        at the end of the active segment, being written, ends the read)."""
        directory = self.directory / f"broker-{broker_id}" / "data" / f"{topic}-{partition}"
        out: dict[int, str] = {}
        for segment in sorted(directory.glob("*.log")):
            raw = segment.read_bytes()
            with contextlib.suppress(Exception):
                for record in records.records(_whole_batches(raw)):
                    out[record.offset] = (record.value or b"").decode(errors="replace")
        return out


def _whole_batches(raw: bytes) -> bytes:
    """The prefix of `raw` made of whole batches."""
    position = 0
    while position + records.HEADER_SIZE <= len(raw):
        try:
            header = records.read_header(raw, position)
        except CorruptMessage:
            break
        if position + header.size > len(raw) or header.batch_length <= 0:
            break
        position += header.size
    return raw[:position]
