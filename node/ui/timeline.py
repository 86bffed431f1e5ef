"""The timeline of controller changes and leader elections, as the console observes them:
each look at ZooKeeper is compared with the one before, and every change of the controller
or its epoch, of a broker's registration, and of a partition's leader or leader epoch becomes
an event with the time it was seen. The controller's own metrics add what two looks cannot
show: its leader-election and unclean-election counts (Kafka's LeaderElectionRateAndTimeMs and
UncleanLeaderElectionsPerSec) count elections that changed back between two looks too. It is
kept in memory (the last `MAX_EVENTS`), so it starts empty when the console starts."""

from __future__ import annotations

import collections
import dataclasses

from node.ui.view import NO_LEADER, ClusterView

MAX_EVENTS = 1000


@dataclasses.dataclass(frozen=True)
class Event:
    at_ms: int
    kind: str  # controller, broker-down, broker-up, leader, election
    text: str


def changes(before: ClusterView | None, after: ClusterView) -> list[Event]:
    """What changed from `before` to `after` (nothing on the first look but the controller)."""
    at = after.taken_ms
    events = []
    if before is None or (before.controller_id, before.controller_epoch) != (
        after.controller_id,
        after.controller_epoch,
    ):
        if after.controller_id is None:
            events.append(Event(at, "controller", "no active controller"))
        else:
            was = "" if before is None or before.controller_id is None else f" (was {before.controller_id})"
            events.append(
                Event(
                    at,
                    "controller",
                    f"controller is broker {after.controller_id}, epoch {after.controller_epoch}{was}",
                )
            )
    if before is None:
        return events
    events.extend(_counted_elections(before, after))
    old_brokers = {b.broker_id: b for b in before.brokers}
    for broker in after.brokers:
        old = old_brokers.get(broker.broker_id)
        if old is not None and old.alive and not broker.alive:
            events.append(Event(at, "broker-down", f"broker {broker.broker_id} went down"))
        elif (old is None or not old.alive) and broker.alive:
            events.append(
                Event(
                    at,
                    "broker-up",
                    f"broker {broker.broker_id} registered (broker epoch {broker.broker_epoch})",
                )
            )
    old_partitions = {(p.topic, p.partition): p for p in before.partitions}
    for p in after.partitions:
        previous = old_partitions.get((p.topic, p.partition))
        if previous is None or (previous.leader, previous.leader_epoch) == (p.leader, p.leader_epoch):
            continue
        leader = "none" if p.leader == NO_LEADER else f"broker {p.leader}"
        was = "none" if previous.leader == NO_LEADER else f"broker {previous.leader}"
        events.append(
            Event(
                at,
                "leader",
                f"{p.name}: leader {leader} at leader epoch {p.leader_epoch} "
                f"(was {was} at {previous.leader_epoch})",
            )
        )
    return events


# The controller's counters the timeline follows: (metric, what a rise of it says).
_ELECTION_COUNTERS = (
    ("LeaderElectionRateAndTimeMs.count", "leader election round(s)"),
    ("UncleanLeaderElections", "unclean leader election(s)"),
)


def _counted_elections(before: ClusterView, after: ClusterView) -> list[Event]:
    """Elections the controller counted between two looks at its metrics. A count is only
    compared within one controller's reign: a new controller counts from zero."""
    same_reign = (before.controller_id, before.controller_epoch) == (
        after.controller_id,
        after.controller_epoch,
    )
    if not same_reign or not before.controller_metrics or not after.controller_metrics:
        return []
    events = []
    for metric, what in _ELECTION_COUNTERS:
        rise = int(after.controller_metrics.get(metric, 0) - before.controller_metrics.get(metric, 0))
        if rise > 0:
            events.append(
                Event(
                    after.taken_ms,
                    "election",
                    f"controller {after.controller_id} ran {rise} {what} ({metric.split('.')[0]})",
                )
            )
    return events


class Timeline:
    def __init__(self, limit: int = MAX_EVENTS) -> None:
        self._events: collections.deque[Event] = collections.deque(maxlen=limit)
        self._last: ClusterView | None = None

    def observe(self, view: ClusterView) -> list[Event]:
        new = changes(self._last, view)
        self._events.extend(new)
        self._last = view
        return new

    def newest_first(self) -> list[Event]:
        return list(reversed(self._events))
