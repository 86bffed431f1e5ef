"""The broker's metadata cache (Kafka's ZkMetadataCache), filled by UpdateMetadata and read by
Metadata. Live brokers are replaced wholesale; partition states are merged; a leader of -2
removes the partition (its topic is being deleted).

Every broker holds a state for every partition of the cluster, so the layout is compact: a
topic's states in one dict by partition index, each a tuple of plain values whose replica
lists are shared (actors/replica/shared_ids.py), not the request's own objects."""

from __future__ import annotations

import collections
import dataclasses
import sys
from collections.abc import Iterable
from typing import NamedTuple

from actors.admin.partition_limits import ReplicaCounts
from actors.replica.partition import TopicPartition
from actors.replica.shared_ids import SharedIds
from wire.api import (
    LiveBroker,
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from wire.api.update_metadata import LEADER_DURING_DELETE
from wire.endpoint import Endpoint
from wire.errors import ErrorCode


class PartitionMetadata(NamedTuple):
    """What the cache keeps of one partition's UpdateMetadata state."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    controller_epoch: int


@dataclasses.dataclass
class MetadataCache:
    controller_id: int = -1
    live_brokers: dict[int, LiveBroker] = dataclasses.field(default_factory=dict)
    # Partition states by topic, then by partition index.
    by_topic: dict[str, dict[int, PartitionMetadata]] = dataclasses.field(default_factory=dict)
    # Partition replicas per broker id, kept as states come and go, for the admin's limits.
    replicas_by_broker: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    shared_ids: SharedIds = dataclasses.field(default_factory=SharedIds, repr=False, compare=False)

    def update(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an accepted UpdateMetadata; returns the partitions it removed."""
        self.take_brokers(request)
        return self.take_states(request.partition_states)

    def take_brokers(self, request: UpdateMetadataRequest) -> None:
        """An accepted UpdateMetadata's controller and live brokers (replaced wholesale)."""
        self.controller_id = request.controller_id
        self.live_brokers = {b.broker_id: b for b in request.live_brokers}

    def live_broker_epochs(self) -> dict[int, int]:
        return {broker_id: broker.broker_epoch for broker_id, broker in self.live_brokers.items()}

    def live_broker_epoch(self, broker_id: int) -> int | None:
        """The broker epoch of `broker_id`'s live registration; None while it is not live."""
        broker = self.live_brokers.get(broker_id)
        return None if broker is None else broker.broker_epoch

    def state(self, tp: TopicPartition) -> PartitionMetadata | None:
        topic = self.by_topic.get(tp.topic)
        return None if topic is None else topic.get(tp.partition)

    def knows(self, tp: TopicPartition) -> bool:
        return self.state(tp) is not None

    def put(self, tp: TopicPartition, state: PartitionMetadata) -> None:
        """Set one partition's state as it is (the replica counts are left alone: for tests
        that make a broker's view stale)."""
        self.by_topic.setdefault(tp.topic, {})[tp.partition] = state

    def take_states(self, states: Iterable[UpdateMetadataPartitionState]) -> list[TopicPartition]:
        """Merge partition states of an accepted UpdateMetadata (all at once, or slice by slice
        after `take_brokers`); returns the partitions they removed."""
        deleted = []
        shared = self.shared_ids
        by_topic = self.by_topic
        for state in states:
            # One copy of each name across the process, not the request's copy per state.
            topic = sys.intern(state.topic)
            partitions = by_topic.get(topic)
            replaced = None if partitions is None else partitions.get(state.partition)
            if replaced is not None:
                self.replicas_by_broker.subtract(replaced.replicas)
            if state.leader == LEADER_DURING_DELETE:
                if replaced is not None:
                    assert partitions is not None
                    del partitions[state.partition]
                    deleted.append(TopicPartition(topic, state.partition))
                    if not partitions:
                        del by_topic[topic]
                continue
            replicas = shared(state.replicas)
            if partitions is None:
                partitions = by_topic[topic] = {}
            partitions[state.partition] = PartitionMetadata(
                state.leader,
                state.leader_epoch,
                shared(state.isr),
                state.partition_epoch,
                replicas,
                shared(state.offline_replicas),
                state.controller_epoch,
            )
            self.replicas_by_broker.update(replicas)
        return deleted

    def replica_counts(self) -> ReplicaCounts:
        by_broker = {b: n for b, n in self.replicas_by_broker.items() if n > 0}
        return ReplicaCounts(sum(by_broker.values()), by_broker)

    def copy(self) -> MetadataCache:
        return MetadataCache(
            self.controller_id,
            dict(self.live_brokers),
            {topic: dict(states) for topic, states in self.by_topic.items()},
            collections.Counter(self.replicas_by_broker),
            self.shared_ids,
        )

    def describe(self, topics: list[str] | None, listener: str | None = None) -> MetadataResponse:
        """The Metadata answer: every topic when `topics` is None, else those asked for. Each
        broker is named by its endpoint on `listener`, the one the request came in on, and
        left out without one (Kafka's MetadataCache.getAliveEndpoints); None: its first."""
        names = sorted(self.by_topic) if topics is None else topics
        brokers = []
        for _, broker in sorted(self.live_brokers.items()):
            endpoint = next((e for e in broker.endpoints if listener is None or e.listener == listener), None)
            if endpoint is not None or listener is None:
                brokers.append(self._broker(broker, endpoint))
        return MetadataResponse(
            controller_id=self.controller_id,
            brokers=brokers,
            topics=[self._topic(name) for name in names],
        )

    @staticmethod
    def _broker(broker: LiveBroker, endpoint: Endpoint | None) -> MetadataBroker:
        return MetadataBroker(
            broker_id=broker.broker_id,
            host=endpoint.host if endpoint else "",
            port=endpoint.port if endpoint else -1,
            rack=broker.rack,
        )

    def _topic(self, name: str) -> MetadataTopic:
        states = self.by_topic.get(name)
        if not states:
            return MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        return MetadataTopic(
            error_code=ErrorCode.NONE,
            name=name,
            partitions=[self._partition(p, states[p]) for p in sorted(states)],
        )

    def _partition(self, partition: int, state: PartitionMetadata) -> MetadataPartition:
        leader_live = state.leader in self.live_brokers
        return MetadataPartition(
            error_code=ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
            partition=partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            replicas=list(state.replicas),
            isr=list(state.isr),
            offline_replicas=list(state.offline_replicas),
        )
