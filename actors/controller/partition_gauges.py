"""The controller's maps of partition states and of leadership, each keeping its gauge
(OfflinePartitionsCount, PreferredReplicaImbalanceCount: spec §13) current as it changes, as
Kafka's ControllerContext keeps them.

Counting the gauges by a pass over every partition cost a second or more per read at 1M
partitions, and a console or a benchmark polling DescribeController paid it again after each
event. Here a read costs the topics being deleted (left out of both counts).

Both maps are dicts with their writes overridden; reads stay the dict's own. A write through a
method not overridden here (`update`, `setdefault`, ...) would bypass the gauge, so those raise.
A failover's leadership arrives whole (`Leadership.load`, a dict's update): its imbalance is
counted afterwards in slices (`recount_in_slices`), and a read before then counts it in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Generic, NoReturn, TypeVar

from actors.base.loop_slices import sliced
from actors.base.ports import LeaderAndIsr, LeadershipInfo, ReplicaAssignment, TopicPartition


class _PerTopic:
    """Partitions counted, by topic."""

    __slots__ = ("_by_topic", "total")

    def __init__(self) -> None:
        self._by_topic: dict[str, set[int]] = {}
        self.total = 0

    def set(self, tp: TopicPartition, counted: bool) -> None:
        partitions = self._by_topic.get(tp.topic)
        if counted:
            if partitions is None:
                partitions = self._by_topic[tp.topic] = set()
            if tp.partition not in partitions:
                partitions.add(tp.partition)
                self.total += 1
        elif partitions is not None and tp.partition in partitions:
            partitions.remove(tp.partition)
            self.total -= 1
            if not partitions:
                del self._by_topic[tp.topic]

    def count_without(self, topics: Collection[str]) -> int:
        return self.total - sum(len(self._by_topic.get(t, ())) for t in topics)

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, partitions in self._by_topic.items() for p in partitions]


def has_preferred_leader(assignment: ReplicaAssignment, state: LeaderAndIsr) -> bool:
    """Whether a partition counts as led by its preferred (first) replica. A first replica
    that a reassignment is adding counts as preferred until it joins the ISR (Kafka's
    hasPreferredLeader, followed literally)."""
    preferred = assignment.replicas[0]
    if preferred in assignment.adding:
        return preferred not in state.isr
    return state.leader == preferred


def _imbalanced(assignment: ReplicaAssignment, info: LeadershipInfo | None) -> bool:
    return (
        info is not None
        and bool(assignment.replicas)
        and not has_preferred_leader(assignment, info.leader_and_isr)
    )


_NOT_ASSIGNED: Mapping[int, ReplicaAssignment] = {}


def _unsupported(*_: Any, **__: Any) -> NoReturn:
    raise TypeError("a write the partition gauges would not see: use item assignment, del or pop")


S = TypeVar("S", bound=int)


class PartitionStates(dict[TopicPartition, S], Generic[S]):
    """Each partition's state (`offline` and `new` are OfflinePartition's and NewPartition's
    values: the states' enum lives with the context), counting the offline ones, and keeping
    those without a leader elected (new or offline) for the elections that go over them
    after every broker change: a pass over them, not over every partition."""

    __slots__ = ("_new_state", "_offline", "_offline_state", "_unelected")

    def __init__(self, offline: S, new: S) -> None:
        super().__init__()
        self._offline_state, self._new_state = offline, new
        self._offline = _PerTopic()
        self._unelected = _PerTopic()

    def __setitem__(self, tp: TopicPartition, state: S) -> None:
        super().__setitem__(tp, state)
        self._counted(tp, state)

    def _counted(self, tp: TopicPartition, state: S | None) -> None:
        offline, unelected = self._offline, self._unelected
        if state == self._offline_state:
            offline.set(tp, True)
            unelected.set(tp, True)
            return
        # Nothing to look up in the usual case: no partition offline or new.
        if offline.total:
            offline.set(tp, False)
        if state == self._new_state:
            unelected.set(tp, True)
        elif unelected.total:
            unelected.set(tp, False)

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        self._counted(tp, None)

    def pop(self, tp: TopicPartition, *default: Any) -> Any:
        found = super().pop(tp, *default)
        self._counted(tp, None)
        return found

    def load(
        self, states: Mapping[TopicPartition, S], *, not_online: Collection[TopicPartition] | None = None
    ) -> None:
        """Many states at once, as a failover sets every partition's: one update, then only
        the partitions that are not online counted; `not_online`, when the caller knows them
        (every other partition of `states` online), spares the pass that finds them."""
        if self._offline.total or self._unelected.total:
            for tp in states:
                self._counted(tp, None)
        super().update(states)
        unelected = (self._offline_state, self._new_state)
        candidates = states if not_online is None else not_online
        for tp in [tp for tp in candidates if states.get(tp) in unelected]:
            self._counted(tp, states[tp])

    def offline_count(self, leaving_out: Collection[str]) -> int:
        """Partitions offline, those of the topics `leaving_out` left out."""
        return self._offline.count_without(leaving_out)

    def new_or_offline(self) -> list[TopicPartition]:
        """The partitions without a leader elected, topic by topic."""
        return self._unelected.partitions()

    update = setdefault = popitem = clear = __ior__ = _unsupported


class Leadership(dict[TopicPartition, LeadershipInfo]):
    """Each partition's leader and ISR as the controller knows them, counting those not led by
    their preferred replica (`assignment` gives a partition's replicas)."""

    __slots__ = ("_assignment", "_imbalanced", "_loads", "_partitions_of", "_stale")

    def __init__(
        self,
        assignment: Callable[[TopicPartition], ReplicaAssignment],
        partitions_of: Callable[[str], Mapping[int, ReplicaAssignment] | None],
    ) -> None:
        """`assignment` gives a partition's replicas; `partitions_of` a topic's, by partition
        (None: a topic not assigned), for the count of a whole load."""
        super().__init__()
        self._assignment = assignment
        self._partitions_of = partitions_of
        self._imbalanced = _PerTopic()
        self._stale = False  # loaded whole, not counted yet
        self._loads = 0

    def __setitem__(self, tp: TopicPartition, info: LeadershipInfo) -> None:
        super().__setitem__(tp, info)
        self._imbalanced.set(tp, _imbalanced(self._assignment(tp), info))

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        self._imbalanced.set(tp, False)

    def pop(self, tp: TopicPartition, *default: Any) -> Any:
        found = super().pop(tp, *default)
        self._imbalanced.set(tp, False)
        return found

    @property
    def counted(self) -> bool:
        """False between a `load` and its count."""
        return not self._stale

    def assignment_changed(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self._imbalanced.set(tp, _imbalanced(assignment, self.get(tp)))

    def load(self, states: Mapping[TopicPartition, LeadershipInfo]) -> None:
        """Every partition's state at once, as a failover reads them, in place of what the
        map held: no count per partition until `recount_in_slices` or the next read."""
        super().clear()
        super().update(states)
        self._stale = True
        self._loads += 1

    async def recount_in_slices(self) -> None:
        """Count the imbalance after a `load`, the loop turning between slices (the
        controller's event waits; no other event changes the map meanwhile)."""
        if not self._stale:
            return
        loads, counted = self._loads, _PerTopic()
        async for items in sliced(list(self.items())):
            self._count_into(counted, items)
        if self._stale and loads == self._loads:
            self._imbalanced, self._stale = counted, False

    def imbalanced_count(self, leaving_out: Collection[str]) -> int:
        """Partitions not led by their preferred replica, those of the topics `leaving_out`
        left out."""
        if self._stale:
            counted = _PerTopic()
            self._count_into(counted, self.items())
            self._imbalanced, self._stale = counted, False
        return self._imbalanced.count_without(leaving_out)

    def _count_into(
        self, counted: _PerTopic, items: Iterable[tuple[TopicPartition, LeadershipInfo | None]]
    ) -> None:
        partitions_of, topic, assigned = self._partitions_of, None, _NOT_ASSIGNED
        for tp, info in items:  # `_imbalanced`, inlined: a failover's count goes over 1M
            if info is None:
                continue
            if tp.topic != topic:  # a load comes topic by topic: one lookup per topic
                topic = tp.topic
                assigned = partitions_of(topic) or _NOT_ASSIGNED
            replicas = assigned.get(tp.partition)
            if replicas is None or not replicas.replicas:
                continue
            preferred, state = replicas.replicas[0], info.leader_and_isr
            if preferred in state.isr if preferred in replicas.adding else state.leader != preferred:
                counted.set(tp, True)

    update = setdefault = popitem = clear = __ior__ = _unsupported
