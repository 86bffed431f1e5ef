"""GroupAdminClient: the consumer-group side of the admin client, as Kafka's Admin has it
(listConsumerGroups, describeConsumerGroups, listConsumerGroupOffsets,
alterConsumerGroupOffsets, deleteConsumerGroups, deleteConsumerGroupOffsets, listOffsets),
over Keel's wire.

A group's requests go to its coordinator, found with FindCoordinator at any broker. An answer
that says the coordinator moved or is not ready (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS), at the top or for the group, is retried with the coordinator
looked up again, until the client's timeout, as Kafka's admin client does. ListGroups goes to
every live broker, each answering for the groups it coordinates; ListOffsets to each
partition's leader.

    async with GroupAdminClient("127.0.0.1:9092") as admin:
        committed = await admin.fetch_offsets("billing")
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from node.clients.admin import KeelAdminClient
from node.clients.metadata import UnknownTopicError
from wire.api import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetDeletePartition,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode, LeaderNotAvailable, for_code

R = TypeVar("R", bound=Response)
TopicPartition = tuple[str, int]

_COORDINATOR_MOVED = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)


@dataclasses.dataclass(frozen=True)
class Coordinator:
    node_id: int
    endpoint: Endpoint


def _moved(codes: Iterable[int]) -> int:
    """The first code that says to look for the coordinator again, else 0."""
    return next((code for code in codes if code in _COORDINATOR_MOVED), 0)


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """(topic, partition) pairs as sorted partitions per topic, topics sorted."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        grouped.setdefault(topic, []).append(partition)
    return grouped


class GroupAdminClient(KeelAdminClient):
    async def _at_coordinator(
        self,
        group_id: str,
        request: Request,
        response_type: type[R],
        moved: Callable[[R], int] = lambda _: 0,
    ) -> tuple[Coordinator, R]:
        """`request` answered by the group's coordinator, and which broker that was."""

        async def attempt() -> tuple[Coordinator, R]:
            found = await self._send(
                await self._any_broker(), FindCoordinatorRequest(key=group_id), FindCoordinatorResponse
            )
            coordinator = Coordinator(found.node_id, self.security.endpoint(found.host, found.port))
            answer = await self._send(coordinator.endpoint, request, response_type)
            if code := moved(answer):
                raise for_code(code, f"broker {found.node_id}, asked about group '{group_id}'")
            return coordinator, answer

        return await self._retrying(attempt)

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """Every group of every live broker (in one of `states`, if any are given), by id."""
        cluster = await self.describe_cluster()

        async def listed_by(endpoint: Endpoint) -> ListGroupsResponse:
            request = ListGroupsRequest(states_filter=list(states))
            return await self._retrying(lambda: self._send(endpoint, request, ListGroupsResponse))

        answers = await asyncio.gather(
            *(listed_by(self.security.endpoint(b.host, b.port)) for b in cluster.brokers)
        )
        # A group whose coordinator moved between two answers is listed by both.
        groups = {g.group_id: g for answer in answers for g in answer.groups}
        return [groups[g] for g in sorted(groups)]

    async def describe_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, tuple[Coordinator, DescribedGroup]]:
        """Each group as its coordinator describes it: a group that does not exist is Dead."""

        async def describe(group_id: str) -> tuple[Coordinator, DescribedGroup]:
            coordinator, answer = await self._at_coordinator(
                group_id,
                DescribeGroupsRequest(groups=[group_id]),
                DescribeGroupsResponse,
                lambda r: _moved(g.error_code for g in r.groups),
            )
            (described,) = answer.groups
            if described.error_code:
                raise for_code(described.error_code, f"describing group '{group_id}'")
            return coordinator, described

        described = await asyncio.gather(*(describe(g) for g in group_ids))
        return dict(zip(group_ids, described, strict=True))

    async def fetch_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch of every partition it has one for)."""
        _, answer = await self._at_coordinator(
            group_id, OffsetFetchRequest(group_id=group_id), OffsetFetchResponse
        )
        return {
            (topic.name, p.partition_index): p.committed_offset
            for topic in answer.topics
            for p in topic.partitions
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
        }

    async def commit_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit from outside the group (generation -1, no member id), which the coordinator
        takes only while the group has no members; the result per partition."""
        request = OffsetCommitRequest(
            group_id=group_id,
            topics=[
                OffsetCommitTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitPartition(partition_index=p, committed_offset=offsets[(topic, p)])
                        for p in partitions
                    ],
                )
                for topic, partitions in by_topic(offsets).items()
            ],
        )
        _, answer = await self._at_coordinator(
            group_id,
            request,
            OffsetCommitResponse,
            lambda r: _moved(p.error_code for t in r.topics for p in t.partitions),
        )
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code) for t in answer.topics for p in t.partitions
        }

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups at each group's coordinator: the result per group."""

        async def delete(group_id: str) -> ErrorCode:
            _, answer = await self._at_coordinator(
                group_id,
                DeleteGroupsRequest(groups_names=[group_id]),
                DeleteGroupsResponse,
                lambda r: _moved(g.error_code for g in r.results),
            )
            return ErrorCode(answer.results[0].error_code)

        return dict(zip(group_ids, await asyncio.gather(*(delete(g) for g in group_ids)), strict=True))

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetDelete: the result per partition; an error for the whole group (it does not
        exist, it is not empty) is raised."""
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteTopic(name=t, partitions=[OffsetDeletePartition(partition_index=p) for p in ps])
                for t, ps in by_topic(partitions).items()
            ],
        )
        _, answer = await self._at_coordinator(group_id, request, OffsetDeleteResponse)
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code) for t in answer.topics for p in t.partitions
        }

    async def partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        """How many partitions each topic has; UnknownTopicError for one that does not exist."""
        metadata = await self.metadata(sorted(set(topics)))
        counts = {}
        for topic in metadata.topics:
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicError(topic.name)
            if topic.error_code:
                raise for_code(topic.error_code, f"metadata of topic '{topic.name}'")
            counts[topic.name] = len(topic.partitions)
        return counts

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: the earliest (-2) or latest (-1) offset, or
        the first offset of a record at or after `timestamp` (-1 when there is none)."""
        wanted = by_topic(partitions)

        async def attempt() -> dict[TopicPartition, int]:
            metadata = await self._send(
                await self._any_broker(), MetadataRequest(topics=list(wanted)), MetadataResponse
            )
            brokers = {b.broker_id: self.security.endpoint(b.host, b.port) for b in metadata.brokers}
            leaders = {(t.name, p.partition): p.leader for t in metadata.topics for p in t.partitions}
            asked: dict[Endpoint, dict[str, list[int]]] = {}
            for topic, indexes in wanted.items():
                for index in indexes:
                    leader = brokers.get(leaders.get((topic, index), -1))
                    if leader is None:
                        raise LeaderNotAvailable(f"{topic}-{index} has no leader")
                    asked.setdefault(leader, {}).setdefault(topic, []).append(index)
            answers = await asyncio.gather(
                *(
                    self._send(endpoint, _list_offsets_request(topics, timestamp), ListOffsetsResponse)
                    for endpoint, topics in asked.items()
                )
            )
            offsets = {}
            for answer in answers:
                for t in answer.topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise for_code(p.error_code, f"ListOffsets of {t.name}-{p.partition_index}")
                        offsets[(t.name, p.partition_index)] = p.offset
            return offsets

        return await self._retrying(attempt)


def _list_offsets_request(topics: Mapping[str, list[int]], timestamp: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions],
            )
            for topic, partitions in topics.items()
        ]
    )
