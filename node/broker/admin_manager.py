"""CreateTopics on any broker (Kafka's ZkAdminManager): validate each topic on its own, place
its replicas, then write `/config/topics/<T>` and `/brokers/topics/<T>`. The controller sees
the new topic through its watch and elects leaders."""

from __future__ import annotations

import collections
import logging

from actors.ports import ReplicaAssignment, TopicAssignment, TopicExistsError
from actors.topic_admin import (
    TopicError,
    assign_replicas,
    validate_assignment,
    validate_configs,
    validate_name,
)
from node.zk.store import ZkClusterStore
from wire.api import CreatableTopic, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


class AdminManager:
    def __init__(
        self, store: ZkClusterStore, *, default_partitions: int, default_replication_factor: int
    ) -> None:
        self._store = store
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        existing = await self._store.topics()
        brokers = {b.info.broker_id: b.info.rack for b in await self._store.registered_brokers()}
        counts = collections.Counter(t.name for t in request.topics)
        results = []
        for topic in request.topics:
            if counts[topic.name] > 1:
                results.append(
                    _failed(topic.name, ErrorCode.INVALID_REQUEST, "the topic is named twice in the request")
                )
                continue
            try:
                assignment = self._plan(topic, existing, brokers)
                if not request.validate_only:
                    await self._store.create_topic(assignment, topic.configs)
                    existing.add(topic.name)
                    log.info("created topic %s with %d partitions", topic.name, len(assignment.partitions))
            except TopicError as e:
                results.append(_failed(topic.name, e.code, e.message))
                continue
            except TopicExistsError as e:
                results.append(_failed(topic.name, ErrorCode.TOPIC_ALREADY_EXISTS, str(e)))
                continue
            first = assignment.partitions[0].replicas
            results.append(
                CreatableTopicResult(
                    name=topic.name,
                    error_code=ErrorCode.NONE,
                    num_partitions=len(assignment.partitions),
                    replication_factor=len(first),
                )
            )
        return CreateTopicsResponse(topics=results)

    def _plan(
        self, topic: CreatableTopic, existing: set[str], brokers: dict[int, str | None]
    ) -> TopicAssignment:
        validate_name(topic.name, existing)
        validate_configs(topic.configs)
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    "give either a replica assignment or a partition count and replication factor",
                )
            replicas = {a.partition: a.broker_ids for a in topic.assignments}
            if len(replicas) != len(topic.assignments):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a partition is assigned twice")
            validate_assignment(replicas, set(brokers))
        else:
            partitions = self._default_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = (
                self._default_replication_factor
                if topic.replication_factor == -1
                else topic.replication_factor
            )
            replicas = assign_replicas(partitions, factor, brokers)
        return TopicAssignment(topic.name, {p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()})


def _failed(name: str, code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=code, error_message=message)
