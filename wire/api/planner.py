"""The planner's APIs (Keel's own, 1002 and up): answered by the planner process
(`bin/keel-planner`), except DescribePlanner, which any broker answers from ZooKeeper.

PlanReassignment (1002): compute a reassignment plan on the planner's latest live snapshot.
`goals` from rebalance, remove-brokers, heal, leaders (several may be combined); `brokers` the
target broker set (None: the live brokers); `remove_brokers` the brokers to empty; `topics`
limits the plan to those topics (None: every topic); `balance` is `count` or `bytes`;
`capacity` weighs brokers (broker id as a string → relative capacity); `execute` hands the
plan to the planner's executor, with `throttle_bytes_per_s` (-1: the planner's default).
The response carries the partitions that change (Kafka's reassignment JSON entries) and the
plan's report as a JSON object (moves, lower_bound, bytes, leader_changes, spreads and rack
violations before and after, seconds, per-broker rows). Errors: INVALID_REQUEST (42) for an
unknown goal, an unknown broker, a bad balance or a plan that cannot be made, with the reason
in `error_message`; REASSIGNMENT_IN_PROGRESS (60) when `execute` is asked while the executor
still carries out another plan; BROKER_NOT_AVAILABLE (8) when ZooKeeper cannot be read.
Nothing is executed unless the whole answer is a success.

PlannerStatus (1003): the executor's status as a JSON object (`{}` before any plan was
executed): the plan id, its state, moves done and total, bytes copied and total, the rate
and the time left; plus whether this planner holds `/keel/planner`.

CancelPlan (1004): stop the executor's plan (the moves in flight are cancelled at the
controller). NO_REASSIGNMENT_IN_PROGRESS (85) when no plan runs.

DescribePlanner (1005): what `/keel/planner` holds, read by the answering broker: the active
planner's endpoint. BROKER_NOT_AVAILABLE (8) with "no planner is running" when it is absent.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanReassignmentRequest(Request):
    API_KEY = ApiKey.PLAN_REASSIGNMENT

    goals: list[str] = dataclasses.field(default_factory=list)
    brokers: list[int] | None = None
    remove_brokers: list[int] = dataclasses.field(default_factory=list)
    topics: list[str] | None = None
    balance: str = "count"
    capacity: dict[str, float] | None = None
    execute: bool = False
    throttle_bytes_per_s: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannedPartition(Struct):
    topic: str
    partition: int
    replicas: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanReassignmentResponse(Response):
    plan_id: str = ""
    # The snapshot the plan was computed on (its directory under planner.snapshot.dir).
    snapshot: str = ""
    partitions: list[PlannedPartition] = dataclasses.field(default_factory=list)
    # The report, a JSON object (its fields are described in docs/PLANNER.md).
    report_json: str = "{}"
    executing: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannerStatusRequest(Request):
    API_KEY = ApiKey.PLANNER_STATUS


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannerStatusResponse(Response):
    # The executor's status(), a JSON object; "{}" before any plan was executed.
    status_json: str = "{}"
    active: bool = False
    self_healing: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CancelPlanRequest(Request):
    API_KEY = ApiKey.CANCEL_PLAN


@dataclasses.dataclass(frozen=True, kw_only=True)
class CancelPlanResponse(Response):
    status_json: str = "{}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribePlannerRequest(Request):
    API_KEY = ApiKey.DESCRIBE_PLANNER


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribePlannerResponse(Response):
    host: str = ""
    port: int = -1
    # The planner's Spark master, as registered.
    spark_master: str = ""
