"""The planner's RPC handlers (wire/api/planner.py): plan on a fresh live snapshot, hand a
plan to the executor, report the executor's status, cancel.

A plan request is checked before anything runs: an unknown goal, a bad balance or a broker
the cluster does not know is INVALID_REQUEST with the reason, and nothing is executed. Spark
work (plans and Parquet snapshots) runs in a worker thread, one job at a time, so the event
loop keeps answering status requests while a plan is computed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from actors.security.acl import AclOperation
from actors.security.api_authorization import require_cluster
from node.planner import live_snapshot
from node.planner.executor import PlanExecutionError, PlanInProgress
from node.planner.live_snapshot import LiveSnapshot
from node.planner.plan import plan
from node.planner.request import PlanError, PlanRequest
from node.planner.snapshot import SnapshotError, snapshot_from_rows
from node.planner.stats import PlannerStats
from wire.api import API_SPECS, ApiKey, ApiVersionRange, ApiVersionsResponse, Response
from wire.api.planner import (
    CancelPlanResponse,
    PlannedPartition,
    PlannerStatusResponse,
    PlanReassignmentRequest,
    PlanReassignmentResponse,
)
from wire.envelope import ParsedRequest
from wire.errors import ClusterAuthorizationFailed, ErrorCode, InvalidRequest
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from actors.security.authorizer import AclAuthorizer
    from node.zk.store import ZkClusterStore

log = logging.getLogger(__name__)

GOALS = ("rebalance", "remove-brokers", "heal", "leaders")
BALANCES = ("count", "bytes")
SERVED = (ApiKey.API_VERSIONS, ApiKey.PLAN_REASSIGNMENT, ApiKey.PLANNER_STATUS, ApiKey.CANCEL_PLAN)


class Refused(Exception):
    """A request answered with an error code that has no WireError class of its own."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_request(request: PlanReassignmentRequest, snapshot: LiveSnapshot | None = None) -> None:
    """Raise InvalidRequest for what can be refused without Spark: goals, balance, brokers
    (against the snapshot, when given), capacity keys."""
    if not request.goals:
        raise InvalidRequest(f"no goal given (goals: {', '.join(GOALS)})")
    unknown = [g for g in request.goals if g not in GOALS]
    if unknown:
        raise InvalidRequest(f"unknown goal {unknown[0]!r} (goals: {', '.join(GOALS)})")
    if request.balance not in BALANCES:
        raise InvalidRequest(f"unknown balance {request.balance!r} (count or bytes)")
    if request.remove_brokers and "remove-brokers" not in request.goals:
        raise InvalidRequest("remove_brokers needs the remove-brokers goal")
    if "remove-brokers" in request.goals and not request.remove_brokers:
        raise InvalidRequest("the remove-brokers goal needs the brokers to remove")
    for key in request.capacity or {}:
        if not key.lstrip("-").isdigit():
            raise InvalidRequest(f"capacity key {key!r} is not a broker id")
    if snapshot is None:
        return
    live = {b["id"] for b in snapshot.brokers if b["alive"]}
    known = {b["id"] for b in snapshot.brokers}
    for broker in request.brokers or ():
        if broker not in live:
            raise InvalidRequest(
                f"broker {broker} is not a live broker of the cluster (live: {sorted(live)})"
            )
    for broker in request.remove_brokers:
        if broker not in known:
            raise InvalidRequest(f"broker {broker} does not exist (brokers: {sorted(known)})")


def compute_plan(
    spark: SparkSession, snapshot: LiveSnapshot, request: PlanReassignmentRequest
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the plan jobs (node.planner.plan) on the snapshot: the changed partitions and
    the report. The planner's own errors (an impossible plan, ...) become InvalidRequest."""
    fields = ("topic", "partition", "replicas", "leader", "size_bytes")
    frames = snapshot_from_rows(
        spark, snapshot.brokers, [{f: p[f] for f in fields} for p in snapshot.partitions]
    )
    try:
        plan_request = PlanRequest(
            goals=tuple(request.goals),
            brokers=None if request.brokers is None else tuple(request.brokers),
            remove_brokers=tuple(request.remove_brokers),
            topics=None if request.topics is None else tuple(request.topics),
            balance=request.balance,
            capacity=None if request.capacity is None else {int(k): v for k, v in request.capacity.items()},
        )
        result = plan(spark, frames, plan_request)
    except (PlanError, SnapshotError) as e:
        raise InvalidRequest(str(e)) from None
    return list(result.partitions), dict(result.report)


class PlannerService:
    """Answers the planner's requests. `executor` follows PlanExecutor's interface (start,
    status, cancel) or is None when execution is not available; `is_active` says whether
    this planner holds `/keel/planner` (only that one executes)."""

    def __init__(
        self,
        *,
        spark: SparkSession,
        store: ZkClusterStore,
        snapshot_dir: Path,
        request_timeout_s: float,
        is_active: Callable[[], bool],
        executor: Any | None = None,
        self_healing: bool = False,
        authorizer: AclAuthorizer | None = None,
        client_security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self.spark = spark
        # How the planner reaches the brokers (its snapshots' DescribeLogDirs).
        self.client_security = client_security
        # Snapshots, plans and heals, for the planner's metrics.
        self.stats = PlannerStats()
        # Who may do what, as on the brokers: None allows everything.
        self.authorizer = authorizer
        self.store = store
        self.snapshot_dir = snapshot_dir
        self.request_timeout_s = request_timeout_s
        self.is_active = is_active
        self.executor = executor
        self.self_healing = self_healing
        # The SelfHealer, when the planner runs one: its status goes with the executor's.
        self.healer: Any | None = None
        # How many Parquet snapshots to keep (0: all).
        self.snapshot_retention = 0
        # One Spark job at a time: plans and Parquet snapshots.
        self.spark_lock = asyncio.Lock()
        # The report of the plan this planner set its executor on (plan id, report): the status
        # carries it, so a console draws the executing plan's before and after. In memory only:
        # a standby that takes a plan over has its moves, not its report.
        self._executed_report: tuple[str, dict[str, Any]] | None = None

    async def handle(self, request: ParsedRequest) -> Response:
        try:
            return await self._handle(request)
        except Refused as e:
            log.info("%s refused: %s", request.spec.key.name, e.message)
            return Response(error_code=int(e.code), error_message=e.message)
        except (InvalidRequest, ClusterAuthorizationFailed) as e:
            log.info("%s refused: %s", request.spec.key.name, e.message)
            raise

    def _authorize(self, request: ParsedRequest) -> None:
        """Executing or cancelling a plan moves partitions: Cluster Alter, as
        AlterPartitionReassignments needs on a broker. A plan that is only shown and the
        status read the cluster: Cluster Describe."""
        authorizer = self.authorizer
        if authorizer is None or request.spec.key == ApiKey.API_VERSIONS:
            return
        body = request.body
        alters = request.spec.key == ApiKey.CANCEL_PLAN or (
            isinstance(body, PlanReassignmentRequest) and body.execute
        )
        operation = AclOperation.ALTER if alters else AclOperation.DESCRIBE
        require_cluster(
            lambda op, kind, name: authorizer.authorize(request.context, op, kind, name),
            operation,
            f"{request.spec.key.name} from {request.context.principal} at {request.context.client_host}",
        )

    async def _handle(self, request: ParsedRequest) -> Response:
        self._authorize(request)
        match request.spec.key:
            case ApiKey.API_VERSIONS:
                return ApiVersionsResponse(
                    api_keys=[
                        ApiVersionRange(api_key=int(k), min_version=API_SPECS[k].min_version, max_version=0)
                        for k in SERVED
                    ]
                )
            case ApiKey.PLAN_REASSIGNMENT:
                assert isinstance(request.body, PlanReassignmentRequest)
                return await self.plan(request.body)
            case ApiKey.PLANNER_STATUS:
                return PlannerStatusResponse(
                    status_json=self._status_json(), active=self.is_active(), self_healing=self.self_healing
                )
            case ApiKey.CANCEL_PLAN:
                return await self.cancel()
        raise InvalidRequest(f"{request.spec.key.name} is not served by the planner")

    def _status_json(self) -> str:
        status = {} if self.executor is None else self.executor.status()
        if self._executed_report is not None and status.get("plan_id") == self._executed_report[0]:
            status = {**status, "report": self._executed_report[1]}
        if self.healer is not None:
            status = {**status, "self_healing": self.healer.status()}
        return orjson.dumps(status, default=str).decode()

    async def take_snapshot(self) -> tuple[LiveSnapshot, Path]:
        """A live snapshot, written as Parquet under planner.snapshot.dir."""
        snapshot = await live_snapshot.take(
            self.store,
            timeout=self.request_timeout_s,
            now_ms=int(time.time() * 1000),
            security=self.client_security,
        )
        async with self.spark_lock:
            directory = await asyncio.to_thread(
                live_snapshot.write_parquet, self.spark, snapshot, self.snapshot_dir
            )
        self.stats.snapshot_taken(time.time())
        if self.snapshot_retention > 0:
            await asyncio.to_thread(live_snapshot.prune, self.snapshot_dir, self.snapshot_retention)
        return snapshot, directory

    async def warm_up(self) -> None:
        """Run the plan jobs once on a tiny made-up cluster, so that the first real plan finds
        Spark's code generation and the JVM's compiled code ready (a cold first plan took
        15-25 s where a warm one takes 3-5 s)."""
        brokers = [{"id": b, "rack": None, "alive": True} for b in (1, 2, 3)]
        partitions = [
            {
                "topic": "warm-up",
                "partition": p,
                "replicas": [1, 2],
                "leader": 1,
                "isr": [1, 2],
                "size_bytes": 1,
            }
            for p in range(6)
        ]
        snapshot = LiveSnapshot(0, brokers, partitions, [])
        started = time.monotonic()
        async with self.spark_lock:
            await asyncio.to_thread(
                compute_plan, self.spark, snapshot, PlanReassignmentRequest(goals=["rebalance"])
            )
        log.info("plan jobs warmed up in %.1f s", time.monotonic() - started)

    async def plan(
        self, request: PlanReassignmentRequest, *, origin: str = "request"
    ) -> PlanReassignmentResponse:
        started = time.monotonic()
        check_request(request)
        snapshot, directory = await self.take_snapshot()
        check_request(request, snapshot)
        if request.execute:
            self._check_can_execute()
        snapshot_s = time.monotonic() - started
        async with self.spark_lock:
            partitions, report = await asyncio.to_thread(compute_plan, self.spark, snapshot, request)
        # The live snapshot's cost (ZooKeeper, DescribeLogDirs, Parquet) beside the plan's own.
        report["snapshot_seconds"] = round(snapshot_s, 3)
        plan_id = uuid.uuid4().hex[:12]
        self.stats.plan_made(origin, time.monotonic() - started, report)
        log.info(
            "plan %s (%s): %d partitions change, %s moves, in %.1f s (snapshot %.1f s)",
            plan_id,
            ",".join(request.goals),
            len(partitions),
            report.get("moves", "?"),
            time.monotonic() - started,
            snapshot_s,
        )
        executing = False
        if request.execute and partitions:
            self._check_can_execute()
            sizes = {(p["topic"], p["partition"]): p["size_bytes"] or 0 for p in snapshot.partitions}
            assert self.executor is not None
            throttle = None if request.throttle_bytes_per_s == -1 else request.throttle_bytes_per_s
            try:
                await self.executor.start(
                    plan_id, partitions, sizes, origin=origin, throttle_bytes_per_s=throttle
                )
            except PlanInProgress as e:
                raise Refused(ErrorCode.REASSIGNMENT_IN_PROGRESS, str(e)) from None
            except PlanExecutionError as e:
                raise InvalidRequest(f"the plan cannot be executed: {e}") from None
            executing = True
            self._executed_report = (plan_id, report)
        return PlanReassignmentResponse(
            plan_id=plan_id,
            snapshot=directory.name,
            partitions=[
                PlannedPartition(topic=p["topic"], partition=p["partition"], replicas=list(p["replicas"]))
                for p in partitions
            ],
            report_json=orjson.dumps(report, default=str).decode(),
            executing=executing,
        )

    def _check_can_execute(self) -> None:
        if self.executor is None:
            raise InvalidRequest("this planner cannot execute plans (its executor is not available)")
        if not self.is_active():
            raise InvalidRequest("this planner is standing by (another planner holds /keel/planner)")
        state = self.executor.status().get("state")
        if state in ("running", "cancelling"):
            raise Refused(
                ErrorCode.REASSIGNMENT_IN_PROGRESS, "a plan is being executed; wait for it or cancel it"
            )

    async def cancel(self) -> CancelPlanResponse:
        if self.executor is None or self.executor.status().get("state") not in ("running",):
            raise Refused(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no plan is being executed")
        await self.executor.cancel()
        return CancelPlanResponse(status_json=self._status_json())

    async def heal(self, dead: set[int]) -> None:
        """Self-healing: replace the replicas of brokers gone past the threshold."""
        if not self.is_active():
            return
        log.warning("brokers %s gone past the threshold: planning a heal", sorted(dead))
        self.stats.heal_plans += 1
        response = await self.plan(
            PlanReassignmentRequest(goals=["heal"], execute=True), origin="self-healing"
        )
        log.info("heal plan %s: %d partitions", response.plan_id, len(response.partitions))
