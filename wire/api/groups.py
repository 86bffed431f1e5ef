"""The classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
OffsetFetch (9), DeleteGroups (42) and OffsetDelete (47).

Fields carry Kafka's names of the newest version Keel serves, durations in ms (`_ms`), so
that a Kafka request of any served version reads into these structs by name. A group's
coordinator is the leader of partition `abs(hash(group)) % 50` of `__consumer_offsets`
(actors/group/); any other broker answers NOT_COORDINATOR, and one still loading that
partition COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

# DescribeGroups' `authorized_operations` when the client did not ask (Kafka's INT32_MIN).
OPERATIONS_NOT_ASKED = -(2**31)


# --- FindCoordinator ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class FindCoordinatorRequest(Request):
    API_KEY = ApiKey.FIND_COORDINATOR

    key: str = ""
    key_type: int = 0  # 0 a group, 1 a transactional id (not served)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FindCoordinatorResponse(Response):
    node_id: int = -1
    host: str = ""
    port: int = -1


# --- JoinGroup ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinGroupProtocol(Struct):
    name: str
    metadata: bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinGroupRequest(Request):
    API_KEY = ApiKey.JOIN_GROUP

    group_id: str
    session_timeout_ms: int
    # -1 (JoinGroup v0 has none): the session timeout, as Kafka takes it.
    rebalance_timeout_ms: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str = ""
    protocols: list[JoinGroupProtocol] = dataclasses.field(default_factory=list)
    reason: str | None = None
    # KIP-394 (JoinGroup v4 and up without an instance id): a new member is first given its
    # id with MEMBER_ID_REQUIRED, and joins with it.
    require_known_member_id: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinGroupMember(Struct):
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes = b""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinGroupResponse(Response):
    generation_id: int = -1
    protocol_type: str | None = None
    # "" rather than null: versions before 7 cannot carry a null name.
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    # The members' metadata for the selected protocol: the leader's answer only.
    members: list[JoinGroupMember] = dataclasses.field(default_factory=list)


# --- SyncGroup ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncGroupAssignment(Struct):
    member_id: str
    assignment: bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncGroupRequest(Request):
    API_KEY = ApiKey.SYNC_GROUP

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: list[SyncGroupAssignment] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SyncGroupResponse(Response):
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# --- Heartbeat ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeartbeatRequest(Request):
    API_KEY = ApiKey.HEARTBEAT

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeartbeatResponse(Response):
    pass


# --- LeaveGroup ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeavingMember(Struct):
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaveGroupRequest(Request):
    API_KEY = ApiKey.LEAVE_GROUP

    group_id: str
    # Versions 0-2 name one member here; 3 and up a list in `members`.
    member_id: str = ""
    members: list[LeavingMember] = dataclasses.field(default_factory=list)

    def leaving(self) -> list[LeavingMember]:
        return self.members or [LeavingMember(member_id=self.member_id)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeftMember(Struct):
    member_id: str
    group_instance_id: str | None = None
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaveGroupResponse(Response):
    members: list[LeftMember] = dataclasses.field(default_factory=list)


# --- OffsetCommit ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitPartition(Struct):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitTopic(Struct):
    name: str
    partitions: list[OffsetCommitPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitRequest(Request):
    API_KEY = ApiKey.OFFSET_COMMIT

    group_id: str
    # -1 with member "": a commit from outside the group (a consumer that assigns itself).
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: list[OffsetCommitTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitPartitionResponse(Struct):
    partition_index: int
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitTopicResponse(Struct):
    name: str
    partitions: list[OffsetCommitPartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetCommitResponse(Response):
    topics: list[OffsetCommitTopicResponse] = dataclasses.field(default_factory=list)


# --- OffsetFetch ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetFetchTopic(Struct):
    name: str
    partition_indexes: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetFetchRequest(Request):
    API_KEY = ApiKey.OFFSET_FETCH

    group_id: str
    topics: list[OffsetFetchTopic] | None = None  # None: every partition with an offset
    require_stable: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetFetchPartitionResponse(Struct):
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetFetchTopicResponse(Struct):
    name: str
    partitions: list[OffsetFetchPartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetFetchResponse(Response):
    topics: list[OffsetFetchTopicResponse] = dataclasses.field(default_factory=list)


# --- ListGroups, DescribeGroups, DeleteGroups ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListGroupsRequest(Request):
    API_KEY = ApiKey.LIST_GROUPS

    states_filter: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListedGroup(Struct):
    group_id: str
    protocol_type: str
    group_state: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListGroupsResponse(Response):
    groups: list[ListedGroup] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeGroupsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_GROUPS

    groups: list[str] = dataclasses.field(default_factory=list)
    include_authorized_operations: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribedGroupMember(Struct):
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribedGroup(Struct):
    error_code: int = 0
    group_id: str
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedGroupMember] = dataclasses.field(default_factory=list)
    authorized_operations: int = OPERATIONS_NOT_ASKED


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeGroupsResponse(Response):
    groups: list[DescribedGroup] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteGroupsRequest(Request):
    API_KEY = ApiKey.DELETE_GROUPS

    groups_names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeletableGroupResult(Struct):
    group_id: str
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteGroupsResponse(Response):
    results: list[DeletableGroupResult] = dataclasses.field(default_factory=list)


# --- OffsetDelete ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeletePartition(Struct):
    partition_index: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeleteTopic(Struct):
    name: str
    partitions: list[OffsetDeletePartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeleteRequest(Request):
    API_KEY = ApiKey.OFFSET_DELETE

    group_id: str
    topics: list[OffsetDeleteTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeletePartitionResponse(Struct):
    partition_index: int
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeleteTopicResponse(Struct):
    name: str
    partitions: list[OffsetDeletePartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetDeleteResponse(Response):
    topics: list[OffsetDeleteTopicResponse] = dataclasses.field(default_factory=list)
