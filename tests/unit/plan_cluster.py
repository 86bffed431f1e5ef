"""A controller in memory for the executor's tests: assignments, reassignments in progress
that complete when the test says so, config changes recorded, replica sizes set by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from actors.base.ports import ReplicaAssignment
from wire.api import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterPartitionReassignmentsResponse,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from wire.errors import ErrorCode

Partition = tuple[str, int]
# AlterConfigs' resource type of a topic.
_TOPIC = 2


class FakeController:
    def __init__(
        self, assignment: Mapping[Partition, Sequence[int]], brokers: Iterable[int] = range(1, 7)
    ) -> None:
        self.assignments = {tp: ReplicaAssignment(tuple(r)) for tp, r in assignment.items()}
        self.brokers = list(brokers)
        self.configs: list[AlterConfigsResource] = []
        self.submitted: list[dict[Partition, tuple[int, ...] | None]] = []
        self.refuse: dict[Partition, ErrorCode] = {}
        self.sizes: dict[tuple[int, Partition], int] = {}
        self.closed = False

    # --- driven by the test ---

    def ongoing(self) -> dict[Partition, tuple[int, ...]]:
        return {tp: a.target_replicas for tp, a in self.assignments.items() if a.is_being_reassigned}

    def complete(self, *partitions: Partition) -> None:
        for tp in partitions or list(self.ongoing()):
            self.assignments[tp] = ReplicaAssignment(self.assignments[tp].target_replicas)

    def delete_topic(self, topic: str) -> None:
        """The topic deleted under the plan (its reassignments with it)."""
        for tp in [tp for tp in self.assignments if tp[0] == topic]:
            del self.assignments[tp]

    def replicas(self, tp: Partition) -> tuple[int, ...]:
        return self.assignments[tp].replicas

    def in_flight_per_broker(self) -> dict[int, int]:
        load: dict[int, int] = {}
        for a in self.assignments.values():
            if a.is_being_reassigned:
                for b in {*a.adding, *a.removing}:
                    load[b] = load.get(b, 0) + 1
        return load

    def throttle_config(self, resource_type: int, name: str) -> dict[str, str | None]:
        """The config of one resource after every change so far."""
        values: dict[str, str | None] = {}
        for r in self.configs:
            if r.resource_type == resource_type and r.resource_name == name:
                for c in r.configs:
                    values[c.name] = c.value if c.config_operation == 0 else None
        return {k: v for k, v in values.items() if v is not None}

    # --- the admin client's methods ---

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        by_topic: dict[str, list[MetadataPartition]] = {}
        for (topic, partition), a in sorted(self.assignments.items()):
            if topics is None or topic in topics:
                by_topic.setdefault(topic, []).append(
                    MetadataPartition(
                        error_code=0,
                        partition=partition,
                        leader=a.replicas[0],
                        leader_epoch=0,
                        replicas=list(a.replicas),
                        isr=list(a.replicas),
                        offline_replicas=[],
                    )
                )
        return MetadataResponse(
            brokers=[MetadataBroker(broker_id=b, host="127.0.0.1", port=9000 + b) for b in self.brokers],
            topics=[MetadataTopic(error_code=0, name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    async def alter_partition_reassignments(
        self, reassignments: Mapping[Partition, Sequence[int] | None], *, timeout_ms: int = 60000
    ) -> AlterPartitionReassignmentsResponse:
        self.submitted.append({tp: None if r is None else tuple(r) for tp, r in reassignments.items()})
        results: dict[str, list[ReassignablePartitionResponse]] = {}
        for tp, target in reassignments.items():
            code = self.refuse.get(tp, ErrorCode.NONE)
            if tp not in self.assignments:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif target is None and not self.assignments[tp].is_being_reassigned:
                code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            if code == ErrorCode.NONE:
                a = self.assignments[tp]
                origin = ReplicaAssignment(a.origin_replicas)
                self.assignments[tp] = origin if target is None else origin.reassign_to(tuple(target))
            results.setdefault(tp[0], []).append(
                ReassignablePartitionResponse(partition_index=tp[1], error_code=code)
            )
        return AlterPartitionReassignmentsResponse(
            responses=[ReassignableTopicResponse(name=t, partitions=ps) for t, ps in results.items()]
        )

    async def list_partition_reassignments(
        self, partitions: Iterable[Partition] | None = None, *, timeout_ms: int = 60000
    ) -> ListPartitionReassignmentsResponse:
        wanted = None if partitions is None else set(partitions)
        by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
        for (topic, partition), a in sorted(self.assignments.items()):
            if a.is_being_reassigned and (wanted is None or (topic, partition) in wanted):
                by_topic.setdefault(topic, []).append(
                    OngoingPartitionReassignment(
                        partition_index=partition,
                        replicas=list(a.replicas),
                        adding_replicas=list(a.adding),
                        removing_replicas=list(a.removing),
                    )
                )
        return ListPartitionReassignmentsResponse(
            topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()]
        )

    async def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = False
    ) -> IncrementalAlterConfigsResponse:
        topics = {tp[0] for tp in self.assignments}
        known = [r for r in resources if r.resource_type != _TOPIC or r.resource_name in topics]
        self.configs.extend(known)
        return IncrementalAlterConfigsResponse(
            responses=[
                AlterConfigsResourceResponse(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=ErrorCode.NONE if r in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
                for r in resources
            ]
        )

    async def close(self) -> None:
        self.closed = True

    # --- the size source ---

    def size_source(self, metadata: MetadataResponse) -> FakeSizes:
        return FakeSizes(self)


class FakeSizes:
    def __init__(self, controller: FakeController) -> None:
        self._controller = controller

    def update(self, metadata: MetadataResponse) -> None:
        pass

    async def sizes(self, broker: int, partitions: list[Partition]) -> dict[Partition, int]:
        return {
            tp: self._controller.sizes[broker, tp]
            for tp in partitions
            if (broker, tp) in self._controller.sizes
        }

    async def close(self) -> None:
        pass
