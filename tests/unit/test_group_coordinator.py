"""The group coordinator's rules without a broker: membership and rebalances, committed
offsets, loading a partition another coordinator wrote, and failures of the store."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Sequence

import pytest

from actors.group import records
from actors.group.coordinator import GroupConfig, GroupCoordinator, partition_for, subscribed_topics
from tests.support import ManualClock
from wire.api import (
    DeleteGroupsResponse,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    OffsetFetchRequest,
    OffsetFetchTopic,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from wire.errors import ErrorCode

GROUP = "billing"
PARTITION = partition_for(GROUP, 50)


class MemoryOffsetsLog:
    """The port held in memory; `failure` answers every append with that error, and while
    `hold` is set (an unset event), every append waits for it."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.failure = ErrorCode.NONE
        self.hold: asyncio.Event | None = None

    async def append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
        if self.hold is not None:
            await self.hold.wait()
        if self.failure:
            return self.failure
        self.partitions.setdefault(partition, []).extend(entries)
        return ErrorCode.NONE

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return list(self.partitions.get(partition, []))


async def coordinator_of(store: MemoryOffsetsLog, clock: ManualClock, **config: int) -> GroupCoordinator:
    coordinator = GroupCoordinator(store, GroupConfig(**{"initial_rebalance_delay_ms": 0, **config}), clock)
    coordinator.on_election(PARTITION, leader_epoch=0)
    await settle()
    return coordinator


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def join(
    member_id: str = "", protocols: tuple[str, ...] = ("range",), session_ms: int = 10_000
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=30_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupProtocol(name=p, metadata=f"{p}-subscription".encode()) for p in protocols],
        require_known_member_id=True,
    )


async def joined(coordinator: GroupCoordinator, client: str = "c1") -> JoinGroupResponse:
    """A member's id, then its place in the next generation (KIP-394's two JoinGroups)."""
    first = await coordinator.join_group(join(), client_id=client, client_host="/10.0.0.1")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith(f"{client}-")
    return await coordinator.join_group(join(first.member_id), client_id=client, client_host="/10.0.0.1")


def test_groups_land_on_the_partition_kafka_puts_them_on() -> None:
    # Java's String.hashCode, abs, modulo 50 (values from a JVM).
    assert partition_for("test-group", 50) == 12
    assert partition_for("billing", 50) == 9
    assert partition_for("console-consumer-12345", 50) == 6
    assert partition_for("ä-group-€", 50) == 13
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


def test_records_read_back_as_written_and_tombstones_remove() -> None:
    member = records.StoredMember("m-1", None, "c1", "/10.0.0.1", 30_000, 10_000, b"sub", b"assign")
    group = records.StoredGroup("consumer", 3, "range", "m-1", 1234, (member,))
    committed = records.CommittedOffset(42, 5, "meta", 99)
    entries: list[tuple[bytes | None, bytes | None]] = [
        (records.group_key("g"), records.group_value(group)),
        (records.offset_key(records.OffsetKey("g", "t", 0)), records.offset_value(committed)),
        (records.offset_key(records.OffsetKey("g", "t", 1)), records.offset_value(committed)),
        (records.offset_key(records.OffsetKey("g", "t", 1)), None),
        (records.group_key("gone"), records.group_value(group)),
        (records.group_key("gone"), None),
    ]
    groups, offsets = records.replay(iter(entries))
    assert groups == {"g": group}
    assert offsets == {"g": {("t", 0): committed}}


async def test_two_members_form_a_generation_and_the_leader_assigns() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    first = await joined(coordinator, "c1")
    assert (first.error_code, first.generation_id, first.leader) == (0, 1, first.member_id)
    # A second member makes the group rebalance: both must join the next generation.
    second_id = (await coordinator.join_group(join(), client_id="c2", client_host="h")).member_id
    second = asyncio.ensure_future(coordinator.join_group(join(second_id), client_id="c2", client_host="h"))
    await settle()
    assert not second.done(), "it waits for the first member to rejoin"
    heartbeat = coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=first.member_id)
    )
    assert heartbeat.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await coordinator.join_group(join(first.member_id), client_id="c1", client_host="h")
    answer = await second
    assert rejoined.generation_id == answer.generation_id == 2
    assert rejoined.leader == first.member_id
    assert {m.member_id for m in rejoined.members} == {first.member_id, second_id}, (
        "the leader sees every member"
    )
    assert answer.members == [], "the others see none"
    follower_sync = asyncio.ensure_future(
        coordinator.sync_group(SyncGroupRequest(group_id=GROUP, generation_id=2, member_id=second_id))
    )
    await settle()
    assert not follower_sync.done(), "it waits for the leader's assignment"
    leader_sync = await coordinator.sync_group(
        SyncGroupRequest(
            group_id=GROUP,
            generation_id=2,
            member_id=first.member_id,
            assignments=[
                SyncGroupAssignment(member_id=first.member_id, assignment=b"p0"),
                SyncGroupAssignment(member_id=second_id, assignment=b"p1"),
            ],
        )
    )
    assert (leader_sync.assignment, (await follower_sync).assignment) == (b"p0", b"p1")
    assert coordinator.describe_group(GROUP).group_state == "Stable"


async def test_a_member_silent_past_its_session_timeout_is_removed_and_the_group_rebalances() -> None:
    clock = ManualClock()
    coordinator = await coordinator_of(MemoryOffsetsLog(), clock)
    first = await joined(coordinator, "c1")
    await coordinator.sync_group(
        SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=first.member_id, assignments=[])
    )
    clock.advance(9)
    assert not coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=first.member_id)
    ).error_code
    clock.advance(9)  # 18 s after joining, 9 s after its heartbeat: alive
    assert coordinator.describe_group(GROUP).group_state == "Stable"
    clock.advance(2)
    await settle()
    assert coordinator.describe_group(GROUP).group_state == "Empty"
    late = coordinator.heartbeat(HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=first.member_id))
    assert late.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_join_refusals() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    short = await coordinator.join_group(join(session_ms=200), client_id="c", client_host="h")
    assert short.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    unknown = await coordinator.join_group(join("nobody"), client_id="c", client_host="h")
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    await joined(coordinator)
    other = await coordinator.join_group(join(protocols=("sticky",)), client_id="c", client_host="h")
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    elsewhere = JoinGroupRequest(
        group_id="another-group", session_timeout_ms=10_000, protocol_type="consumer"
    )
    if partition_for("another-group", 50) != PARTITION:
        answer = await coordinator.join_group(elsewhere, client_id="c", client_host="h")
        assert answer.error_code == ErrorCode.NOT_COORDINATOR


async def test_commits_are_stored_fenced_by_generation_and_fetched() -> None:
    store = MemoryOffsetsLog()
    coordinator = await coordinator_of(store, ManualClock())
    member = await joined(coordinator)

    def commit(generation: int, member_id: str, offset: int, metadata: str = "") -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            topics=[
                OffsetCommitTopic(
                    name="events",
                    partitions=[
                        OffsetCommitPartition(
                            partition_index=0, committed_offset=offset, committed_metadata=metadata
                        )
                    ],
                )
            ],
        )

    def code(answer: object) -> int:
        return answer.topics[0].partitions[0].error_code  # type: ignore[attr-defined, no-any-return]

    assert (
        code(await coordinator.commit_offsets(commit(1, member.member_id, 10)))
        == ErrorCode.REBALANCE_IN_PROGRESS
    )
    await coordinator.sync_group(
        SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=member.member_id)
    )
    assert code(await coordinator.commit_offsets(commit(1, member.member_id, 10, "m"))) == ErrorCode.NONE
    assert (
        code(await coordinator.commit_offsets(commit(0, member.member_id, 11)))
        == ErrorCode.ILLEGAL_GENERATION
    )
    assert code(await coordinator.commit_offsets(commit(1, "stranger", 11))) == ErrorCode.UNKNOWN_MEMBER_ID
    assert code(await coordinator.commit_offsets(commit(-1, "", 11))) == ErrorCode.UNKNOWN_MEMBER_ID, (
        "a commit from outside the group is refused while it has members"
    )
    assert code(await coordinator.commit_offsets(commit(1, member.member_id, 12, "x" * 5000))) == (
        ErrorCode.OFFSET_METADATA_TOO_LARGE
    )
    fetched = coordinator.fetch_offsets(
        OffsetFetchRequest(group_id=GROUP, topics=[OffsetFetchTopic(name="events", partition_indexes=[0, 1])])
    )
    parts = fetched.topics[0].partitions
    assert [(p.committed_offset, p.metadata) for p in parts] == [(10, "m"), (-1, "")]
    store.failure = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (
        code(await coordinator.commit_offsets(commit(1, member.member_id, 13))) == ErrorCode.NOT_COORDINATOR
    )
    everything = coordinator.fetch_offsets(OffsetFetchRequest(group_id=GROUP, topics=None))
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in everything.topics] == [
        ("events", [10])
    ]


async def test_the_next_coordinator_loads_groups_and_offsets_from_the_partition() -> None:
    store = MemoryOffsetsLog()
    old = await coordinator_of(store, ManualClock())
    member = await joined(old)
    await old.sync_group(
        SyncGroupRequest(
            group_id=GROUP,
            generation_id=1,
            member_id=member.member_id,
            assignments=[SyncGroupAssignment(member_id=member.member_id, assignment=b"p0")],
        )
    )
    await old.commit_offsets(
        OffsetCommitRequest(
            group_id=GROUP,
            generation_id_or_member_epoch=1,
            member_id=member.member_id,
            topics=[
                OffsetCommitTopic(
                    name="t", partitions=[OffsetCommitPartition(partition_index=3, committed_offset=77)]
                )
            ],
        )
    )
    old.on_resignation(PARTITION)
    assert old.describe_group(GROUP).error_code == ErrorCode.NOT_COORDINATOR
    new = await coordinator_of(store, ManualClock())
    described = new.describe_group(GROUP)
    assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [member.member_id])
    assert described.members[0].member_assignment == b"p0"
    heartbeat = new.heartbeat(HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=member.member_id))
    assert heartbeat.error_code == ErrorCode.NONE, "the member carries on with the new coordinator"
    fetched = new.fetch_offsets(OffsetFetchRequest(group_id=GROUP, topics=None))
    assert fetched.topics[0].partitions[0].committed_offset == 77


async def test_a_loading_partition_answers_load_in_progress() -> None:
    store = MemoryOffsetsLog()
    coordinator = GroupCoordinator(store, GroupConfig(initial_rebalance_delay_ms=0), ManualClock())
    coordinator.on_election(PARTITION, leader_epoch=4)
    answer = await coordinator.join_group(join(), client_id="c", client_host="h")
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await settle()
    assert coordinator.describe_group(GROUP).error_code == ErrorCode.NONE


async def test_only_an_empty_group_is_deleted_and_its_offsets_go_with_it() -> None:
    store = MemoryOffsetsLog()
    coordinator = await coordinator_of(store, ManualClock())
    member = await joined(coordinator)
    refused: DeleteGroupsResponse = await coordinator.delete_groups([GROUP, "unknown-group-x"])
    codes = [r.error_code for r in refused.results]
    assert codes[0] == ErrorCode.NON_EMPTY_GROUP
    assert codes[1] in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR)
    left = coordinator.leave_group(LeaveGroupRequest(group_id=GROUP, member_id=member.member_id))
    assert left.error_code == ErrorCode.NONE
    await settle()
    deleted = await coordinator.delete_groups([GROUP])
    assert deleted.results[0].error_code == ErrorCode.NONE
    groups, offsets = records.replay(iter(store.partitions[PARTITION]))
    assert GROUP not in groups and GROUP not in offsets
    assert coordinator.describe_group(GROUP).group_state == "Dead"


async def test_a_starting_group_waits_the_initial_delay_for_more_members() -> None:
    clock = ManualClock()
    coordinator = await coordinator_of(MemoryOffsetsLog(), clock, initial_rebalance_delay_ms=3000)
    first_id = (await coordinator.join_group(join(), client_id="a", client_host="h")).member_id
    first = asyncio.ensure_future(coordinator.join_group(join(first_id), client_id="a", client_host="h"))
    await settle()
    clock.advance(2)
    second_id = (await coordinator.join_group(join(), client_id="b", client_host="h")).member_id
    second = asyncio.ensure_future(coordinator.join_group(join(second_id), client_id="b", client_host="h"))
    await settle()
    clock.advance(1.5)  # the first delay is over, but a member came: another delay
    await settle()
    assert not first.done()
    clock.advance(3)
    await settle()
    assert (await first).generation_id == (await second).generation_id == 1
    assert len((await first).members) == 2


@pytest.mark.parametrize(
    ("subscription", "topics"),
    [
        (b"\x00\x01\x00\x00\x00\x02\x00\x01a\x00\x02bc\xff\xff\xff\xff", {"a", "bc"}),
        (b"\x00", set()),  # cut short: nothing can be read from it
    ],
)
def test_a_consumers_subscription_names_its_topics(subscription: bytes, topics: set[str]) -> None:
    assert subscribed_topics(subscription) == topics


async def test_a_newer_leader_epoch_on_the_same_leader_keeps_the_groups_as_they_are() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    member = await joined(coordinator)
    coordinator.on_election(PARTITION, leader_epoch=1)
    await settle()
    heartbeat = coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=member.member_id)
    )
    assert heartbeat.error_code == ErrorCode.NONE, "no reload: the member and its generation stay"
    assert coordinator.owned_partitions() == {PARTITION: 1}


async def test_a_commit_while_a_group_is_being_deleted_is_refused_not_written_after_its_tombstones() -> None:
    class SlowLog(MemoryOffsetsLog):
        async def append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
            await asyncio.sleep(0.01)
            return await super().append(partition, entries)

    store = SlowLog()
    coordinator = await coordinator_of(store, ManualClock())
    outside = OffsetCommitRequest(
        group_id=GROUP,
        topics=[
            OffsetCommitTopic(
                name="t", partitions=[OffsetCommitPartition(partition_index=0, committed_offset=5)]
            )
        ],
    )
    assert (await coordinator.commit_offsets(outside)).topics[0].partitions[0].error_code == ErrorCode.NONE
    deleting = asyncio.ensure_future(coordinator.delete_groups([GROUP]))
    await asyncio.sleep(0)
    late = await coordinator.commit_offsets(
        dataclasses.replace(
            outside,
            topics=[
                OffsetCommitTopic(
                    name="t", partitions=[OffsetCommitPartition(partition_index=1, committed_offset=9)]
                )
            ],
        )
    )
    assert late.topics[0].partitions[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert (await deleting).results[0].error_code == ErrorCode.NONE
    _, offsets = records.replay(iter(store.partitions[PARTITION]))
    assert GROUP not in offsets, "nothing of the group is left to load"


# --- static membership (KIP-345) ---


def static_join(
    instance: str, member_id: str = "", protocols: tuple[str, ...] = ("range",)
) -> JoinGroupRequest:
    return dataclasses.replace(
        join(member_id, protocols), group_instance_id=instance, require_known_member_id=False
    )


async def static_pair(coordinator: GroupCoordinator) -> tuple[str, str]:
    """Two static members, "a" (the leader) and "b", joined to generation 2, not yet synced."""
    a = (await coordinator.join_group(static_join("a"), client_id="ca", client_host="h")).member_id
    second = asyncio.ensure_future(coordinator.join_group(static_join("b"), client_id="cb", client_host="h"))
    await settle()
    rejoined = await coordinator.join_group(static_join("a", a), client_id="ca", client_host="h")
    assert (rejoined.generation_id, rejoined.leader) == (2, a)
    return a, (await second).member_id


async def stable_static_group(coordinator: GroupCoordinator) -> tuple[str, str]:
    """`static_pair`, stable at generation 2 with p0 for "a" and p1 for "b"."""
    a, b = await static_pair(coordinator)
    b_sync = asyncio.ensure_future(
        coordinator.sync_group(SyncGroupRequest(group_id=GROUP, generation_id=2, member_id=b))
    )
    await coordinator.sync_group(
        SyncGroupRequest(
            group_id=GROUP,
            generation_id=2,
            member_id=a,
            assignments=[
                SyncGroupAssignment(member_id=a, assignment=b"p0"),
                SyncGroupAssignment(member_id=b, assignment=b"p1"),
            ],
        )
    )
    assert (await b_sync).assignment == b"p1"
    return a, b


@pytest.mark.parametrize("instance", ["a", "b"])
async def test_a_static_member_back_with_a_new_id_takes_its_place_without_a_rebalance(instance: str) -> None:
    store = MemoryOffsetsLog()
    coordinator = await coordinator_of(store, ManualClock())
    a, b = await stable_static_group(coordinator)
    old = {"a": a, "b": b}[instance]
    back = await coordinator.join_group(static_join(instance), client_id="c", client_host="h")
    assert back.error_code == ErrorCode.NONE
    assert back.member_id not in (a, b)
    assert back.generation_id == 2, "no rebalance: the generation stands"
    assert back.leader == a, "the leader as it was, so a returning leader does not assign again"
    assert back.members == []
    assert coordinator.describe_group(GROUP).group_state == "Stable"
    sync = await coordinator.sync_group(
        SyncGroupRequest(
            group_id=GROUP, generation_id=2, member_id=back.member_id, group_instance_id=instance
        )
    )
    assert sync.assignment == {"a": b"p0", "b": b"p1"}[instance], "its old assignment"
    other = b if instance == "a" else a
    assert not coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=2, member_id=other)
    ).error_code, "the other member goes on without a rebalance"
    fenced = coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=2, member_id=old, group_instance_id=instance)
    )
    assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID
    groups, _ = records.replay(iter(store.partitions[PARTITION]))
    assert {m.member_id for m in groups[GROUP].members} == {back.member_id, other}, "the new id is stored"


async def test_a_static_member_changing_the_groups_protocol_makes_it_rebalance() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    await stable_static_group(coordinator)
    # "b" back preferring "sticky": "range" is still the only protocol both speak.
    back = await coordinator.join_group(
        static_join("b", protocols=("sticky", "range")), client_id="c", client_host="h"
    )
    assert back.generation_id == 2
    assert coordinator.describe_group(GROUP).group_state == "Stable"
    # "a" back preferring it too: the vote would now choose "sticky".
    changed = asyncio.ensure_future(
        coordinator.join_group(
            static_join("a", protocols=("sticky", "range")), client_id="c", client_host="h"
        )
    )
    await settle()
    assert coordinator.describe_group(GROUP).group_state == "PreparingRebalance"
    assert not changed.done()


async def test_a_static_member_back_while_the_leader_assigns_makes_the_group_rebalance() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    a, b = await static_pair(coordinator)
    waiting_sync = asyncio.ensure_future(
        coordinator.sync_group(SyncGroupRequest(group_id=GROUP, generation_id=2, member_id=b))
    )
    await settle()
    back = asyncio.ensure_future(coordinator.join_group(static_join("b"), client_id="cb", client_host="h"))
    await settle()
    assert (await waiting_sync).error_code == ErrorCode.FENCED_INSTANCE_ID, "the old incarnation is let go"
    assert coordinator.describe_group(GROUP).group_state == "PreparingRebalance"
    rejoin = await coordinator.join_group(static_join("a", a), client_id="ca", client_host="h")
    assert rejoin.generation_id == (await back).generation_id == 3


async def test_a_static_member_whose_new_id_is_not_stored_leaves_the_old_one_in_place() -> None:
    store = MemoryOffsetsLog()
    coordinator = await coordinator_of(store, ManualClock())
    a, b = await stable_static_group(coordinator)
    store.failure = ErrorCode.NOT_ENOUGH_REPLICAS
    back = await coordinator.join_group(static_join("b"), client_id="c", client_host="h")
    assert back.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    kept = coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=2, member_id=b, group_instance_id="b")
    )
    assert kept.error_code == ErrorCode.NONE
    assert {m.member_id for m in coordinator.describe_group(GROUP).members} == {a, b}


# --- offset expiry (offsets.retention.minutes) ---

RETENTION_MS = 60_000


def commit(
    topic: str, partition: int, offset: int, *, member_id: str = "", generation: int = -1
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitTopic(
                name=topic,
                partitions=[OffsetCommitPartition(partition_index=partition, committed_offset=offset)],
            )
        ],
    )


def fetched(coordinator: GroupCoordinator) -> dict[tuple[str, int], int]:
    answer = coordinator.fetch_offsets(OffsetFetchRequest(group_id=GROUP, topics=None))
    return {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions}


async def test_offsets_committed_outside_a_group_expire_each_after_its_commit() -> None:
    store, clock = MemoryOffsetsLog(), ManualClock()
    coordinator = await coordinator_of(store, clock, offsets_retention_ms=RETENTION_MS)
    await coordinator.commit_offsets(commit("t", 0, 5))
    clock.advance(40)
    await coordinator.commit_offsets(commit("t", 1, 7))
    clock.advance(30)  # 70 s after the first, 30 s after the second
    assert await coordinator.remove_expired_offsets() == 1
    assert fetched(coordinator) == {("t", 1): 7}
    clock.advance(30)
    assert await coordinator.remove_expired_offsets() == 1
    assert coordinator.describe_group(GROUP).group_state == "Dead", "a group with nothing left is removed"
    groups, offsets = records.replay(iter(store.partitions[PARTITION]))
    assert GROUP not in groups and GROUP not in offsets, "nothing comes back on the next load"


async def test_an_empty_groups_offsets_expire_together_once_it_has_been_empty_that_long() -> None:
    store, clock = MemoryOffsetsLog(), ManualClock()
    coordinator = await coordinator_of(store, clock, offsets_retention_ms=RETENTION_MS)
    first = await coordinator.join_group(join(session_ms=120_000), client_id="c", client_host="h")
    member = await coordinator.join_group(
        join(first.member_id, session_ms=120_000), client_id="c", client_host="h"
    )
    await coordinator.sync_group(
        SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=member.member_id)
    )
    await coordinator.commit_offsets(commit("t", 0, 5, member_id=member.member_id, generation=1))
    clock.advance(90)
    # The commit is past its retention, but the group is stable (and its subscription,
    # unreadable here, may name the topic): nothing expires.
    assert await coordinator.remove_expired_offsets() == 0
    await coordinator.commit_offsets(commit("t", 1, 6, member_id=member.member_id, generation=1))
    coordinator.leave_group(LeaveGroupRequest(group_id=GROUP, member_id=member.member_id))
    await settle()
    assert coordinator.describe_group(GROUP).group_state == "Empty"
    clock.advance(50)
    assert await coordinator.remove_expired_offsets() == 0, "empty for 50 s of the 60"
    # The next coordinator counts from when the group emptied, not from its load.
    successor = GroupCoordinator(store, GroupConfig(offsets_retention_ms=RETENTION_MS), clock)
    successor.on_election(PARTITION, leader_epoch=1)
    await settle()
    clock.advance(11)
    assert await successor.remove_expired_offsets() == 2
    assert successor.describe_group(GROUP).group_state == "Dead"


async def test_a_stable_group_keeps_the_offsets_of_topics_it_subscribes_to() -> None:
    clock = ManualClock()
    coordinator = await coordinator_of(MemoryOffsetsLog(), clock, offsets_retention_ms=RETENTION_MS)
    # ConsumerProtocolSubscription v0: topics ["orders"], no user data.
    metadata = struct.pack(">hih", 0, 1, 6) + b"orders" + struct.pack(">i", -1)
    subscription = JoinGroupProtocol(name="range", metadata=metadata)
    first = await coordinator.join_group(
        dataclasses.replace(join(session_ms=120_000), protocols=[subscription]),
        client_id="c",
        client_host="h",
    )
    member = await coordinator.join_group(
        dataclasses.replace(join(first.member_id, session_ms=120_000), protocols=[subscription]),
        client_id="c",
        client_host="h",
    )
    await coordinator.sync_group(
        SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=member.member_id)
    )
    for topic in ("orders", "old-topic"):
        await coordinator.commit_offsets(commit(topic, 0, 3, member_id=member.member_id, generation=1))
    clock.advance(61)
    assert coordinator.describe_group(GROUP).group_state == "Stable"
    assert await coordinator.remove_expired_offsets() == 1
    assert fetched(coordinator) == {("orders", 0): 3}


async def test_a_commit_in_flight_is_not_tombstoned_by_expiry() -> None:
    store, clock = MemoryOffsetsLog(), ManualClock()
    coordinator = await coordinator_of(store, clock, offsets_retention_ms=RETENTION_MS)
    await coordinator.commit_offsets(commit("t", 0, 5))
    clock.advance(61)
    store.hold = asyncio.Event()
    again = asyncio.ensure_future(coordinator.commit_offsets(commit("t", 0, 8)))
    await settle()
    expiry = asyncio.ensure_future(coordinator.remove_expired_offsets())
    await settle()
    store.hold.set()
    await again
    assert await expiry == 0
    assert fetched(coordinator) == {("t", 0): 8}
    _, offsets = records.replay(iter(store.partitions[PARTITION]))
    assert offsets[GROUP][("t", 0)].offset == 8


async def test_expiry_runs_every_check_interval_while_this_broker_coordinates() -> None:
    clock = ManualClock()
    coordinator = await coordinator_of(
        MemoryOffsetsLog(),
        clock,
        offsets_retention_ms=RETENTION_MS,
        offsets_retention_check_interval_ms=10_000,
    )
    await coordinator.commit_offsets(commit("t", 0, 5))
    clock.advance(55)
    await settle()
    assert fetched(coordinator) == {("t", 0): 5}
    clock.advance(10)
    await settle()
    assert fetched(coordinator) == {}
    coordinator.on_resignation(PARTITION)
    assert clock.pending() == [], "no pass scheduled while no partition is coordinated here"


async def test_a_commit_while_another_partitions_offsets_expire_is_not_tombstoned() -> None:
    other = next(g for g in (f"ledger-{i}" for i in range(100)) if partition_for(g, 50) > PARTITION)
    store, clock = MemoryOffsetsLog(), ManualClock()
    coordinator = await coordinator_of(store, clock, offsets_retention_ms=RETENTION_MS)
    coordinator.on_election(partition_for(other, 50), leader_epoch=0)
    await settle()
    await coordinator.commit_offsets(commit("t", 0, 5))
    await coordinator.commit_offsets(dataclasses.replace(commit("t", 0, 5), group_id=other))
    clock.advance(61)
    store.hold = asyncio.Event()
    expiry = asyncio.ensure_future(coordinator.remove_expired_offsets())
    await settle()  # the first partition's tombstones are being written
    again = asyncio.ensure_future(
        coordinator.commit_offsets(dataclasses.replace(commit("t", 0, 8), group_id=other))
    )
    await settle()
    store.hold.set()
    await again
    assert await expiry == 1, "only the first group's offset"
    _, offsets = records.replay(iter(store.partitions[partition_for(other, 50)]))
    assert offsets[other][("t", 0)].offset == 8, "the new commit outlives the pass"


async def test_a_replaced_static_members_commit_and_leave_are_fenced_and_the_live_one_stays() -> None:
    coordinator = await coordinator_of(MemoryOffsetsLog(), ManualClock())
    _, old = await stable_static_group(coordinator)
    back = await coordinator.join_group(static_join("b"), client_id="cb", client_host="h")
    late_commit = await coordinator.commit_offsets(
        dataclasses.replace(commit("t", 0, 3, member_id=old, generation=2), group_instance_id="b")
    )
    assert late_commit.topics[0].partitions[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    late_leave = coordinator.leave_group(
        LeaveGroupRequest(group_id=GROUP, members=[LeavingMember(member_id=old, group_instance_id="b")])
    )
    assert late_leave.members[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    live = coordinator.heartbeat(
        HeartbeatRequest(group_id=GROUP, generation_id=2, member_id=back.member_id, group_instance_id="b")
    )
    assert live.error_code == ErrorCode.NONE, "the old incarnation did not take the new one down"
    assert coordinator.describe_group(GROUP).group_state == "Stable"


async def test_an_expiry_pass_whose_append_fails_outright_leaves_the_group_usable() -> None:
    class BrokenLog(MemoryOffsetsLog):
        broken = False

        async def append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
            if self.broken:
                raise RuntimeError("the replica manager stopped")
            return await super().append(partition, entries)

    store, clock = BrokenLog(), ManualClock()
    coordinator = await coordinator_of(store, clock, offsets_retention_ms=RETENTION_MS)
    await coordinator.commit_offsets(commit("t", 0, 5))
    clock.advance(61)
    store.broken = True
    with pytest.raises(RuntimeError):
        await coordinator.remove_expired_offsets()
    assert coordinator.describe_group(GROUP).group_state == "Empty", "not left Dead"
    store.broken = False
    assert (await coordinator.commit_offsets(commit("t", 0, 9))).topics[0].partitions[0].error_code == 0
    assert fetched(coordinator) == {("t", 0): 9}
