"""One simulated broker: the parts `node.broker.server.KeelBroker` is made of, built by the
same assembly (node/broker/assembly.py), on the simulated network, the in-memory ZooKeeper
and the virtual clock, with its logs in memory.

The parts are the production ones: the request handlers (BrokerApis, with the admin
manager), the replica manager's handle with its fetchers and AlterPartition sender over the
replica link, and the controller with its channel manager. Only the pools under the link and
the channel (`SimNetwork.senders`), the store (a session on `FakeZooKeeper`) and the logs
(`MemoryLogStore`) are the simulation's.

Each incarnation runs as its own node (`node.sim.loop.NODE`): a crash cancels all its tasks at
once and its ZooKeeper session lives on until the session timeout, as after `kill -9`; its
logs and checkpointed high watermarks survive for the next incarnation.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses

from actors.base.ports import BrokerInfo
from actors.base.service import Periodic
from actors.controller import KafkaController
from actors.controller.controller import ControllerConfig
from actors.replica.replication import ReplicationConfig
from node.broker.assembly import BrokerParts, PartsSettings
from node.broker.channel_manager import ControllerChannelManager
from node.broker.controlled_shutdown import ControlledShutdownConfig, controlled_shutdown
from node.sim.log_store import MemoryLogStore
from node.sim.loop import NODE, SimClock, VirtualTimeLoop
from node.sim.network import SimNetwork, endpoint_of
from node.sim.zookeeper import FakeClusterStore, FakeTopicAdminStore, FakeZooKeeper


@dataclasses.dataclass(frozen=True)
class BrokerSettings:
    """The broker settings of a simulation: Kafka's names, shorter times so that a run sees
    many failovers."""

    session_timeout_s: float = 6.0
    request_timeout_s: float = 3.0
    replication: ReplicationConfig = dataclasses.field(
        default_factory=lambda: ReplicationConfig(
            lag_time_max_ms=3_000, fetch_wait_max_ms=200, fetch_backoff_ms=200
        )
    )
    high_watermark_checkpoint_s: float = 1.0
    controller: ControllerConfig = dataclasses.field(
        default_factory=lambda: ControllerConfig(leader_imbalance_check_interval_s=30.0)
    )
    controlled_shutdown: ControlledShutdownConfig = dataclasses.field(
        default_factory=lambda: ControlledShutdownConfig(
            max_retries=3, retry_backoff_s=0.5, request_timeout_s=3.0
        )
    )

    @property
    def parts(self) -> PartsSettings:
        return PartsSettings(
            request_timeout_s=self.request_timeout_s,
            replication=self.replication,
            controller=self.controller,
            default_partitions=1,
            default_replication_factor=3,
        )


class SimBroker:
    def __init__(
        self,
        broker_id: int,
        zk: FakeZooKeeper,
        network: SimNetwork,
        logs: MemoryLogStore,
        settings: BrokerSettings,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.network = network
        self.logs = logs
        self.settings = settings
        self.info = BrokerInfo(broker_id, (endpoint_of(broker_id),))
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        self.loop = loop
        self.clock = SimClock(loop)
        self.store = FakeClusterStore(zk, stale_session_wait=1.5 * settings.session_timeout_s)
        self.parts = BrokerParts(
            broker_id,
            store=self.store,  # type: ignore[arg-type]  # the fake is a ZkClusterStore by duck type
            topic_admin=FakeTopicAdminStore(self.store),
            logs=logs,
            clock=self.clock,
            senders=network.senders(broker_id),
            settings=settings.parts,
            cluster_id=lambda: "simulated",
        )
        self.link = self.parts.link
        self.replica_manager = self.parts.replica_manager
        self.apis = self.parts.apis
        self.alive = False
        self._cut_offs = 0
        # Cuts from ZooKeeper begun and not healed yet (a partition and an outage may overlap).
        self._cuts_held = 0
        self._context = contextvars.copy_context()

    @property
    def broker_epoch(self) -> int:
        return self.parts.broker_epoch

    @property
    def controller(self) -> KafkaController:
        return self.parts.controller

    @property
    def started(self) -> bool:
        return self.parts.started

    # --- start-up, on the broker's own node ---

    def start(self) -> asyncio.Task[None]:
        """Start this incarnation as node `broker_id`; the task ends once it is registered."""
        context = contextvars.copy_context()
        context.run(NODE.set, self.broker_id)
        self._context = context
        self.alive = True
        return self.loop.create_task(self._startup(), name=f"broker-{self.broker_id}", context=context)

    async def _startup(self) -> None:
        self.replica_manager.start()
        self.network.serve(self.broker_id, self.apis.handle)
        for interval, work in (
            (self.settings.replication.lag_time_max_ms / 2000, self._isr_expiration),
            (self.settings.high_watermark_checkpoint_s, self._checkpoint_high_watermarks),
        ):
            Periodic(work.__name__, interval, work).start()
        broker_epoch = await self.store.registry.register_broker(self.info)
        channel = ControllerChannelManager(
            self.broker_id,
            timeout_s=self.settings.request_timeout_s,
            local=self.apis.handle_in_process,
            clock=self.clock,
            senders=self.network.senders(self.broker_id),
        )
        self.parts.start_controller(self.info, broker_epoch, channel)

    async def _isr_expiration(self) -> None:
        await self.replica_manager.maintain(shrink=True)

    async def _checkpoint_high_watermarks(self) -> None:
        await self.replica_manager.maintain(checkpoint=True, shrink=False)

    # --- the ways a broker goes ---

    def crash(self) -> None:
        """kill -9: every task ends now; the session lingers until ZooKeeper times it out."""
        self.alive = False
        self.network.close(self.broker_id)
        self.loop.kill(self.broker_id)
        session = self.store.session
        # Its watches can reach nothing now; the ensemble drops its ephemerals later.
        self.store.expired = True
        self.loop.call_later(self.settings.session_timeout_s, self.zk.drop_session, session)

    def terminate(self) -> asyncio.Task[bool]:
        """SIGTERM: the controlled shutdown runs on this broker's node, as in its process, so
        that a crash meanwhile ends it there: a killed broker asks the controller nothing more."""
        return self.loop.create_task(self.controlled_shutdown(), context=self._context)

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move the leaders away, then stop cleanly."""
        moved = False
        if self.parts.started:
            deadline = self.clock.monotonic() + 3 * self.settings.request_timeout_s
            moved = await controlled_shutdown(
                self.broker_id,
                lambda: self.broker_epoch,
                self.link.controlled_shutdown,
                self.settings.controlled_shutdown,
                deadline,
                clock=self.clock,
            )
        await self.stop()
        return moved

    async def stop(self) -> None:
        """A clean stop, in KafkaServer.shutdown's order; closing the session drops the
        ephemerals at once. Nothing to do for a broker killed meanwhile (a `kill -9` during
        its controlled shutdown)."""
        if not self.alive:
            return
        if self.parts.started:
            await self.controller.shutdown()
        self.network.close(self.broker_id)
        if self.replica_manager.running:
            await self.replica_manager.maintain(checkpoint=True, shrink=False)
        await self.replica_manager.stop()
        self.alive = False
        self.loop.kill(self.broker_id)
        self.store.expired = True
        self.zk.drop_session(self.store.session)

    def cut_off_from_zookeeper(self) -> None:
        """A partition between this broker and the ensemble: its ZooKeeper calls wait, and
        past the session timeout the ensemble expires its session, so that the others elect
        a controller while this one may still believe it is (a zombie, fenced by the epoch
        at its next write)."""
        self._cuts_held += 1
        store, session = self.store, self.store.session
        if not store.reachable.is_set():
            # Cut off already: no heartbeat has gone through since that cut began, so its
            # timer stands (the ensemble expires the session then); this cut only keeps the
            # broker cut off until it heals too.
            return
        store.reachable.clear()
        # An earlier cut healed and this one began: only this one's timer may expire it.
        self._cut_offs += 1
        cut_off = self._cut_offs

        def expire() -> None:
            if (
                self.alive
                and not store.reachable.is_set()
                and store.session == session
                and self._cut_offs == cut_off
            ):
                store.expired = True
                self.zk.drop_session(session)

        self.loop.call_later(self.settings.session_timeout_s, expire)

    def starts_cut_off(self) -> None:
        """This incarnation starts while ZooKeeper is unreachable (an outage under way)."""
        self.store.reachable.clear()
        self._cuts_held = 1

    def reconnect_to_zookeeper(self, *, every_cut: bool = False) -> None:
        """A cut heals (`every_cut`: all of them): once none holds, calls go through again,
        and a session expired meanwhile is renewed, the broker hearing of it as after any
        expiry."""
        if self.store.reachable.is_set():
            return
        self._cuts_held = 0 if every_cut else max(0, self._cuts_held - 1)
        if self._cuts_held:
            return
        self.store.reachable.set()
        if self.alive and self.store.expired:
            self.loop.create_task(self.store.renew_session(), context=self._context)

    async def expire_session(self) -> None:
        """ZooKeeper expires this broker's session; it gets a new one and registers again."""
        await self.store.expire_session()
