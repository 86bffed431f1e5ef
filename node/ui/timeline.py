"""The timeline of controller changes and leader elections, as the console observes them:
each look at ZooKeeper is compared with the one before, and every change of the controller
or its epoch, of a broker's registration, and of a partition's leader or leader epoch becomes
an event with the time it was seen. It is kept in memory (the last `MAX_EVENTS`), so it
starts empty when the console starts and misses what changed back between two looks."""

from __future__ import annotations

import collections
import dataclasses

from node.ui.view import NO_LEADER, ClusterView

MAX_EVENTS = 1000


@dataclasses.dataclass(frozen=True)
class Event:
    at_ms: int
    kind: str  # controller, broker-down, broker-up, leader
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
