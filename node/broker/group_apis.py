"""The consumer-group APIs at the broker: who may call them, where a group's coordinator is,
and `__consumer_offsets` made on first need; the groups themselves are the coordinator's
(actors/group/coordinator.py).

Kafka's ACLs: joining, syncing, heartbeats, leaving and committing need Read on the group
(and committing Read on each topic); OffsetFetch, DescribeGroups and FindCoordinator need
Describe on the group (OffsetFetch Describe on each topic); DeleteGroups and OffsetDelete
need Delete on the group. ListGroups lists the groups the caller may describe, every group
with Describe on the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from actors.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from actors.replica.handle import ReplicaManagerHandle
from actors.security.acl import AclOperation, ResourceType
from actors.security.api_authorization import Check
from node.broker.admin_manager import AdminManager
from node.broker.offsets_topic import OFFSETS_TOPIC_CONFIGS
from wire.api import (
    CreatableTopic,
    CreateTopicsRequest,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
    Request,
    Response,
    StopReplicaRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from wire.context import RequestContext
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

_GROUP_KEY = 0
_REFUSED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupApis:
    def __init__(
        self,
        broker_id: int,
        coordinator: GroupCoordinator,
        replica_manager: ReplicaManagerHandle,
        admin: AdminManager,
        *,
        offsets_replication_factor: int,
    ) -> None:
        self._broker_id = broker_id
        self.coordinator = coordinator
        self._replica_manager = replica_manager
        self._admin = admin
        self._replication_factor = offsets_replication_factor

    async def handle(
        self, body: Request, context: RequestContext, client_id: str, check: Check
    ) -> Response | None:
        """The answer to a group API's request; None for a request of another API."""
        groups = self.coordinator

        def group_allowed(operation: AclOperation, group_id: str) -> bool:
            return check(operation, ResourceType.GROUP, group_id)

        match body:
            case FindCoordinatorRequest():
                return await self._find_coordinator(body, context.listener_name, check)
            case JoinGroupRequest():
                if not group_allowed(AclOperation.READ, body.group_id):
                    return JoinGroupResponse(error_code=_REFUSED, member_id=body.member_id)
                return await groups.join_group(body, client_id=client_id, client_host=context.client_host)
            case SyncGroupRequest():
                if not group_allowed(AclOperation.READ, body.group_id):
                    return SyncGroupResponse(error_code=_REFUSED)
                return await groups.sync_group(body)
            case HeartbeatRequest():
                if not group_allowed(AclOperation.READ, body.group_id):
                    return HeartbeatResponse(error_code=_REFUSED)
                return groups.heartbeat(body)
            case LeaveGroupRequest():
                if not group_allowed(AclOperation.READ, body.group_id):
                    return LeaveGroupResponse(error_code=_REFUSED)
                return groups.leave_group(body)
            case OffsetCommitRequest():
                return await self._commit(body, check)
            case OffsetFetchRequest():
                return self._fetch_offsets(body, check)
            case ListGroupsRequest():
                every = check(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
                return groups.list_groups(
                    body.states_filter, lambda g: every or group_allowed(AclOperation.DESCRIBE, g)
                )
            case DescribeGroupsRequest():
                return DescribeGroupsResponse(
                    groups=[
                        groups.describe_group(g)
                        if group_allowed(AclOperation.DESCRIBE, g)
                        else DescribedGroup(error_code=_REFUSED, group_id=g)
                        for g in body.groups
                    ]
                )
            case DeleteGroupsRequest():
                allowed = [g for g in body.groups_names if group_allowed(AclOperation.DELETE, g)]
                deleted = await groups.delete_groups(allowed) if allowed else DeleteGroupsResponse()
                refused = [
                    DeletableGroupResult(group_id=g, error_code=_REFUSED)
                    for g in body.groups_names
                    if g not in allowed
                ]
                return DeleteGroupsResponse(results=deleted.results + refused)
            case OffsetDeleteRequest():
                if not group_allowed(AclOperation.DELETE, body.group_id):
                    return OffsetDeleteResponse(error_code=_REFUSED)
                return await groups.delete_offsets(body)
        return None

    async def _find_coordinator(self, body: FindCoordinatorRequest, listener: str, check: Check) -> Response:
        if body.key_type != _GROUP_KEY:
            return FindCoordinatorResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="transactions are not supported: there is no transaction coordinator",
            )
        if not check(AclOperation.DESCRIBE, ResourceType.GROUP, body.key):
            return FindCoordinatorResponse(error_code=_REFUSED)
        if not body.key:
            return FindCoordinatorResponse(error_code=ErrorCode.INVALID_REQUEST, error_message="no group id")
        metadata = await self._replica_manager.metadata(MetadataRequest(topics=[OFFSETS_TOPIC]), listener)
        topic = metadata.topics[0] if metadata.topics else None
        if topic is None or topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return await self._create_offsets_topic()
        partition = self.coordinator.partition_for(body.key)
        leader = next((p.leader for p in topic.partitions if p.partition == partition), -1)
        broker = next((b for b in metadata.brokers if b.broker_id == leader), None)
        if broker is None:
            return FindCoordinatorResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                error_message=f"{OFFSETS_TOPIC}-{partition} has no leader reachable on listener {listener}",
            )
        return FindCoordinatorResponse(node_id=broker.broker_id, host=broker.host, port=broker.port)

    async def _create_offsets_topic(self) -> FindCoordinatorResponse:
        """Kafka makes `__consumer_offsets` when a group is first looked for; the client asks
        again once its leaders are elected."""
        created = await self._admin.create_topics(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name=OFFSETS_TOPIC,
                        num_partitions=self.coordinator.config.offsets_partitions,
                        replication_factor=self._replication_factor,
                        configs=dict(OFFSETS_TOPIC_CONFIGS),
                    )
                ]
            )
        )
        result = created.topics[0] if created.topics else None
        code = created.error_code if result is None else result.error_code
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            if code == ErrorCode.NONE:
                log.info("created %s for the group coordinators", OFFSETS_TOPIC)
            return FindCoordinatorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        message = (result.error_message if result is not None else created.error_message) or ""
        log.warning("creating %s failed: %s %s", OFFSETS_TOPIC, ErrorCode(code).name, message)
        return FindCoordinatorResponse(
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message=f"{OFFSETS_TOPIC} cannot be created: {message} "
            f"(offsets.topic.replication.factor={self._replication_factor})",
        )

    async def _commit(self, body: OffsetCommitRequest, check: Check) -> OffsetCommitResponse:
        if not check(AclOperation.READ, ResourceType.GROUP, body.group_id):
            return _commit_refused(body.topics, _REFUSED)
        allowed = [t for t in body.topics if check(AclOperation.READ, ResourceType.TOPIC, t.name)]
        refused = [t for t in body.topics if t not in allowed]
        answer = OffsetCommitResponse()
        if allowed or not refused:
            answer = await self.coordinator.commit_offsets(
                OffsetCommitRequest(
                    group_id=body.group_id,
                    generation_id_or_member_epoch=body.generation_id_or_member_epoch,
                    member_id=body.member_id,
                    group_instance_id=body.group_instance_id,
                    topics=allowed,
                )
            )
        return OffsetCommitResponse(topics=answer.topics + _commit_refused(refused, _TOPIC_REFUSED).topics)

    def _fetch_offsets(self, body: OffsetFetchRequest, check: Check) -> OffsetFetchResponse:
        if not check(AclOperation.DESCRIBE, ResourceType.GROUP, body.group_id):
            return OffsetFetchResponse(error_code=_REFUSED)
        answer = self.coordinator.fetch_offsets(body)
        if answer.error_code:
            return answer

        def allowed(topic: str) -> bool:
            return check(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

        topics = []
        for topic in answer.topics:
            if allowed(topic.name):
                topics.append(topic)
            elif body.topics is not None:  # named: answered refused; listed: left out
                topics.append(
                    OffsetFetchTopicResponse(
                        name=topic.name,
                        partitions=[
                            OffsetFetchPartitionResponse(
                                partition_index=p.partition_index, error_code=_TOPIC_REFUSED
                            )
                            for p in topic.partitions
                        ],
                    )
                )
        return OffsetFetchResponse(topics=topics)

    # --- leadership of __consumer_offsets ---

    def leadership_changed(self, request: LeaderAndIsrRequest, answer: LeaderAndIsrResponse) -> None:
        """Kafka's onLeadershipChange: the partitions of `__consumer_offsets` this broker
        now leads are loaded, those it now follows unloaded."""
        applied = {(e.topic, e.partition) for e in answer.partition_errors if e.error_code == ErrorCode.NONE}
        for state in request.partition_states:
            if state.topic != OFFSETS_TOPIC or (state.topic, state.partition) not in applied:
                continue
            if state.leader == self._broker_id:
                self.coordinator.on_election(state.partition, state.leader_epoch)
            else:
                self.coordinator.on_resignation(state.partition)

    def replicas_stopped(self, request: StopReplicaRequest) -> None:
        for p in request.partitions:
            if p.topic == OFFSETS_TOPIC:
                self.coordinator.on_resignation(p.partition)


def _commit_refused(topics: Sequence[OffsetCommitTopic], code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitTopicResponse(
                name=t.name,
                partitions=[
                    OffsetCommitPartitionResponse(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in topics
        ]
    )
