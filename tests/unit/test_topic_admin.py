"""Topic creation decisions: names, configs, explicit assignments and replica placement."""

from __future__ import annotations

import collections
import random

import pytest

from actors.admin.topic_admin import (
    TopicError,
    assign_replicas,
    place_replicas,
    plan_added_partitions,
    rack_alternated,
    validate_assignment,
    validate_configs,
    validate_name,
)
from actors.base.ports import ReplicaAssignment
from wire.errors import ErrorCode


@pytest.mark.parametrize(
    ("name", "existing", "code"),
    [
        ("", set(), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", set(), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a" * 250, set(), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("bad name", set(), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("orders", {"orders"}, ErrorCode.TOPIC_ALREADY_EXISTS),
        ("my.topic", {"my_topic"}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ],
)
def test_illegal_names(name: str, existing: set[str], code: ErrorCode) -> None:
    with pytest.raises(TopicError) as caught:
        validate_name(name, existing)
    assert caught.value.code == code


def test_legal_names() -> None:
    for name in ("orders", "a.b-c_d", "x" * 249):
        validate_name(name, {"other"})


def test_configs() -> None:
    validate_configs(
        {
            "unclean.leader.election.enable": "true",
            "min.insync.replicas": "2",
            "cleanup.policy": "compact",
            "segment.bytes": "1048576",
        }
    )
    for bad in (
        {"no.such.config": "1"},
        {"min.insync.replicas": "0"},
        {"unclean.leader.election.enable": "yes"},
        {"segment.bytes": "1048575"},  # KIP-1030's floor: 1 MiB
    ):
        with pytest.raises(TopicError) as caught:
            validate_configs(bad)
        assert caught.value.code == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize(
    "assignment",
    [{}, {0: [1], 2: [2]}, {0: [1, 2], 1: [1]}, {0: [1, 1]}, {0: [1, 9]}, {0: []}],
)
def test_bad_explicit_assignments(assignment: dict[int, list[int]]) -> None:
    with pytest.raises(TopicError) as caught:
        validate_assignment(assignment, {1, 2, 3})
    assert caught.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_placement_spreads_leaders_and_keeps_replicas_distinct() -> None:
    brokers = {1: None, 2: None, 3: None, 4: None}
    assignment = assign_replicas(8, 3, brokers, rng=random.Random(7))
    assert sorted(assignment) == list(range(8))
    for replicas in assignment.values():
        assert len(replicas) == 3 and len(set(replicas)) == 3 and set(replicas) <= set(brokers)
    leaders = collections.Counter(r[0] for r in assignment.values())
    assert set(leaders.values()) == {2}, "8 partitions on 4 brokers: 2 leaders each"
    followers = collections.Counter(b for r in assignment.values() for b in r[1:])
    assert max(followers.values()) - min(followers.values()) <= 1


def test_placement_refuses_impossible_requests() -> None:
    with pytest.raises(TopicError) as caught:
        assign_replicas(1, 4, {1: None, 2: None, 3: None})
    assert caught.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(TopicError) as caught:
        assign_replicas(0, 1, {1: None})
    assert caught.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(TopicError, match="rack"):
        assign_replicas(1, 1, {1: "a", 2: None})


def test_rack_alternated_broker_list() -> None:
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}) == [1, 3, 4, 2, 5]


def test_rack_aware_placement_puts_replicas_on_distinct_racks() -> None:
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assignment = assign_replicas(12, 3, brokers, rng=random.Random(3))
    for partition, replicas in assignment.items():
        assert len({brokers[b] for b in replicas}) == 3, f"partition {partition}: {replicas}"
    leaders = collections.Counter(r[0] for r in assignment.values())
    assert set(leaders.values()) == {2}


# --- adding partitions ---


def existing(*replicas: tuple[int, ...]) -> dict[int, ReplicaAssignment]:
    return {p: ReplicaAssignment(r) for p, r in enumerate(replicas)}


def test_added_partitions_continue_from_partition_0s_first_replica() -> None:
    brokers: dict[int, str | None] = dict.fromkeys((0, 1, 2, 3))
    planned = plan_added_partitions(existing((2, 3), (3, 0)), 6, None, brokers)
    # Start index 2 (broker 2's position), follower shift 2, bumped at partition 4.
    assert planned == {2: [0, 3], 3: [1, 0], 4: [2, 3], 5: [3, 0]}
    whole = assign_replicas(6, 2, brokers, start_index=2)
    assert planned == {p: whole[p] for p in range(2, 6)}, "as if placed with the topic"


def test_added_partitions_start_at_the_next_broker_when_the_first_replica_is_gone() -> None:
    brokers: dict[int, str | None] = dict.fromkeys((1, 4, 7))
    planned = plan_added_partitions(existing((5, 7, 1)), 2, None, brokers)
    assert planned == assign_replicas(1, 3, brokers, start_index=2, start_partition=1)
    assert all(len(set(r)) == 3 for r in planned.values())


def test_added_partitions_are_rack_aware_when_every_broker_has_a_rack() -> None:
    brokers: dict[int, str | None] = {0: "a", 1: "a", 2: "b", 3: "b"}
    planned = plan_added_partitions(existing((0, 2), (2, 1)), 6, None, brokers)
    assert sorted(planned) == [2, 3, 4, 5]
    assert all({brokers[r] for r in replicas} == {"a", "b"} for replicas in planned.values())


def test_explicit_assignments_for_added_partitions() -> None:
    brokers: dict[int, str | None] = dict.fromkeys((1, 2, 3))
    assert plan_added_partitions(existing((1, 2)), 3, [[2, 3], [3, 1]], brokers) == {1: [2, 3], 2: [3, 1]}


@pytest.mark.parametrize(
    ("count", "assignments", "code"),
    [
        (1, None, ErrorCode.INVALID_PARTITIONS),
        (0, None, ErrorCode.INVALID_PARTITIONS),
        (3, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (2, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (2, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (2, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (2, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_refused_partition_increases(
    count: int, assignments: list[list[int]] | None, code: ErrorCode
) -> None:
    with pytest.raises(TopicError) as caught:
        plan_added_partitions(existing((1, 2)), count, assignments, dict.fromkeys((1, 2, 3)))
    assert caught.value.code == code


def test_more_replicas_than_brokers_or_a_reassignment_refuse_an_increase() -> None:
    with pytest.raises(TopicError) as caught:
        plan_added_partitions(existing((1, 2, 3)), 2, None, dict.fromkeys((1, 2)))
    assert caught.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    moving = {0: ReplicaAssignment((1, 2, 3), adding=(3,), removing=(1,))}
    with pytest.raises(TopicError) as caught:
        plan_added_partitions(moving, 2, None, dict.fromkeys((1, 2, 3)))
    assert caught.value.code == ErrorCode.REASSIGNMENT_IN_PROGRESS


def test_placement_reproduces_the_rack_unaware_javadoc_vector() -> None:
    assert list(place_replicas(10, 3, dict.fromkeys(range(5)), start=0, shift=0).values()) == [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 4],
        [3, 4, 0],
        [4, 0, 1],
        [0, 2, 3],
        [1, 3, 4],
        [2, 4, 0],
        [3, 0, 1],
        [4, 1, 2],
    ]


def test_placement_reproduces_the_rack_aware_javadoc_vector() -> None:
    racks = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert list(place_replicas(7, 3, racks, start=0, shift=0).values()) == [
        [0, 3, 1],
        [3, 1, 5],
        [1, 5, 4],
        [5, 4, 2],
        [4, 2, 0],
        [2, 0, 3],
        [0, 4, 2],
    ]
