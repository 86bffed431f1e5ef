"""What a chaos run saw, as plain data the checker reads: every event with its time, every
acknowledged write with its offset, every record read, every offset a consumer group
committed, every controller and partition
state observed in ZooKeeper, and what the brokers' and planners' logs tell (elections,
state changes made as controller, plans and their moves). Times are seconds since the run
started."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Event:
    t: float
    kind: str
    detail: str

    def line(self) -> str:
        return f"t={self.t:7.2f}s {self.kind}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Ack:
    """An acknowledged acks=all write: `value` at (topic, partition, offset)."""

    t: float
    topic: str
    partition: int
    offset: int
    value: str


@dataclasses.dataclass(frozen=True)
class Read:
    """A record read by `reader` (a consumer, the final drain, or a replica's log files)."""

    t: float
    reader: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclasses.dataclass(frozen=True)
class Commit:
    """An offset commit of the consumer group that succeeded: `member` (its reader name when it
    committed) committed `offset` (the next to read) of (topic, partition), answered at `t`."""

    t: float
    member: str
    topic: str
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """One version of a partition's state znode (LeaderAndIsr in ZooKeeper)."""

    t: float
    topic: str
    partition: int
    zk_version: int
    controller_epoch: int
    leader_epoch: int
    leader: int
    isr: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ControllerSeen:
    """A broker elected controller at an epoch: from /controller and /controller_epoch, or
    from a broker's controller.log ("broker N is controller at epoch E")."""

    t: float
    source: str
    epoch: int
    broker: int


@dataclasses.dataclass(frozen=True)
class ControllerZnode:
    """/controller as the observer found it, each time that changed: held by `broker` (None:
    absent). `since` is when: for a znode, its creation time (ZooKeeper's ctime, on the run's
    clock), so that a poll made late (the observer's own session lost with the ensemble's
    majority) still dates the election right; for an absence, the poll that found it."""

    t: float
    broker: int | None
    since: float


# What an Outage takes away from an election.
BROKER_DOWN = "broker-down"  # killed, stopped by SIGTERM, or paused by SIGSTOP
BROKER_CUT = "broker-cut-from-zookeeper"  # its links to every ZooKeeper server cut
ZOOKEEPER_DOWN = "zookeeper-down"  # one ZooKeeper server killed, until it serves again


@dataclasses.dataclass
class Outage:
    """A stretch in which something a controller election needs was missing, as the nemesis
    made it: a broker down or cut from ZooKeeper, or a ZooKeeper server down (`target`, a
    broker id or a server id). `end` None: not healed yet (the heal at the end heals it)."""

    kind: str
    target: int
    t: float
    end: float | None = None


@dataclasses.dataclass(frozen=True)
class ControllerActions:
    """The state changes a broker logged as controller at one epoch (`[Controller id=N
    epoch=E]` in its state-change.log): how many, and when the first and the last were."""

    t: float
    last_t: float
    source: str
    epoch: int
    broker: int
    lines: int


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """A controlled shutdown (SIGTERM): how it ended. `exit_code` -9 (or None): the broker did
    not exit by itself and the nemesis killed it."""

    t: float
    broker: int
    seconds: float
    exit_code: int | None


@dataclasses.dataclass
class PlanRun:
    """A planner plan as the planners' logs tell it: its moves, each resumption by a planner
    that took over, and how it ended (None: not yet)."""

    plan_id: str
    moves: int
    resumed_with_done: list[int] = dataclasses.field(default_factory=list)
    state: str | None = None
    done: int = 0
    failed: int = 0
    cancelled: int = 0


SUBMITTED, DONE = "submitted", "done"


@dataclasses.dataclass(frozen=True)
class PlanMove:
    """A planner's word on one move of a plan: handed to the controller (SUBMITTED, with the
    replicas sent) or found at its target (DONE). `position` (where in that planner's log)
    orders one planner's words whose times are equal."""

    t: float
    planner: str
    position: int
    kind: str
    plan_id: str
    topic: str
    partition: int
    replicas: tuple[int, ...] = ()


@dataclasses.dataclass
class FinalState:
    """The cluster after healing, as the checker needs it."""

    # (topic, partition) → (replicas, leader, isr) from ZooKeeper.
    partitions: dict[tuple[str, int], tuple[tuple[int, ...], int, tuple[int, ...]]] = dataclasses.field(
        default_factory=dict
    )
    # (topic, partition) → high watermark at the final drain.
    high_watermarks: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    # (topic, partition) → broker → offset → value, read from each replica's segment files.
    replica_logs: dict[tuple[str, int], dict[int, dict[int, str]]] = dataclasses.field(default_factory=dict)
    reassignments_in_progress: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    topics_pending_deletion: list[str] = dataclasses.field(default_factory=list)
    registered_brokers: list[int] = dataclasses.field(default_factory=list)
    expected_brokers: list[int] = dataclasses.field(default_factory=list)
    # The planner executor's last plan's state ("running", "complete", "failed", "cancelled"),
    # None without a planner or a plan.
    plan_state: str | None = None
    # Whether the run has planners, and whether one was active at the last look: healed, the
    # cluster has one, as it has every broker registered.
    planner_expected: bool = False
    planner_active: bool = False
    # Seconds from the heal until the partitions were healthy, None if they never were.
    healthy_after_s: float | None = None
    # What kept the cluster from healthy at the last look before it was (or before the
    # settling gave up): what a late heal waited for.
    held_up_by: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class History:
    events: list[Event] = dataclasses.field(default_factory=list)
    sent: int = 0
    acks: list[Ack] = dataclasses.field(default_factory=list)
    # Sends that failed or timed out: the record may or may not have been written.
    indeterminate: int = 0
    # (topic-partition, the last error's name) → how many sends failed so.
    send_failures: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    reads: list[Read] = dataclasses.field(default_factory=list)
    # The topics written only by an idempotent producer: a value there read at two offsets
    # is a violation, not a retry's duplicate.
    idempotent_topics: list[str] = dataclasses.field(default_factory=list)
    # The consumer group's successful commits, and how many commits failed or were left
    # unanswered (not counted on).
    commits: list[Commit] = dataclasses.field(default_factory=list)
    commits_failed: int = 0
    states: list[PartitionState] = dataclasses.field(default_factory=list)
    controllers: list[ControllerSeen] = dataclasses.field(default_factory=list)
    shutdowns: list[Shutdown] = dataclasses.field(default_factory=list)
    plans: dict[str, PlanRun] = dataclasses.field(default_factory=dict)
    plan_moves: list[PlanMove] = dataclasses.field(default_factory=list)
    controller_actions: list[ControllerActions] = dataclasses.field(default_factory=list)
    controller_znodes: list[ControllerZnode] = dataclasses.field(default_factory=list)
    # When the observer last read ZooKeeper: how long an absence of /controller still open at
    # the end was seen to last.
    observed_until_s: float = 0.0
    outages: list[Outage] = dataclasses.field(default_factory=list)
    # The run's ZooKeeper session timeout (brokers') and ensemble size, set by the run: what
    # the controller-absent check allows and when the ensemble has lost its majority.
    session_timeout_s: float = 4.0
    zookeeper_servers: int = 3
    # Partitions produced to, and when the workload produced.
    partitions: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    produce_started_s: float = 0.0
    produce_stopped_s: float = 0.0
    healed_s: float = 0.0

    def event(self, t: float, kind: str, detail: str) -> Event:
        event = Event(t, kind, detail)
        self.events.append(event)
        return event

    def around(self, t: float, window_s: float = 5.0, limit: int = 40) -> list[Event]:
        """The events within `window_s` of `t`, at most `limit` of the nearest."""
        near = [e for e in self.events if abs(e.t - t) <= window_s]
        near.sort(key=lambda e: abs(e.t - t))
        return sorted(near[:limit], key=lambda e: e.t)

    def summary(self) -> dict[str, Any]:
        return {
            "events": len(self.events),
            "acks": len(self.acks),
            "reads": len(self.reads),
            "commits": len(self.commits),
        }
