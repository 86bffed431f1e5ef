"""Topic creation decisions: names, configs, explicit assignments and replica placement."""

from __future__ import annotations

import collections
import random

import pytest

from actors.topic_admin import (
    TopicError,
    assign_replicas,
    rack_alternated,
    validate_assignment,
    validate_configs,
    validate_name,
)
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
        {"unclean.leader.election.enable": "true", "min.insync.replicas": "2", "cleanup.policy": "compact"}
    )
    for bad in (
        {"no.such.config": "1"},
        {"min.insync.replicas": "0"},
        {"unclean.leader.election.enable": "yes"},
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
