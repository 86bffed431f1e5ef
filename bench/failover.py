"""Controller failover at scale: 100k partitions, replication factor 3, 3 brokers.

Setup writes the topics and partition states straight into ZooKeeper (as a long-running
cluster would have them), starts 3 brokers and lets the first controller settle. Each run
deletes `/controller` and times:
  - until every broker has accepted an order from the new controller: it loaded its
    context and its UpdateMetadata reached every broker (the issue's figure);
  - until the new controller is idle again: every LeaderAndIsr and UpdateMetadata of the
    failover has been built and queued.
In the same run, the baseline: the same ZooKeeper reads (brokers, topics, assignments, every
partition state) by one bare aiozk client, with pipelined single reads and with multiRead.

    .venv/bin/python -m bench.failover [--partitions 100000] [--runs 3] [--standby]

`--standby` runs the brokers with `controller.standby.enable` (docs/STANDBY.md): each new
controller takes the states over from its standby view rather than read them, and resends
only what changed since the last mark of what every broker acknowledged. Each run starts from
a quiet cluster: the controller idle with every request answered (and, with the standby, that
marked).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import orjson
import uvloop
from aiozk import protocol

from bench.election import cpu_model, zk_client
from node.broker.gc_tuning import tune_gc
from node.clients.admin import KeelAdminClient
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk import data, paths
from node.zk.client import ZooKeeperClient

T = TypeVar("T")
PER_TOPIC = 1000
BROKERS = (1, 2, 3)


def topic_names(partitions: int) -> list[str]:
    return [f"topic-{i:04d}" for i in range((partitions + PER_TOPIC - 1) // PER_TOPIC)]


async def populate(connect: str, partitions: int, extra: dict[str, int] | None = None) -> None:
    """Topics and partition states as Kafka's controller would have left them: `partitions`
    spread over topics of PER_TOPIC, plus the `extra` topics with their partition counts."""
    zk = zk_client(connect)
    await zk.start()
    for path in ("/brokers", "/brokers/topics", "/brokers/ids", "/config", "/config/topics", "/admin"):
        await zk.ensure_path(path)

    def create(path: str, data: bytes | None) -> protocol.Request:
        request = protocol.Create2Request(
            path=zk.normalize_path(path), data=data, acl=[protocol.UNRESTRICTED_ACCESS]
        )
        request.set_flags(False, False, False)
        return request

    async def write_topic(topic: str, count: int) -> None:
        assignment = {str(p): [BROKERS[(p + k) % 3] for k in range(3)] for p in range(count)}
        await zk.create(f"/brokers/topics/{topic}", orjson.dumps({"version": 3, "partitions": assignment}))
        await zk.create(f"/brokers/topics/{topic}/partitions")
        for start in range(0, count, 250):
            request = protocol.TransactionRequest()
            for p in range(start, min(count, start + 250)):
                replicas = assignment[str(p)]
                state = {
                    "version": 1,
                    "leader": replicas[0],
                    "leader_epoch": 0,
                    "controller_epoch": 1,
                    "isr": replicas,
                }
                request.add(create(f"/brokers/topics/{topic}/partitions/{p}", None))
                request.add(create(f"/brokers/topics/{topic}/partitions/{p}/state", orjson.dumps(state)))
            await zk.session.send(request)

    counts = {t: min(PER_TOPIC, partitions - i * PER_TOPIC) for i, t in enumerate(topic_names(partitions))}
    topics = [*counts.items(), *(extra or {}).items()]
    for i in range(0, len(topics), 10):
        await asyncio.gather(*(write_topic(*t) for t in topics[i : i + 10]))
    await zk.close()


class ControllerHold:
    """Holds `/controller` (naming a broker that does not exist) with the benchmark's own
    session, so that no broker becomes controller before all of them have registered: a
    controller that starts alone would rightly take the others out of every ISR, and
    nothing puts them back until followers fetch."""

    def __init__(self, connect: str) -> None:
        self._zk = zk_client(connect)

    async def take(self) -> None:
        await self._zk.start()
        await self._zk.create(
            "/controller", orjson.dumps({"version": 2, "brokerid": 999, "timestamp": "0"}), ephemeral=True
        )

    @classmethod
    async def start_together(cls, connect: str, start: Callable[[], T]) -> T:
        """Run `start` (which launches the brokers) while holding `/controller`, and let go
        once every broker has registered: all in one event loop, as the session needs."""
        hold = cls(connect)
        await hold.take()
        started = start()
        await hold.release_when_registered(len(BROKERS))
        return started

    async def release_when_registered(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(await self._zk.get_children("/brokers/ids")) < count:
            if time.monotonic() > deadline:
                raise RuntimeError("brokers did not register")
            await asyncio.sleep(0.05)
        await self._zk.close()  # the ephemeral /controller goes with the session


async def raw_reads(connect: str, partitions: int, *, multi_read: bool) -> float:
    """The failover's ZooKeeper reads by one bare client; seconds."""
    client = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await client.start()
    started = time.perf_counter()
    ids = await client.children("/brokers/ids")
    await asyncio.gather(*(client.get_or_none(f"/brokers/ids/{i}") for i in ids))
    topics = await client.children("/brokers/topics")
    await asyncio.gather(*(client.get_or_none(f"/brokers/topics/{t}") for t in topics))
    state_paths = [f"/brokers/topics/{t}/partitions/{p}/state" for t in topics for p in range(PER_TOPIC)][
        :partitions
    ]
    if multi_read:
        await client.get_many(state_paths)
    else:
        await asyncio.gather(*(client.get_or_none(p) for p in state_paths))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


async def controller_epochs(ports: list[int]) -> list[int]:
    async def one(port: int) -> int:
        try:
            async with KeelAdminClient(f"127.0.0.1:{port}", timeout=5) as admin:
                return (await admin.metadata([])).controller_epoch
        except Exception:
            return -1

    return list(await asyncio.gather(*(one(p) for p in ports)))


async def controller_idle(ports: list[int], *, answered: bool = False) -> tuple[int, int] | None:
    """(controller id, epoch) once one broker is the controller with nothing queued or
    running (`answered`: nor waiting for a broker's answer)."""
    for port in ports:
        try:
            async with KeelAdminClient(f"127.0.0.1:{port}", timeout=5) as admin:
                answer = await admin.describe_controller()
        except Exception:
            continue
        m = answer.metrics
        if (
            m.get("ActiveControllerCount") == 1
            and m.get("EventQueueSize") == 0
            and m.get("ControllerState") == 0
            and (not answered or m.get("TotalQueueSize") == 0)
        ):
            return answer.controller_id, answer.controller_epoch
    return None


async def wait_for(probe, timeout: float, interval: float = 0.02):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(interval)
    raise RuntimeError("timed out")


async def acknowledged_to_newest(zk: ZooKeeperClient) -> bool:
    """Whether the controller has marked the newest change record as acknowledged by every
    broker (docs/STANDBY.md): what a cluster that has been quiet for a second has."""
    names = await zk.children(paths.CONTROLLER_CHANGES)
    found = await zk.get_or_none(paths.ACKNOWLEDGED_CHANGES)
    mark = None if found is None else data.decode_acknowledged_changes(found[0])
    newest = max((s for n in names if (s := paths.change_sequence(n)) is not None), default=None)
    return mark is not None and mark.sequence == newest


async def quiet(connect: str, ports: list[int], *, standby: bool) -> int:
    """Until the controller is idle with every request answered and, with the standby, has
    marked that; returns its epoch."""
    _, epoch = await wait_for(lambda: controller_idle(ports, answered=True), timeout=300, interval=0.2)
    if standby:
        client = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
        await client.start()
        try:
            await wait_for(lambda: acknowledged_to_newest(client), timeout=60, interval=0.2)
        finally:
            await client.close()
    return int(epoch)


async def one_failover(connect: str, ports: list[int], *, standby: bool) -> tuple[float, float]:
    epoch = await quiet(connect, ports, standby=standby)
    zk = zk_client(connect)
    await zk.start()
    started = time.perf_counter()
    await zk.delete("/controller", force=True)
    await zk.close()

    async def all_obey_new() -> bool:
        return all(e >= epoch + 1 for e in await controller_epochs(ports))

    await wait_for(all_obey_new, timeout=120)
    update_metadata_s = time.perf_counter() - started

    async def new_idle() -> bool:
        idle = await controller_idle(ports)
        return idle is not None and idle[1] >= epoch + 1

    await wait_for(new_idle, timeout=300, interval=0.05)
    return update_metadata_s, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep-logs", action="store_true", help="keep broker logs in a directory it prints")
    parser.add_argument("--standby", action="store_true", help="the brokers run the warm standby")
    args = parser.parse_args()
    tune_gc()
    standby = ", warm standby" if args.standby else ""
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, {args.partitions} partitions{standby}")
    with tempfile.TemporaryDirectory(prefix="keel-failover-") as scratch:
        tmp = tempfile.mkdtemp(prefix="keel-failover-") if args.keep_logs else scratch
        if args.keep_logs:
            print(f"logs kept in {tmp}")
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk", heap_mb=2048)
        zookeeper.start()
        connect = zookeeper.connect_string + "/failover"
        settings = {"controller.standby.enable": "true"} if args.standby else {}
        cluster = LocalCluster(Path(tmp), connect, session_timeout_ms=30_000, settings=settings)
        try:
            started = time.perf_counter()
            uvloop.run(populate(connect, args.partitions))
            print(f"setup: wrote {args.partitions} partitions in {time.perf_counter() - started:.1f} s")

            def launch() -> None:
                for broker_id in BROKERS:
                    cluster.new(broker_id, home=Path(tmp) / f"broker-{broker_id}").start()

            uvloop.run(ControllerHold.start_together(connect, launch))
            ports = [b.port for b in cluster.all]
            keel, raw_single, raw_multi = [], [], []
            for run in range(1, args.runs + 1):
                to_update, to_idle = uvloop.run(one_failover(connect, ports, standby=args.standby))
                single = uvloop.run(raw_reads(connect, args.partitions, multi_read=False))
                multi = uvloop.run(raw_reads(connect, args.partitions, multi_read=True))
                keel.append((to_update, to_idle))
                raw_single.append(single)
                raw_multi.append(multi)
                print(
                    f"run {run}: UpdateMetadata at every broker {to_update:.2f} s, "
                    f"controller idle {to_idle:.2f} s | "
                    f"raw reads: single {single:.2f} s, multiRead {multi:.2f} s"
                )
            med_update = statistics.median(k[0] for k in keel)
            med_idle = statistics.median(k[1] for k in keel)
            med_multi = statistics.median(raw_multi)
            med_single = statistics.median(raw_single)
            print(
                f"median of {args.runs}: UpdateMetadata at every broker {med_update:.2f} s, controller idle "
                f"{med_idle:.2f} s; raw reads single {med_single:.2f} s, multiRead {med_multi:.2f} s; "
                f"ratio keel/raw multiRead {med_update / med_multi:.1f}x"
            )
        finally:
            cluster.stop_all(30)
            zookeeper.stop()


if __name__ == "__main__":
    main()
