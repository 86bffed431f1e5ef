"""Feeds self-healing what ZooKeeper shows: the brokers registered under `/brokers/ids`,
and, each time that set changes, the brokers that hold replicas (from the topic znodes).

It looks every `interval_s` rather than keeping a watch: a look is one getChildren, the
threshold it serves is minutes, and a poll cannot miss an event between two watches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from actors.base.ports import RegisteredBroker, TopicAssignment

log = logging.getLogger(__name__)


class RegistrationStore(Protocol):
    """The part of the ClusterStore port this needs (ZkClusterStore has it)."""

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]: ...

    async def topics(self, *, watch: bool = False) -> set[str]: ...

    async def topic_assignments(
        self, topics: set[str], *, watch: bool = False
    ) -> dict[str, TopicAssignment]: ...


class BrokerListener(Protocol):
    def brokers_changed(self, registered: Iterable[int], *, holders: Iterable[int] | None = None) -> None: ...


async def replica_holders(store: RegistrationStore) -> set[int]:
    assignments = await store.topic_assignments(await store.topics())
    return {
        broker
        for topic in assignments.values()
        for assignment in topic.partitions.values()
        for broker in assignment.replicas
    }


async def follow_brokers(
    store: RegistrationStore, healer: BrokerListener, *, interval_s: float = 1.0
) -> None:
    """Until cancelled: the registrations to the healer whenever they change."""
    last: set[int] | None = None
    failing = False
    while True:
        try:
            registered = {b.info.broker_id for b in await store.registered_brokers()}
            if registered != last:
                healer.brokers_changed(registered, holders=await replica_holders(store))
                last = registered
            failing = False
        except asyncio.CancelledError:
            raise
        except Exception as e:  # ZooKeeper away: the next look tries again
            if not failing:
                log.warning("self-healing cannot read the broker registrations: %s", e)
            failing = True
        await asyncio.sleep(interval_s)
