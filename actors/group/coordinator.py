"""The group coordinator: Kafka's classic consumer-group protocol on the brokers.

A group belongs to partition `abs(hash(group_id)) % offsets.topic.num.partitions` of
`__consumer_offsets` (Java's String.hashCode, so that a group lands on the partition it
would in Kafka), and the broker that leads that partition coordinates it. LeaderAndIsr tells
this broker which partitions it leads (`on_election`, `on_resignation`); on election it reads
the partition from its start and takes over the groups and offsets found there, answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile. Every change that must outlive this broker (a commit,
a generation's assignment, a deletion) is appended to that partition with acks=all before it
is answered, so the next leader loads it.

Everything here runs on the event loop, one request at a time; a JoinGroup or SyncGroup that
must wait for the other members holds a future the rebalance completes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from actors.base.clock import Cancellable, Clock, SystemClock
from actors.group import records
from actors.group.group import Group, GroupState, Member
from wire.api import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    ListedGroup,
    ListGroupsResponse,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from wire.consumer_protocol import ConsumerProtocolError, subscription_topics
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

# How a failed append to __consumer_offsets is answered (Kafka's GroupMetadataManager).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


class OffsetsLog(Protocol):
    """The port to this broker's partitions of `__consumer_offsets`."""

    async def append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append the (key, value) records to the partition with acks=all: NONE once the
        in-sync replicas have them, else the produce error."""
        ...

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """Every record of the partition this broker holds, from its start to its end."""
        ...


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes: 10080
    offsets_retention_check_interval_ms: int = 600_000


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions`, with Java's String.hashCode over
    UTF-16 code units."""
    h = 0
    data = group_id.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 2**31:
        h -= 2**32
    return (0 if h == -(2**31) else abs(h)) % partitions


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a consumer's ConsumerProtocolSubscription; none when it cannot be read."""
    try:
        return set(subscription_topics(subscription))
    except ConsumerProtocolError:
        return set()


class GroupCoordinator:
    def __init__(
        self, offsets_log: OffsetsLog, config: GroupConfig | None = None, clock: Clock | None = None
    ) -> None:
        self._log = offsets_log
        self.config = config or GroupConfig()
        self._clock = clock or SystemClock()
        self._groups: dict[str, Group] = {}
        # The partitions this broker leads, at which leader epoch, and those still loading.
        self._epochs: dict[int, int] = {}
        self._loading: set[int] = set()
        self._tasks: set[asyncio.Task[object]] = set()
        # The next pass of offset expiry, while this broker coordinates any partition.
        self._expiry: Cancellable | None = None

    # --- which groups are here ---

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def _refusal(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._epochs:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker leads `partition` of `__consumer_offsets` from `leader_epoch`: load it."""
        if self._epochs.get(partition) == leader_epoch:
            return
        if partition in self._epochs and partition not in self._loading:
            # Still the leader, at a newer epoch (a reassignment, an election that chose it
            # again): nobody else wrote the partition meanwhile, and the groups stay as they
            # are, as Kafka keeps those it has.
            self._epochs[partition] = leader_epoch
            return
        self._unload(partition)
        self._epochs[partition] = leader_epoch
        self._loading.add(partition)
        self._spawn(self._load(partition, leader_epoch))
        self._schedule_expiry()

    def on_resignation(self, partition: int) -> None:
        """Another broker leads `partition` now (or none does): its groups go with it."""
        if partition in self._epochs:
            self._unload(partition)
            del self._epochs[partition]
            self._loading.discard(partition)
            log.info("no longer the coordinator of %s-%d: its groups are unloaded", OFFSETS_TOPIC, partition)
        if not self._epochs and self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def owned_partitions(self) -> dict[int, int]:
        return dict(self._epochs)

    async def _load(self, partition: int, leader_epoch: int) -> None:
        started = self._clock.monotonic()
        try:
            entries = await self._log.read(partition)
            stored_groups, stored_offsets = records.replay(iter(entries))
        except Exception:
            log.exception("loading %s-%d failed: its groups are not served here", OFFSETS_TOPIC, partition)
            if self._epochs.get(partition) == leader_epoch:
                del self._epochs[partition]
                self._loading.discard(partition)
            return
        if self._epochs.get(partition) != leader_epoch:
            return  # resigned or re-elected meanwhile: that load counts
        for group_id in stored_groups.keys() | stored_offsets.keys():
            group = Group(group_id, partition, offsets=stored_offsets.get(group_id, {}))
            stored = stored_groups.get(group_id)
            if stored is not None:
                self._restore(group, stored)
            self._groups[group_id] = group
        self._loading.discard(partition)
        log.info(
            "loaded %d groups of %s-%d at leader epoch %d in %.3f s",
            len(stored_groups.keys() | stored_offsets.keys()),
            OFFSETS_TOPIC,
            partition,
            leader_epoch,
            self._clock.monotonic() - started,
        )

    def _restore(self, group: Group, stored: records.StoredGroup) -> None:
        group.protocol_type = stored.protocol_type or None
        group.generation = stored.generation
        group.protocol = stored.protocol
        group.leader = stored.leader
        for m in stored.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                stored.protocol_type,
                [(stored.protocol or "", m.subscription)],
                m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.instances[m.group_instance_id] = m.member_id
            self._schedule_heartbeat(group, member)
        if group.members:
            group.subscribed = group.subscribed_topics()
            group.transition(GroupState.STABLE, self._clock.wall_ms())
        else:
            # Empty since the time it was stored with: offset expiry counts from then.
            group.transition(GroupState.EMPTY, stored.current_state_timestamp)

    def _unload(self, partition: int) -> None:
        for group in [g for g in self._groups.values() if g.partition == partition]:
            self._kill(group, ErrorCode.NOT_COORDINATOR)

    def _kill(self, group: Group, error: ErrorCode) -> None:
        """The group is gone from here: its waiting members are told `error`."""
        for member in group.members.values():
            self._answer_waiting(member, error)
            if member.heartbeat is not None:
                member.heartbeat.cancel()
        for expiry in group.pending.values():
            expiry.cancel()
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        group.transition(GroupState.DEAD, self._clock.wall_ms())
        self._groups.pop(group.group_id, None)

    def stop(self) -> None:
        for partition in list(self._epochs):
            self.on_resignation(partition)
        for task in self._tasks:
            task.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def _spawn(self, work: Awaitable[object]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- JoinGroup ---

    async def join_group(
        self, request: JoinGroupRequest, *, client_id: str, client_host: str
    ) -> JoinGroupResponse:
        refusal = self._refusal(request.group_id)
        if refusal:
            return JoinGroupResponse(error_code=refusal, member_id=request.member_id)
        config = self.config
        if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
            return JoinGroupResponse(
                error_code=ErrorCode.INVALID_SESSION_TIMEOUT,
                error_message=f"session timeout {request.session_timeout_ms} ms is outside "
                f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}]",
                member_id=request.member_id,
            )
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id=request.member_id)
            group = self._groups[request.group_id] = Group(
                request.group_id, self.partition_for(request.group_id)
            )
        if group.state is GroupState.DEAD:  # being deleted: the client looks for it again
            return JoinGroupResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=request.member_id
            )
        protocols = [(p.name, p.metadata) for p in request.protocols]
        if not group.supports(request.protocol_type, protocols):
            return JoinGroupResponse(
                error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id
            )
        candidate = Member(
            request.member_id,
            request.group_instance_id,
            client_id,
            client_host,
            request.rebalance_timeout_ms if request.rebalance_timeout_ms >= 0 else request.session_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            protocols,
        )
        if not request.member_id:
            return await self._join_new(group, candidate, request.require_known_member_id)
        return await self._join_known(group, candidate)

    async def _join_new(
        self, group: Group, candidate: Member, require_known_member_id: bool
    ) -> JoinGroupResponse:
        if len(group.members) + len(group.pending) >= self.config.max_size:
            return JoinGroupResponse(error_code=ErrorCode.GROUP_MAX_SIZE_REACHED)
        prefix = candidate.group_instance_id or candidate.client_id
        candidate.member_id = f"{prefix}-{uuid.uuid4()}"
        instance = candidate.group_instance_id
        if instance is not None and instance in group.instances:
            return await self._replace_static_member(
                group, group.members[group.instances[instance]], candidate
            )
        if require_known_member_id:
            # KIP-394: the member learns its id first, and joins with it.
            member_id = candidate.member_id
            group.pending[member_id] = self._clock.call_later(
                candidate.session_timeout_ms / 1000, lambda: self._expire_pending(group, member_id)
            )
            return JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        return await self._add_and_rebalance(group, candidate)

    async def _replace_static_member(self, group: Group, old: Member, candidate: Member) -> JoinGroupResponse:
        """KIP-345: a static member back with a new member id (restarted, or rejoining after
        it unsubscribed) takes its old place, assignment and all, and the old id is fenced.
        A stable group does not rebalance for it unless the group's protocol would change;
        a group between JoinGroup and SyncGroup does, since the leader may be assigning to
        the old id (Kafka's updateStaticMemberAndRebalance)."""
        old_id, leader = old.member_id, group.leader
        before = (old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms)
        self._answer_waiting(old, ErrorCode.FENCED_INSTANCE_ID)
        member = self._rekey(group, old, candidate.member_id)
        member.protocols = candidate.protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = (
            candidate.rebalance_timeout_ms,
            candidate.session_timeout_ms,
        )
        self._schedule_heartbeat(group, member)
        log.info(
            "static member %s of group %s rejoined as %s in state %s",
            member.group_instance_id,
            group.group_id,
            member.member_id,
            group.state.value,
        )
        waiting = self._await_join(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"static member {member.member_id} rejoined")
        elif group.protocol != group.select_protocol():
            self._prepare_rebalance(group, f"static member {member.member_id} changes the group's protocol")
        else:
            generation = group.generation
            error = await self._store(group)
            current = group.state is GroupState.STABLE and group.generation == generation
            if current and member.awaiting_join is waiting and not waiting.done():
                member.awaiting_join = None
                if error:
                    # Not stored: the old incarnation keeps its place, and this one may retry.
                    self._rekey(group, member, old_id)
                    member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = before
                    group.leader = leader
                    self._schedule_heartbeat(group, member)
                    waiting.set_result(JoinGroupResponse(error_code=error, generation_id=generation))
                else:
                    # The leader before the change, so that a rejoining leader does not take
                    # itself for the leader and assign a stable group again (JoinGroup < 9).
                    answer = self._join_answer(group, member)
                    waiting.set_result(dataclasses.replace(answer, leader=leader or "", members=[]))
            # Otherwise a rebalance began meanwhile: the member is in it, and it answers.
        return await waiting

    @staticmethod
    def _rekey(group: Group, member: Member, member_id: str) -> Member:
        """The member under a new id, in the same place among the members, as the leader if it was."""
        old_id = member.member_id
        group.members = {(member_id if k == old_id else k): m for k, m in group.members.items()}
        member.member_id = member_id
        if member.group_instance_id is not None:
            group.instances[member.group_instance_id] = member_id
        if group.leader == old_id:
            group.leader = member_id
        return member

    async def _join_known(self, group: Group, candidate: Member) -> JoinGroupResponse:
        member_id = candidate.member_id
        if member_id in group.pending:
            group.pending.pop(member_id).cancel()
            return await self._add_and_rebalance(group, candidate)
        member = group.members.get(member_id)
        instance = candidate.group_instance_id
        if instance is not None and group.instances.get(instance, member_id) != member_id:
            return JoinGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        if group.state is GroupState.COMPLETING_REBALANCE and member.same_protocols(candidate.protocols):
            # The member did not see its JoinGroup answered: the same answer again.
            return self._join_answer(group, member)
        if (
            group.state is GroupState.STABLE
            and member.member_id != group.leader
            and member.same_protocols(candidate.protocols)
        ):
            return self._join_answer(group, member)
        member.protocols = candidate.protocols
        member.session_timeout_ms = candidate.session_timeout_ms
        member.rebalance_timeout_ms = candidate.rebalance_timeout_ms
        member.client_id, member.client_host = candidate.client_id, candidate.client_host
        waiting = self._await_join(member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await waiting

    async def _add_and_rebalance(self, group: Group, member: Member) -> JoinGroupResponse:
        member.is_new = True
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.instances[member.group_instance_id] = member.member_id
        if group.leader is None:
            group.leader = member.member_id
        if group.protocol_type is None:
            group.protocol_type = member.protocol_type
        waiting = self._await_join(member)
        self._schedule_heartbeat(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        return await waiting

    def _await_join(self, member: Member) -> asyncio.Future[JoinGroupResponse]:
        if member.awaiting_join is not None and not member.awaiting_join.done():
            member.awaiting_join.set_result(
                JoinGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id)
            )
        member.awaiting_join = asyncio.get_running_loop().create_future()
        return member.awaiting_join

    def _join_answer(self, group: Group, member: Member) -> JoinGroupResponse:
        leader = member.member_id == group.leader
        return JoinGroupResponse(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol or "",
            leader=group.leader or "",
            member_id=member.member_id,
            members=[
                JoinGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata(group.protocol or ""),
                )
                for m in group.members.values()
            ]
            if leader
            else [],
        )

    # --- rebalancing ---

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                if member.awaiting_sync is not None and not member.awaiting_sync.done():
                    member.awaiting_sync.set_result(
                        SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
                    )
                member.awaiting_sync = None
        first = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, self._clock.wall_ms())
        log.info(
            "preparing to rebalance group %s in state PreparingRebalance with old generation %d (%s)",
            group.group_id,
            group.generation,
            reason,
        )
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        delay_ms = self.config.initial_rebalance_delay_ms
        if first and delay_ms > 0:
            # Kafka's InitialDelayedJoin: the members of a starting group join together.
            group.rebalance_deadline = self._clock.monotonic() + group.max_rebalance_timeout_ms() / 1000
            joined = len(group.members)
            group.rebalance_timer = self._clock.call_later(
                delay_ms / 1000, lambda: self._initial_delay_over(group, joined)
            )
            return
        group.rebalance_deadline = 0.0
        group.rebalance_timer = self._clock.call_later(
            group.max_rebalance_timeout_ms() / 1000, lambda: self._complete_join(group)
        )
        self._try_complete_join(group)

    def _initial_delay_over(self, group: Group, joined_before: int) -> None:
        delay_s = self.config.initial_rebalance_delay_ms / 1000
        remaining = group.rebalance_deadline - self._clock.monotonic()
        if len(group.members) > joined_before and remaining > 0:
            joined = len(group.members)
            group.rebalance_timer = self._clock.call_later(
                min(delay_s, remaining), lambda: self._initial_delay_over(group, joined)
            )
            return
        group.rebalance_deadline = 0.0
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.rebalance_deadline == 0.0
            and group.all_joined()
            and not group.pending
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE or self._groups.get(group.group_id) is not group:
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            # It did not rejoin within the rebalance timeout.
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, rebalance=False)
        group.generation += 1
        now = self._clock.wall_ms()
        if not group.members:
            group.protocol = None
            group.leader = None
            group.transition(GroupState.EMPTY, now)
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            self._spawn(self._store(group))
            return
        group.protocol = group.select_protocol()
        group.subscribed = group.subscribed_topics()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation,
            len(group.members),
        )
        for member in group.members.values():
            waiting, member.awaiting_join = member.awaiting_join, None
            member.is_new = False
            if waiting is not None and not waiting.done():
                waiting.set_result(self._join_answer(group, member))
            self._schedule_heartbeat(group, member)

    async def _store(self, group: Group) -> ErrorCode:
        code = await self._log.append(
            group.partition, [(records.group_key(group.group_id), records.group_value(group.stored()))]
        )
        if code:
            log.warning("storing group %s failed: %s", group.group_id, ErrorCode(code).name)
        return _APPEND_ERRORS.get(ErrorCode(code), ErrorCode(code))

    # --- members' liveness ---

    def _schedule_heartbeat(self, group: Group, member: Member) -> None:
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        member.heartbeat = self._clock.call_later(
            member.session_timeout_ms / 1000, lambda: self._session_expired(group, member)
        )

    def _session_expired(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            # A member waiting on the rebalance is alive; the rebalance timeout bounds it.
            self._schedule_heartbeat(group, member)
            return
        log.info(
            "member %s of group %s failed its session timeout: removed", member.member_id, group.group_id
        )
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, rebalance=True)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _remove_member(self, group: Group, member: Member, error: ErrorCode, *, rebalance: bool) -> None:
        self._answer_waiting(member, error)
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        del group.members[member.member_id]
        if (
            member.group_instance_id is not None
            and group.instances.get(member.group_instance_id) == member.member_id
        ):
            del group.instances[member.group_instance_id]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        if not rebalance:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    @staticmethod
    def _answer_waiting(member: Member, error: ErrorCode) -> None:
        if member.awaiting_join is not None and not member.awaiting_join.done():
            member.awaiting_join.set_result(JoinGroupResponse(error_code=error, member_id=member.member_id))
        if member.awaiting_sync is not None and not member.awaiting_sync.done():
            member.awaiting_sync.set_result(SyncGroupResponse(error_code=error))
        member.awaiting_join = member.awaiting_sync = None

    def _member_check(
        self, group_id: str, member_id: str, instance: str | None, generation: int
    ) -> tuple[ErrorCode, Group | None, Member | None]:
        refusal = self._refusal(group_id)
        if refusal:
            return refusal, None, None
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.UNKNOWN_MEMBER_ID, None, None
        if instance is not None and group.instances.get(instance, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID, group, None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, group, None
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, group, member
        return ErrorCode.NONE, group, member

    # --- SyncGroup, Heartbeat, LeaveGroup ---

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        error, group, member = self._member_check(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id
        )
        if error:
            return SyncGroupResponse(error_code=error)
        assert group is not None and member is not None
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol
        ):
            return SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        self._schedule_heartbeat(group, member)
        if group.state is GroupState.STABLE:
            return self._sync_answer(group, member)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        if member.awaiting_sync is not None and not member.awaiting_sync.done():
            # The same member again (its first request's answer lost): that one is let go.
            member.awaiting_sync.set_result(SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        waiting = member.awaiting_sync = asyncio.get_running_loop().create_future()
        if member.member_id == group.leader:
            await self._assign(group, {a.member_id: a.assignment for a in request.assignments})
        answer: SyncGroupResponse = await waiting
        return answer

    async def _assign(self, group: Group, assignments: dict[str, bytes]) -> None:
        """The leader's assignment of this generation: stored, then handed out."""
        generation = group.generation
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error = await self._store(group)
        if group.state is not GroupState.COMPLETING_REBALANCE or group.generation != generation:
            return  # a rebalance began meanwhile and answered the waiting members
        if error:
            for member in group.members.values():
                member.assignment = b""
                if member.awaiting_sync is not None and not member.awaiting_sync.done():
                    member.awaiting_sync.set_result(SyncGroupResponse(error_code=error))
                member.awaiting_sync = None
            self._prepare_rebalance(group, f"storing generation {generation} failed")
            return
        group.transition(GroupState.STABLE, self._clock.wall_ms())
        for member in group.members.values():
            waiting, member.awaiting_sync = member.awaiting_sync, None
            if waiting is not None and not waiting.done():
                waiting.set_result(self._sync_answer(group, member))

    @staticmethod
    def _sync_answer(group: Group, member: Member) -> SyncGroupResponse:
        return SyncGroupResponse(
            protocol_type=group.protocol_type, protocol_name=group.protocol, assignment=member.assignment
        )

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        error, group, member = self._member_check(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id
        )
        if error:
            return HeartbeatResponse(error_code=error)
        assert group is not None and member is not None
        if group.state is GroupState.EMPTY:
            return HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        self._schedule_heartbeat(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse()

    def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        refusal = self._refusal(request.group_id)
        if refusal:
            return LeaveGroupResponse(error_code=refusal)
        group = self._groups.get(request.group_id)
        if group is None:
            return LeaveGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        left = []
        for leaving in request.leaving():
            member_id, instance = leaving.member_id, leaving.group_instance_id
            if not member_id and instance is not None:
                member_id = group.instances.get(instance, "")
            code = ErrorCode.NONE
            if instance is not None and group.instances.get(instance, member_id) != member_id:
                code = ErrorCode.FENCED_INSTANCE_ID  # an old incarnation: the live one stays
            elif member_id in group.pending:
                group.pending.pop(member_id).cancel()
                self._try_complete_join(group)
            elif member_id in group.members:
                log.info("member %s of group %s left", member_id, group.group_id)
                self._remove_member(
                    group, group.members[member_id], ErrorCode.UNKNOWN_MEMBER_ID, rebalance=True
                )
            else:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            left.append(
                LeftMember(member_id=member_id, group_instance_id=leaving.group_instance_id, error_code=code)
            )
        # Versions 0-2 name one member and answer its error at the top.
        top = left[0].error_code if not request.members and left else 0
        return LeaveGroupResponse(error_code=top, members=left)

    # --- offsets ---

    async def commit_offsets(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        error = self._refusal(request.group_id)
        group = self._groups.get(request.group_id)
        generation = request.generation_id_or_member_epoch
        member = None if group is None else group.members.get(request.member_id)
        if error:
            pass
        elif group is None:
            if generation >= 0:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:  # a consumer outside any group commits: its offsets make an empty group
                group = self._groups[request.group_id] = Group(
                    request.group_id, self.partition_for(request.group_id)
                )
        elif group.state is GroupState.DEAD:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (instance := request.group_instance_id) is not None and group.instances.get(
            instance, request.member_id
        ) != request.member_id:
            error = ErrorCode.FENCED_INSTANCE_ID
        elif generation < 0 and group.state is GroupState.EMPTY:
            pass
        elif group.state is GroupState.COMPLETING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        elif member is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            return _commit_answer(request, lambda topic, partition: error)
        assert group is not None
        if member is not None:
            self._schedule_heartbeat(group, member)
        now = self._clock.wall_ms()
        codes: dict[tuple[str, int], ErrorCode] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        committed: dict[tuple[str, int], records.CommittedOffset] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                    codes[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                value = records.CommittedOffset(p.committed_offset, p.committed_leader_epoch, metadata, now)
                committed[tp] = value
                entries.append(
                    (records.offset_key(records.OffsetKey(group.group_id, *tp)), records.offset_value(value))
                )
        stored = ErrorCode.NONE
        if entries:
            group.pending_commits.update(committed.keys())
            try:
                stored = _APPEND_ERRORS.get(
                    code := ErrorCode(await self._log.append(group.partition, entries)), code
                )
            finally:
                group.pending_commits.subtract(committed.keys())
                group.pending_commits = +group.pending_commits
        if not stored and self._groups.get(group.group_id) is group:
            group.offsets.update(committed)
        return _commit_answer(request, lambda topic, partition: codes.get((topic, partition), stored))

    def fetch_offsets(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        refusal = self._refusal(request.group_id)
        if refusal:
            return OffsetFetchResponse(error_code=refusal)
        group = self._groups.get(request.group_id)
        offsets = {} if group is None else group.offsets
        if request.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(offsets):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t.name: t.partition_indexes for t in request.topics}
        topics = []
        for name, partitions in wanted.items():
            answers = []
            for index in partitions:
                found = offsets.get((name, index))
                answers.append(
                    OffsetFetchPartitionResponse(partition_index=index)
                    if found is None
                    else OffsetFetchPartitionResponse(
                        partition_index=index,
                        committed_offset=found.offset,
                        committed_leader_epoch=found.leader_epoch,
                        metadata=found.metadata,
                    )
                )
            topics.append(OffsetFetchTopicResponse(name=name, partitions=answers))
        return OffsetFetchResponse(topics=topics)

    async def delete_offsets(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        refusal = self._refusal(request.group_id)
        if refusal:
            return OffsetDeleteResponse(error_code=refusal)
        group = self._groups.get(request.group_id)
        if group is None:
            return OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        subscribed: set[str] = set()
        if group.state is not GroupState.EMPTY and group.protocol_type == "consumer":
            for member in group.members.values():
                subscribed |= subscribed_topics(member.metadata(group.protocol or ""))
        entries: list[tuple[bytes, bytes | None]] = []
        deleted = []
        for topic in request.topics:
            if topic.name in subscribed:
                continue
            for p in topic.partitions:
                deleted.append((topic.name, p.partition_index))
                entries.append(
                    (
                        records.offset_key(records.OffsetKey(group.group_id, topic.name, p.partition_index)),
                        None,
                    )
                )
        stored = ErrorCode.NONE
        if entries:
            stored = _APPEND_ERRORS.get(
                code := ErrorCode(await self._log.append(group.partition, entries)), code
            )
        if not stored:
            for tp in deleted:
                group.offsets.pop(tp, None)
        return OffsetDeleteResponse(
            topics=[
                OffsetDeleteTopicResponse(
                    name=t.name,
                    partitions=[
                        OffsetDeletePartitionResponse(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                            if t.name in subscribed
                            else stored,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    # --- offset expiry ---

    def _schedule_expiry(self) -> None:
        if self._expiry is None:
            self._expiry = self._clock.call_later(
                self.config.offsets_retention_check_interval_ms / 1000, self._expiry_due
            )

    def _expiry_due(self) -> None:
        async def run() -> None:
            try:
                await self.remove_expired_offsets()
            except Exception:
                log.exception("removing expired offsets failed: the next pass tries again")
            finally:
                if self._epochs:
                    self._schedule_expiry()

        self._expiry = None
        self._spawn(run())

    async def remove_expired_offsets(self) -> int:
        """Tombstone the offsets past their retention (`Group.expired_offsets`), and an empty
        group left with none, on every partition this broker coordinates (Kafka's
        cleanupGroupMetadata, every `offsets.retention.check.interval.ms`). Answers how many
        offsets went."""
        started = self._clock.monotonic()
        retention = self.config.offsets_retention_ms
        removed = 0
        for partition in sorted({g.partition for g in self._groups.values()}):
            if partition in self._loading:
                continue
            # Looked at right before its append, with no wait between: a commit that comes
            # after is appended after the tombstones, and one before is pending (kept).
            now = self._clock.wall_ms()
            changes: list[tuple[Group, dict[tuple[str, int], records.CommittedOffset], bool]] = []
            entries: list[tuple[bytes, bytes | None]] = []
            for group in [g for g in self._groups.values() if g.partition == partition]:
                if group.state is GroupState.DEAD:
                    continue
                expired = group.expired_offsets(now, retention)
                emptied = (
                    group.state is GroupState.EMPTY
                    and not group.pending
                    and not group.pending_commits
                    and len(expired) == len(group.offsets)
                )
                if not expired and not emptied:
                    continue
                changes.append((group, expired, emptied))
                entries.extend(
                    (records.offset_key(records.OffsetKey(group.group_id, *tp)), None) for tp in expired
                )
                if emptied:
                    if group.generation > 0:  # a group that only stored offsets has no record
                        entries.append((records.group_key(group.group_id), None))
                    # Dead while its tombstones are written, as a deleted group is.
                    group.state = GroupState.DEAD
            if not entries:  # only empty groups that never stored anything: nothing to write
                for group, _, _ in changes:
                    self._kill(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                continue
            error = ErrorCode.UNKNOWN_SERVER_ERROR
            try:
                error = ErrorCode(await self._log.append(partition, entries))
            finally:
                for group, _, emptied in changes:
                    if emptied and self._groups.get(group.group_id) is group:
                        group.state = GroupState.EMPTY  # its timestamp as it was
            for group, expired, emptied in changes:
                if error or self._groups.get(group.group_id) is not group:
                    continue
                for tp, committed in expired.items():
                    if group.offsets.get(tp) is committed:
                        del group.offsets[tp]
                        removed += 1
                if emptied and not group.offsets and not group.members and not group.pending:
                    self._kill(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    log.info("group %s has no offsets left after expiry: removed", group.group_id)
            if error:
                log.warning(
                    "tombstoning expired offsets on %s-%d failed: %s", OFFSETS_TOPIC, partition, error.name
                )
        if removed:
            log.info(
                "removed %d expired offsets in %d milliseconds",
                removed,
                round((self._clock.monotonic() - started) * 1000),
            )
        return removed

    # --- ListGroups, DescribeGroups, DeleteGroups ---

    def list_groups(self, states: Sequence[str], allowed: Callable[[str], bool]) -> ListGroupsResponse:
        wanted = {s.lower() for s in states}
        groups = [
            ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value)
            for g in sorted(self._groups.values(), key=lambda g: g.group_id)
            if allowed(g.group_id) and (not wanted or g.state.value.lower() in wanted)
        ]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        return ListGroupsResponse(error_code=error, groups=groups)

    def describe_group(self, group_id: str) -> DescribedGroup:
        refusal = self._refusal(group_id)
        if refusal:
            return DescribedGroup(error_code=refusal, group_id=group_id)
        group = self._groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id=group_id, group_state=GroupState.DEAD.value)
        stable = group.state is GroupState.STABLE
        return DescribedGroup(
            group_id=group_id,
            group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol or "") if stable else "",
            members=[
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol or "") if stable else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ],
        )

    def describe_groups(self, group_ids: Sequence[str]) -> DescribeGroupsResponse:
        return DescribeGroupsResponse(groups=[self.describe_group(g) for g in group_ids])

    async def delete_groups(self, group_ids: Sequence[str]) -> DeleteGroupsResponse:
        results = []
        for group_id in group_ids:
            error = self._refusal(group_id)
            group = self._groups.get(group_id)
            if not error:
                if group is None or group.state is GroupState.DEAD:
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.state is not GroupState.EMPTY or group.pending:
                    error = ErrorCode.NON_EMPTY_GROUP
            if not error:
                assert group is not None
                entries: list[tuple[bytes, bytes | None]] = [
                    (records.offset_key(records.OffsetKey(group_id, topic, partition)), None)
                    for topic, partition in group.offsets
                ]
                entries.append((records.group_key(group_id), None))
                # Dead while its tombstones are written: a commit or a join meanwhile is
                # refused rather than written after them, to come back on the next load.
                group.transition(GroupState.DEAD, self._clock.wall_ms())
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                try:
                    error = _APPEND_ERRORS.get(
                        code := ErrorCode(await self._log.append(group.partition, entries)), code
                    )
                finally:
                    if error and self._groups.get(group_id) is group:
                        group.transition(GroupState.EMPTY, self._clock.wall_ms())
                if not error and self._groups.get(group_id) is group:
                    self._kill(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    log.info("group %s deleted", group_id)
            results.append(DeletableGroupResult(group_id=group_id, error_code=error))
        return DeleteGroupsResponse(results=results)


def _commit_answer(request: OffsetCommitRequest, code_of: Callable[[str, int], int]) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitTopicResponse(
                name=t.name,
                partitions=[
                    OffsetCommitPartitionResponse(
                        partition_index=p.partition_index, error_code=code_of(t.name, p.partition_index)
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )
