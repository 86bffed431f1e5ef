"""ConsoleObserver: the console's one reader of the cluster, shared by every page and every
browser watching one.

Two loops. One reads ZooKeeper every `zk_interval_s` through ZkClusterStore (registrations,
topics, partition states, the controller and its epoch, topics being deleted): these reads
are pipelined and cheap, and they are what a page must show within 2 s. The other asks the
brokers and the planner every `broker_interval_s`, each with a short timeout so that a broker
that went down holds up nothing: replica sizes by DescribeLogDirs (as the planner's live
snapshot asks them), the bytes each reassignment still has to copy (as `keel reassign list`
counts them), the active controller's metrics by DescribeController (as `keel controller
show`) and the planner's status (as `keel reassign status`).

Each look that changes what a page shows makes a new `ClusterView` and bumps `version`;
the event streams wait on that (`wait_newer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping

import orjson

from actors.base.ports import LeadershipInfo, RegisteredBroker, TopicAssignment, TopicPartition
from actors.base.service import Periodic
from node.cli.plan_status import fetch_status
from node.clients.admin import KeelAdminClient
from node.clients.planner import PlannerClient, PlannerNotRunning
from node.clients.replica_sizes import ReplicaSizeReader, bytes_to_copy
from node.planner.live_snapshot import replica_sizes
from node.ui.progress import ProgressTracker
from node.ui.timeline import Timeline
from node.ui.view import ClusterView, Reassignment, broker_rows, partition_rows
from node.zk.client import ZooKeeperClient
from node.zk.planner_registry import ZkPlannerRegistry
from node.zk.store import ZkClusterStore
from wire.api.planner import PlanReassignmentRequest
from wire.errors import WireError, for_code
from wire.security import ClientSecurity

log = logging.getLogger(__name__)

ZK_INTERVAL_S = 0.5
BROKER_INTERVAL_S = 2.0
BROKER_TIMEOUT_S = 2.0
# Plans asked for through the console, kept in memory for the reassignments page.
PLANS_KEPT = 5


@dataclasses.dataclass
class _ZkLook:
    registered: list[RegisteredBroker]
    assignments: dict[str, TopicAssignment]
    states: dict[TopicPartition, LeadershipInfo]
    controller_id: int | None
    controller_epoch: int | None
    deleting: frozenset[str]


@dataclasses.dataclass
class _BrokerLook:
    sizes: dict[int, dict[TopicPartition, int]] = dataclasses.field(default_factory=dict)
    remaining: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    planner_status: dict[str, object] | None = None
    planner_address: str | None = None


@dataclasses.dataclass(frozen=True)
class PlanPreview:
    """A plan the planner computed at the console's request (not executed)."""

    plan_id: str
    goals: tuple[str, ...]
    at_ms: int
    partitions: int
    report: Mapping[str, object]


class ConsoleObserver:
    def __init__(
        self,
        zk: ZooKeeperClient,
        security: ClientSecurity,
        *,
        zk_interval_s: float = ZK_INTERVAL_S,
        broker_interval_s: float = BROKER_INTERVAL_S,
    ) -> None:
        from actors.base.clock import SystemClock

        self.store = ZkClusterStore(zk, SystemClock())
        self.planners = ZkPlannerRegistry(zk)
        self.security = security
        self._seen: dict[int, RegisteredBroker] = {}
        self._zk: _ZkLook | None = None
        self._brokers = _BrokerLook()
        self._progress = ProgressTracker()
        self.timeline = Timeline()
        self.plans: list[PlanPreview] = []
        self.view: ClusterView | None = None
        self.problem: str | None = None
        self.version = 0
        self._changed = asyncio.Condition()
        self._looks = [
            Periodic("console-zookeeper", zk_interval_s, self._look_at_zookeeper),
            Periodic("console-brokers", broker_interval_s, self._look_at_brokers),
        ]

    # --- lifecycle ---

    async def start(self) -> None:
        """Read once before serving, so that the first page is never empty."""
        await self._look_at_zookeeper()
        for look in self._looks:
            look.start()

    async def stop(self) -> None:
        await asyncio.gather(*(look.stop() for look in self._looks))

    async def wait_newer(self, version: int, timeout: float) -> int:
        """The version once it is past `version`, or the same one after `timeout` seconds."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(lambda: self.version > version), timeout)
            return self.version

    # --- the looks ---

    async def _look_at_zookeeper(self) -> None:
        store = self.store
        try:
            registered, topics, controller, deleting = await asyncio.gather(
                store.registered_brokers(),
                store.topics(),
                store.read_controller(),
                store.topics_to_delete(),
            )
            assignments = await store.topic_assignments(topics)
            tps = [TopicPartition(t, p) for t, a in sorted(assignments.items()) for p in sorted(a.partitions)]
            states = await store.partition_states(tps)
        except Exception as e:  # the page says ZooKeeper cannot be read, and the loop goes on
            await self._set_problem(f"ZooKeeper could not be read: {type(e).__name__}: {e}")
            return
        self._seen.update({b.info.broker_id: b for b in registered})
        self._zk = _ZkLook(
            registered,
            assignments,
            states,
            controller.controller_id,
            None if controller.epoch is None else controller.epoch.epoch,
            frozenset(deleting),
        )
        self.problem = None
        await self._publish(from_zookeeper=True)

    async def _look_at_brokers(self) -> None:
        look = self._zk
        if look is None:
            return
        try:
            self._brokers = await self._ask_brokers(look)
        except Exception as e:  # one bad look must not end the loop; the next one tries again
            log.warning("asking the brokers failed: %s: %s", type(e).__name__, e)
            return
        await self._publish(from_zookeeper=False)

    async def _ask_brokers(self, look: _ZkLook) -> _BrokerLook:
        (sizes, _), remaining, metrics, planner = await asyncio.gather(
            replica_sizes(look.registered, timeout=BROKER_TIMEOUT_S, security=self.security),
            self._bytes_to_copy(look),
            self._controller_metrics(look),
            self._planner_status(),
        )
        return _BrokerLook(sizes, remaining, metrics, planner[0], planner[1])

    def _addresses(self, look: _ZkLook) -> dict[int, str]:
        protocol = self.security.security_protocol
        addresses = {}
        for broker in look.registered:
            endpoint = next((e for e in broker.info.endpoints if e.security_protocol == protocol), None)
            if endpoint is not None:
                addresses[broker.info.broker_id] = endpoint.address
        return addresses

    async def _bytes_to_copy(self, look: _ZkLook) -> dict[tuple[str, int], int]:
        adding = {
            (topic, p): list(a.adding)
            for topic, assignment in look.assignments.items()
            for p, a in assignment.partitions.items()
            if a.is_being_reassigned
        }
        if not adding:
            return {}
        leaders = {(tp.topic, tp.partition): s.leader_and_isr.leader for tp, s in look.states.items()}
        reader = ReplicaSizeReader.at(self._addresses(look), BROKER_TIMEOUT_S, security=self.security)
        try:
            return await bytes_to_copy(reader, adding, leaders)
        finally:
            await reader.close()

    async def _controller_metrics(self, look: _ZkLook) -> dict[str, float]:
        address = self._addresses(look).get(look.controller_id if look.controller_id is not None else -1)
        if address is None:
            return {}
        try:
            async with KeelAdminClient(address, timeout=BROKER_TIMEOUT_S, security=self.security) as admin:
                return dict((await admin.describe_controller()).metrics)
        except (WireError, OSError) as e:
            log.debug("the controller did not describe itself: %s", e)
            return {}

    async def _planner_status(self) -> tuple[dict[str, object] | None, str | None]:
        registration = await self.planners.planner()
        if registration is None:
            return None, None
        address = f"{registration.host}:{registration.port}"
        try:
            async with self.planner_client(address) as client:
                return await fetch_status(client), address
        except (PlannerNotRunning, WireError, OSError) as e:
            log.debug("the planner did not answer: %s", e)
            return None, address

    def planner_client(self, address: str, security: ClientSecurity | None = None) -> PlannerClient:
        return PlannerClient.at(address, timeout=BROKER_TIMEOUT_S, security=security or self.security)

    async def preview_plan(self, goals: list[str], security: ClientSecurity | None = None) -> PlanPreview:
        """Ask the planner for a plan without executing it, and keep it for the page."""
        registration = await self.planners.planner()
        if registration is None:
            raise PlannerNotRunning("no planner is running (start one with bin/keel-planner)")
        client = PlannerClient.at(
            f"{registration.host}:{registration.port}",
            timeout=BROKER_TIMEOUT_S,
            plan_timeout=600.0,
            security=security or self.security,
        )
        async with client:
            response = await client.plan(PlanReassignmentRequest(goals=goals))
        if response.error_code:
            raise for_code(response.error_code, response.error_message or "")
        report = orjson.loads(response.report_json or "{}")
        preview = PlanPreview(
            response.plan_id, tuple(goals), int(time.time() * 1000), len(response.partitions), report
        )
        self.plans = [preview, *self.plans][:PLANS_KEPT]
        await self._bump()
        return preview

    # --- publishing ---

    def _build(self) -> ClusterView | None:
        look = self._zk
        if look is None:
            return None
        brokers = self._brokers
        alive = {b.info.broker_id for b in look.registered}
        partitions = partition_rows(look.assignments, look.states, brokers.sizes, alive)
        reassigning = [p for p in partitions if p.reassigning]
        progress = self._progress.observe(
            {(p.topic, p.partition): brokers.remaining.get((p.topic, p.partition), 0) for p in reassigning},
            time.monotonic(),
        )
        reassignments = tuple(
            Reassignment(
                p.topic, p.partition, p.replicas, p.adding, p.removing, progress[p.topic, p.partition]
            )
            for p in reassigning
        )
        return ClusterView(
            taken_ms=int(time.time() * 1000),
            controller_id=look.controller_id,
            controller_epoch=look.controller_epoch,
            brokers=tuple(
                broker_rows(
                    look.registered, self._seen, partitions, brokers.sizes, self.security.security_protocol
                )
            ),
            partitions=tuple(partitions),
            controller_metrics=brokers.metrics,
            topics_being_deleted=look.deleting,
            reassignments=reassignments,
            planner_status=brokers.planner_status,
            planner_address=brokers.planner_address,
        )

    async def _publish(self, *, from_zookeeper: bool) -> None:
        view = self._build()
        if view is None:
            return
        if from_zookeeper:
            self.timeline.observe(view)
        if self.view is not None and dataclasses.replace(self.view, taken_ms=0) == dataclasses.replace(
            view, taken_ms=0
        ):
            return
        self.view = view
        await self._bump()

    async def _set_problem(self, problem: str) -> None:
        if problem != self.problem:
            log.warning("%s", problem)
            self.problem = problem
            await self._bump()

    async def _bump(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()
