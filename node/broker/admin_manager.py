"""CreateTopics, DeleteTopics and CreatePartitions on any broker (Kafka's ZkAdminManager).

CreateTopics validates each topic on its own, holds it to the partition limits
(actors/admin/partition_limits.py: on numbers before placement, broker by broker after), places its
replicas, then writes
`/config/topics/<T>` and `/brokers/topics/<T>`; the controller sees the new topic through its
watch and elects leaders; with a timeout (Kafka's clients) it waits for them, as Kafka does.
DeleteTopics writes `/admin/delete_topics/<T>` and waits until this broker no longer serves
the topic. CreatePartitions rewrites `/brokers/topics/<T>` with the
old partitions plus the new and waits until they have leaders."""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable

from actors.admin.partition_limits import (
    PartitionLimits,
    ReplicaCounts,
    check_before_placement,
    check_placement,
    check_topic_znode,
)
from actors.admin.topic_admin import (
    TopicError,
    assign_replicas,
    partitions_to_add,
    plan_added_partitions,
    validate_assignment,
    validate_configs,
    validate_counts,
    validate_name,
)
from actors.base.ports import (
    ClusterStore,
    ReplicaAssignment,
    TopicAdminStore,
    TopicAlreadyMarkedForDeletionError,
    TopicAssignment,
    TopicExistsError,
    TopicVersionConflict,
    UnknownTopicError,
)
from node.zk import data
from wire.api import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    MetadataResponse,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


# What the receiving broker serves (its metadata cache), for waiting on deletions and new
# partitions as Kafka's delayed operations do.
MetadataSource = Callable[[list[str]], Awaitable[MetadataResponse]]

# Asks its check (which reads the metadata cache) now and after each control request the
# broker applies, until the check says True or the timeout (seconds) passes; its last answer.
MetadataWaiter = Callable[[Callable[[], Awaitable[bool]], float], Awaitable[bool]]
# Partition replicas per broker and in all, from the receiving broker's metadata cache.
ReplicaCountSource = Callable[[], Awaitable[ReplicaCounts]]
# CreatePartitions re-reads a topic that changed under its write at most this many times.
_GROW_ATTEMPTS = 5
NO_PARTITION_LIMITS = PartitionLimits(max_partitions=2**31 - 1, max_broker_partitions=2**31 - 1)


class AdminManager:
    def __init__(
        self,
        store: ClusterStore,
        topic_admin: TopicAdminStore,
        *,
        default_partitions: int,
        default_replication_factor: int,
        delete_topic_enable: bool = True,
        metadata: MetadataSource | None = None,
        wait_for_metadata: MetadataWaiter | None = None,
        limits: PartitionLimits = NO_PARTITION_LIMITS,
        replica_counts: ReplicaCountSource | None = None,
    ) -> None:
        self._store = store
        self._topic_admin = topic_admin
        self._limits = limits
        self._replica_counts = replica_counts
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor
        self._delete_topic_enable = delete_topic_enable
        self._metadata = metadata
        self._wait_for_metadata = wait_for_metadata

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        existing = await self._store.topics()
        brokers = {b.info.broker_id: b.info.rack for b in await self._store.registered_brokers()}
        counts = collections.Counter(t.name for t in request.topics)
        replicas = await self._current_replicas()
        results = []
        for topic in request.topics:
            if counts[topic.name] > 1:
                results.append(
                    _failed(topic.name, ErrorCode.INVALID_REQUEST, "the topic is named twice in the request")
                )
                continue
            try:
                assignment = self._plan(topic, existing, brokers, replicas)
                if not request.validate_only:
                    await self._topic_admin.create_topic(assignment, topic.configs)
                    existing.add(topic.name)
                    replicas = replicas.plus({p: a.replicas for p, a in assignment.partitions.items()})
                    log.info("created topic %s with %d partitions", topic.name, len(assignment.partitions))
            except TopicError as e:
                if e.code == ErrorCode.POLICY_VIOLATION:
                    log.info("refused to create topic %s: %s", topic.name, e.message)
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
        if request.timeout_ms is None or request.validate_only:
            return CreateTopicsResponse(topics=results)
        created = {r.name: r.num_partitions for r in results if r.error_code == ErrorCode.NONE}
        late = await self._wait_until_none(set(created), self._without_leaders(created), request.timeout_ms)
        return CreateTopicsResponse(
            topics=[
                _failed(r.name, ErrorCode.REQUEST_TIMED_OUT, "the new topic's partitions have no leader yet")
                if r.name in late
                else r
                for r in results
            ]
        )

    def _plan(
        self,
        topic: CreatableTopic,
        existing: set[str],
        brokers: dict[int, str | None],
        current: ReplicaCounts,
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
            given: dict[int, list[int]] | None = replicas
            partitions, factor = len(replicas), len(replicas[0])
        else:
            given = None
            partitions = self._default_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = (
                self._default_replication_factor
                if topic.replication_factor == -1
                else topic.replication_factor
            )
            validate_counts(partitions, factor, len(brokers))
        # Before placement: the client's numbers must not size what the broker builds.
        maybe_too_large = self._check_counts(
            topic.name,
            partitions=partitions,
            added=partitions,
            factor=factor,
            brokers=brokers,
            current=current,
        )
        replicas = given if given is not None else assign_replicas(partitions, factor, brokers)
        check_placement(replicas, current, self._limits)
        placed = {p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()}
        assignment = TopicAssignment(topic.name, placed)
        if maybe_too_large:
            check_topic_znode(topic.name, len(data.encode_topic(assignment)), self._limits)
        return assignment

    def _check_counts(
        self,
        topic: str,
        *,
        partitions: int,
        added: int,
        factor: int,
        brokers: dict[int, str | None],
        current: ReplicaCounts,
    ) -> bool:
        return check_before_placement(
            topic,
            partitions=partitions,
            added_partitions=added,
            replication_factor=factor,
            brokers=brokers.keys(),
            counts=current,
            limits=self._limits,
        )

    async def _current_replicas(self) -> ReplicaCounts:
        return ReplicaCounts() if self._replica_counts is None else await self._replica_counts()

    # --- DeleteTopics (AdminZkClient.deleteTopic, then wait for the metadata cache) ---

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        counts = collections.Counter(request.topic_names)
        existing = await self._store.topics()
        errors: dict[str, tuple[ErrorCode, str | None]] = {}
        accepted = []
        for name in dict.fromkeys(request.topic_names):
            if counts[name] > 1:
                errors[name] = (ErrorCode.INVALID_REQUEST, "the topic is named twice in the request")
            elif name not in existing:
                errors[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
            elif not self._delete_topic_enable:
                errors[name] = (ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            else:
                try:
                    await self._topic_admin.mark_topic_for_deletion(name)
                    log.info("marked topic %s for deletion", name)
                except TopicAlreadyMarkedForDeletionError:
                    pass  # already going: wait for it like the first caller
                except UnknownTopicError as e:
                    errors[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(e))
                    continue
                accepted.append(name)

        async def still_served() -> set[str]:
            topics = (await self._served(accepted)).topics
            return {t.name for t in topics if t.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        for name in await self._wait_until_none(set(accepted), still_served, request.timeout_ms):
            errors[name] = (ErrorCode.REQUEST_TIMED_OUT, "the deletion has not finished yet")
        return DeleteTopicsResponse(
            responses=[
                DeletableTopicResult(
                    name=name,
                    error_code=errors.get(name, (ErrorCode.NONE, None))[0],
                    error_message=errors.get(name, (ErrorCode.NONE, None))[1],
                )
                for name in dict.fromkeys(request.topic_names)
            ]
        )

    # --- CreatePartitions (AdminZkClient.addPartitions, then wait for the leaders) ---

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        counts = collections.Counter(t.name for t in request.topics)
        existing, marked = await self._store.topics(), await self._store.topics_to_delete()
        brokers = {b.info.broker_id: b.info.rack for b in await self._store.registered_brokers()}
        errors: dict[str, tuple[ErrorCode, str | None]] = {}
        grown: dict[str, int] = {}
        replicas = await self._current_replicas()
        for topic in request.topics:
            name = topic.name
            if counts[name] > 1:
                errors[name] = (ErrorCode.INVALID_REQUEST, "the topic is named twice in the request")
                continue
            try:
                added = await self._grow(
                    topic, existing, marked, brokers, replicas, validate_only=request.validate_only
                )
                if added is not None:
                    log.info("topic %s now has %d partitions", name, topic.count)
                    grown[name] = topic.count
                    replicas = replicas.plus(added)
            except TopicError as e:
                log.info("refused to add partitions to %s: %s", name, e.message)
                errors[name] = (e.code, e.message)
            except UnknownTopicError as e:
                errors[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(e))

        for name in await self._wait_until_none(set(grown), self._without_leaders(grown), request.timeout_ms):
            errors[name] = (ErrorCode.REQUEST_TIMED_OUT, "the new partitions have no leader yet")
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(
                    name=name,
                    error_code=errors.get(name, (ErrorCode.NONE, None))[0],
                    error_message=errors.get(name, (ErrorCode.NONE, None))[1],
                )
                for name in dict.fromkeys(t.name for t in request.topics)
            ]
        )

    async def _grow(
        self,
        topic: CreatePartitionsTopic,
        existing: set[str],
        marked: set[str],
        brokers: dict[int, str | None],
        current_replicas: ReplicaCounts,
        *,
        validate_only: bool,
    ) -> dict[int, list[int]] | None:
        """Check and (unless `validate_only`) write the grown assignment, conditional on the
        version read: if the topic changed meanwhile (a reassignment started, partitions
        added), read it again and check again. The partitions added when written."""
        if topic.name not in existing:
            raise UnknownTopicError(f"topic {topic.name} does not exist")
        if topic.name in marked:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {topic.name} is queued for deletion")
        for _ in range(_GROW_ATTEMPTS):
            found = await self._topic_admin.topic_assignment_and_version(topic.name)
            if found is None:
                raise UnknownTopicError(f"topic {topic.name} does not exist")
            current, version = found
            given = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
            count = partitions_to_add(current.partitions, topic.count)
            factor = len(current.partitions[min(current.partitions)].replicas)
            if given is None:
                validate_counts(count, factor, len(brokers))
            maybe_too_large = self._check_counts(
                topic.name,
                partitions=topic.count,
                added=count,
                factor=factor,
                brokers=brokers,
                current=current_replicas,
            )
            added = plan_added_partitions(current.partitions, topic.count, given, brokers)
            check_placement(added, current_replicas, self._limits)
            partitions = dict(current.partitions)
            partitions.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
            grown = TopicAssignment(topic.name, partitions, current.topic_id)
            if maybe_too_large:
                check_topic_znode(topic.name, len(data.encode_topic(grown)), self._limits)
            if validate_only:
                return None
            try:
                await self._topic_admin.add_partitions(grown, version)
                return added
            except TopicVersionConflict:
                log.info("topic %s changed while adding partitions; checking again", topic.name)
        raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"topic {topic.name} kept changing; try again")

    def _without_leaders(self, partitions: dict[str, int]) -> Callable[[], Awaitable[set[str]]]:
        """A check: the topics of `partitions` (name: partition count) of which this broker's
        metadata cache does not yet know a leader of every partition."""

        async def check() -> set[str]:
            served = {t.name: t for t in (await self._served(sorted(partitions))).topics}
            waiting = set()
            for name, count in partitions.items():
                led = (
                    {p.partition for p in served[name].partitions if p.leader >= 0}
                    if name in served
                    else set()
                )
                if not led >= set(range(count)):
                    waiting.add(name)
            return waiting

        return check

    async def _served(self, topics: list[str]) -> MetadataResponse:
        if self._metadata is None or not topics:
            return MetadataResponse()
        return await self._metadata(topics)

    async def _wait_until_none(
        self, waited: set[str], pending: Callable[[], Awaitable[set[str]]], timeout_ms: int
    ) -> set[str]:
        """Wait until `pending` is empty or `timeout_ms` passes, asking it again each time the
        metadata cache changes; what is still pending. With a timeout of 0 or less nothing is
        waited for and every topic in `waited` times out, as Kafka answers."""
        if not waited or timeout_ms <= 0:
            return waited
        left = waited

        async def none_left() -> bool:
            nonlocal left
            left = await pending()
            return not left

        if self._wait_for_metadata is None:
            await none_left()
        else:
            await self._wait_for_metadata(none_left, timeout_ms / 1000)
        return left


def _failed(name: str, code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=code, error_message=message)
