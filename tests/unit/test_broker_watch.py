"""Self-healing's feed: the registered brokers whenever they change, with the brokers that
hold replicas; a failed look is retried at the next one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from actors.base.ports import BrokerInfo, RegisteredBroker, ReplicaAssignment, TopicAssignment
from node.planner.broker_watch import follow_brokers
from tests.support import eventually


class Store:
    def __init__(self) -> None:
        self.live = {1, 2, 3}
        self.assignment = {0: (1, 2), 1: (2, 3)}
        self.fail: Exception | None = None
        self.looks = 0

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        self.looks += 1
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        return [RegisteredBroker(BrokerInfo(b, ()), b) for b in sorted(self.live)]

    async def topics(self, *, watch: bool = False) -> set[str]:
        return {"t"}

    async def topic_assignments(self, topics: set[str], *, watch: bool = False) -> dict[str, TopicAssignment]:
        partitions = {p: ReplicaAssignment(r) for p, r in self.assignment.items()}
        return {"t": TopicAssignment("t", partitions)}


class Listener:
    def __init__(self) -> None:
        self.seen: list[tuple[set[int], set[int] | None]] = []

    def brokers_changed(self, registered: Iterable[int], *, holders: Iterable[int] | None = None) -> None:
        self.seen.append((set(registered), None if holders is None else set(holders)))


async def test_the_registrations_go_to_self_healing_when_they_change() -> None:
    store, listener = Store(), Listener()
    task = asyncio.create_task(follow_brokers(store, listener, interval_s=0.001))
    try:
        await eventually(lambda: asyncio.sleep(0, listener.seen), timeout=5, message="nothing fed")
        looked = store.looks
        await eventually(
            lambda: asyncio.sleep(0, store.looks >= looked + 5), timeout=5, message="no more looks"
        )
        assert listener.seen == [({1, 2, 3}, {1, 2, 3})], "an unchanged set is fed once"
        store.fail = RuntimeError("connection loss")
        store.live = {1, 2}
        await eventually(
            lambda: asyncio.sleep(0, len(listener.seen) == 2), timeout=5, message="the change not fed"
        )
        assert listener.seen[1] == ({1, 2}, {1, 2, 3})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
