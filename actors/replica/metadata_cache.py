"""The broker's metadata cache (Kafka's ZkMetadataCache), filled by UpdateMetadata and read by
Metadata. Live brokers are replaced wholesale; partition states are merged; a leader of -2
removes the partition (its topic is being deleted)."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

from actors.admin.partition_limits import ReplicaCounts
from actors.replica.partition import TopicPartition
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


@dataclasses.dataclass
class MetadataCache:
    controller_id: int = -1
    live_brokers: dict[int, LiveBroker] = dataclasses.field(default_factory=dict)
    partitions: dict[TopicPartition, UpdateMetadataPartitionState] = dataclasses.field(default_factory=dict)
    # The same states by topic, so that Metadata for one topic reads only that topic's.
    by_topic: dict[str, dict[int, UpdateMetadataPartitionState]] = dataclasses.field(default_factory=dict)
    # Partition replicas per broker id, kept as states come and go, for the admin's limits.
    replicas_by_broker: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)

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

    def take_states(self, states: Iterable[UpdateMetadataPartitionState]) -> list[TopicPartition]:
        """Merge partition states of an accepted UpdateMetadata (all at once, or slice by slice
        after `take_brokers`); returns the partitions they removed."""
        deleted = []
        for state in states:
            tp = TopicPartition(state.topic, state.partition)
            replaced = self.partitions.get(tp)
            if replaced is not None:
                self.replicas_by_broker.subtract(replaced.replicas)
            if state.leader == LEADER_DURING_DELETE:
                if self.partitions.pop(tp, None) is not None:
                    deleted.append(tp)
                    topic = self.by_topic.get(tp.topic, {})
                    topic.pop(tp.partition, None)
                    if not topic:
                        self.by_topic.pop(tp.topic, None)
            else:
                self.partitions[tp] = state
                self.by_topic.setdefault(tp.topic, {})[tp.partition] = state
                self.replicas_by_broker.update(state.replicas)
        return deleted

    def replica_counts(self) -> ReplicaCounts:
        by_broker = {b: n for b, n in self.replicas_by_broker.items() if n > 0}
        return ReplicaCounts(sum(by_broker.values()), by_broker)

    def topic_states(self, topic: str) -> list[UpdateMetadataPartitionState]:
        states = self.by_topic.get(topic, {})
        return [states[p] for p in sorted(states)]

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
            topics=[self._topic(name, self.topic_states(name)) for name in names],
        )

    @staticmethod
    def _broker(broker: LiveBroker, endpoint: Endpoint | None) -> MetadataBroker:
        return MetadataBroker(
            broker_id=broker.broker_id,
            host=endpoint.host if endpoint else "",
            port=endpoint.port if endpoint else -1,
            rack=broker.rack,
        )

    def _topic(self, name: str, states: list[UpdateMetadataPartitionState] | None) -> MetadataTopic:
        if not states:
            return MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        return MetadataTopic(
            error_code=ErrorCode.NONE, name=name, partitions=[self._partition(s) for s in states]
        )

    def _partition(self, state: UpdateMetadataPartitionState) -> MetadataPartition:
        leader_live = state.leader in self.live_brokers
        return MetadataPartition(
            error_code=ErrorCode.NONE if leader_live else ErrorCode.LEADER_NOT_AVAILABLE,
            partition=state.partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            replicas=list(state.replicas),
            isr=list(state.isr),
            offline_replicas=list(state.offline_replicas),
        )
