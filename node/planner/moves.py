"""The executor's decisions, without a cluster: what a plan's moves are, which to hand to
the controller next, what the controller's answers mean for each, and how far the plan is.

A move is one partition of the plan: its replicas when the plan started (`source`), the
plan's replicas for it (`target`) and its size. The executor sends it to the controller as
one reassignment, or as two when the plan replaces every replica of a partition: a leader
serving a reassignment copies to every adding replica at once, so the first step keeps one
current replica (the leader) and the second replaces it, and no partition ever has all its
replicas moving together.

Each look at the cluster reconciles the moves with what the controller shows: the
reassignments in progress (ListPartitionReassignments) and the current replicas (Metadata).
The same rules serve a fresh plan and one resumed after a restart: a move at its target is
done, one whose step is in progress is in flight, one whose step completed goes on to the
next, and one whose reassignment went elsewhere failed.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

Partition = tuple[str, int]

# How long a move may look neither in progress nor at its step or target before it counts
# as failed: a broker's metadata cache lags the controller by an UpdateMetadata. A cache
# that shows the step's start (the replicas of both sides) but no longer the reassignment
# surely lags, and gets the long wait; anything else (most often the replicas from before
# the step: the reassignment was cancelled) is taken as it stands once a cache two
# UpdateMetadata behind has had time to catch up.
SETTLE_S = 30.0
QUICK_SETTLE_S = 5.0


class MoveState(enum.StrEnum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({MoveState.DONE, MoveState.FAILED, MoveState.CANCELLED})


@dataclasses.dataclass
class Move:
    topic: str
    partition: int
    target: tuple[int, ...]
    size_bytes: int = 0
    source: tuple[int, ...] = ()
    state: MoveState = MoveState.PENDING
    # The step last handed to the controller, and the replicas it started from.
    step: tuple[int, ...] | None = None
    step_origin: tuple[int, ...] = ()
    reason: str = ""
    unsettled_since: float | None = None

    @property
    def tp(self) -> Partition:
        return (self.topic, self.partition)

    @property
    def added(self) -> frozenset[int]:
        """The brokers that receive a copy of the partition."""
        return frozenset(self.target) - frozenset(self.source)

    @property
    def bytes_total(self) -> int:
        return self.size_bytes * len(self.added)

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "target": list(self.target),
            "size_bytes": self.size_bytes,
            "source": list(self.source),
            "state": str(self.state),
            "step": None if self.step is None else list(self.step),
            "step_origin": list(self.step_origin),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> Move:
        step = value.get("step")
        return cls(
            topic=str(value["topic"]),
            partition=_int(value["partition"]),
            target=_ints(value["target"]),
            size_bytes=_int(value.get("size_bytes", 0)),
            source=_ints(value.get("source", [])),
            state=MoveState(str(value.get("state", "pending"))),
            step=None if step is None else _ints(step),
            step_origin=_ints(value.get("step_origin", [])),
            reason=str(value.get("reason", "")),
        )


def _int(value: object) -> int:
    if type(value) is not int:
        raise ValueError(f"{value!r} is not an integer")
    return value


def _ints(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{value!r} is not a list of integers")
    return tuple(_int(v) for v in value)


# --- steps and batches ---


def next_step(current: Sequence[int], target: Sequence[int], leader: int | None) -> tuple[int, ...]:
    """What to hand to the controller now: the target, unless it shares no replica with
    the current ones (and the partition has more than one): then the target's first RF-1
    replicas behind one current replica, the leader when it is one, so that it stays leader."""
    if len(target) < 2 or not current or set(current) & set(target):
        return tuple(target)
    keep = leader if leader in current else current[0]
    assert keep is not None
    return (keep, *target[: len(target) - 1])


def touched(origin: Iterable[int], step: Iterable[int]) -> frozenset[int]:
    """The brokers a step loads: those it adds a replica to and those it removes one from.
    A step that only reorders the replicas touches none."""
    return frozenset(origin) ^ frozenset(step)


def broker_load(moves: Iterable[Move]) -> Counter[int]:
    """Moves in flight per broker, each counted on its source and destination brokers."""
    load: Counter[int] = Counter()
    for move in moves:
        if move.state is MoveState.IN_FLIGHT and move.step is not None:
            load.update(touched(move.step_origin, move.step))
    return load


def select_batch(
    moves: Iterable[Move],
    current: Mapping[Partition, Sequence[int]],
    leaders: Mapping[Partition, int],
    max_per_broker: int,
    *,
    blocked: Iterable[Partition] = (),
) -> list[tuple[Move, tuple[int, ...]]]:
    """The pending moves to start now, in plan order, each with its step: a move goes when
    every broker it touches has fewer than `max_per_broker` moves in flight, counting those
    already chosen. A move that does not fit does not hold back later ones that do.
    `blocked` partitions (another reassignment in progress) wait."""
    moves = list(moves)
    load = broker_load(moves)
    held = set(blocked)
    chosen = []
    for move in moves:
        if move.state is not MoveState.PENDING or move.tp in held or move.tp not in current:
            continue
        origin = tuple(current[move.tp])
        step = next_step(origin, move.target, leaders.get(move.tp))
        brokers = touched(origin, step)
        if all(load[b] < max_per_broker for b in brokers):
            load.update(brokers)
            chosen.append((move, step))
    return chosen


def start_step(move: Move, origin: Sequence[int], step: tuple[int, ...]) -> None:
    move.state, move.step, move.step_origin, move.unsettled_since = (
        MoveState.IN_FLIGHT,
        step,
        tuple(origin),
        None,
    )


# --- reconciling with the controller ---


@dataclasses.dataclass(frozen=True)
class Ongoing:
    """A reassignment in progress, as ListPartitionReassignments shows it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def reconcile(
    moves: Iterable[Move],
    current: Mapping[Partition, Sequence[int]],
    ongoing: Mapping[Partition, Ongoing],
    now: float,
    *,
    settle_s: float = SETTLE_S,
) -> tuple[list[Move], set[Partition]]:
    """Bring each unfinished move up to date with the controller; returns the moves whose
    state changed and the pending partitions held by a reassignment that is not the plan's."""
    changed: list[Move] = []
    blocked: set[Partition] = set()
    for move in moves:
        if move.state in FINISHED:
            continue
        before = (move.state, move.reason)
        if _reconcile_one(move, current.get(move.tp), ongoing.get(move.tp), now, settle_s):
            blocked.add(move.tp)
        if (move.state, move.reason) != before:
            changed.append(move)
    return changed, blocked


def _reconcile_one(
    move: Move, replicas: Sequence[int] | None, ongoing: Ongoing | None, now: float, settle_s: float
) -> bool:
    """Update one move; True when it is pending behind a reassignment not the plan's."""
    if replicas is None:
        move.state, move.reason = MoveState.FAILED, "the partition no longer exists"
        return False
    in_flight = move.state is MoveState.IN_FLIGHT
    if ongoing is not None:
        if in_flight and ongoing.target != move.step:
            move.state = MoveState.FAILED
            move.reason = f"superseded by another reassignment to {list(ongoing.target)}"
        return not in_flight
    if tuple(replicas) == move.target:
        move.state, move.reason, move.unsettled_since = MoveState.DONE, "", None
    elif in_flight and tuple(replicas) == move.step:
        # A first step completed: the next one starts from here.
        move.state, move.unsettled_since = MoveState.PENDING, None
    elif in_flight:
        assert move.step is not None
        lagging = frozenset(replicas) == frozenset(move.step) | frozenset(move.step_origin)
        if move.unsettled_since is None:
            move.unsettled_since = now
        elif now - move.unsettled_since >= (settle_s if lagging else min(settle_s, QUICK_SETTLE_S)):
            move.state = MoveState.FAILED
            move.reason = f"cancelled outside the plan: the replicas are {list(replicas)}"
    return False


# --- progress ---


def bytes_copied(move: Move, adding_sizes: Mapping[int, int]) -> int:
    """What a move has copied: its full size on each added broker that holds a complete
    replica (a finished move, or a first step that completed) and what each replica being
    added holds so far (`adding_sizes`, broker → bytes)."""
    if move.state is MoveState.DONE:
        return move.bytes_total
    if move.state is MoveState.PENDING:
        # Pending after a first step: that step's new replicas are complete.
        return move.size_bytes * len(frozenset(move.step or ()) & move.added)
    if move.state is not MoveState.IN_FLIGHT or move.step is None:
        return 0
    copying = frozenset(move.step) - frozenset(move.step_origin)
    total = 0
    for broker in move.added:
        if broker in copying:
            total += min(move.size_bytes, adding_sizes.get(broker, 0))
        elif broker in move.step_origin:
            total += move.size_bytes
    return total


class RateWindow:
    """Bytes per second over the last `window_s` seconds of samples."""

    def __init__(self, window_s: float = 30.0) -> None:
        self.window_s = window_s
        self._samples: list[tuple[float, int]] = []

    def add(self, now: float, copied: int) -> None:
        self._samples = [s for s in self._samples if now - s[0] <= self.window_s] + [(now, copied)]

    def rate(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, c0), (t1, c1) = self._samples[0], self._samples[-1]
        return max(0.0, (c1 - c0) / (t1 - t0)) if t1 > t0 else None


def seconds_left(total: int, copied: int, rate: float | None) -> float | None:
    if total <= copied:
        return 0.0
    return None if not rate else (total - copied) / rate
