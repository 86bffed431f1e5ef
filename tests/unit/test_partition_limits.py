"""The partition limits (KIP-578's max.partitions and max.broker.partitions, and ZooKeeper's
jute.maxbuffer for the assignment znode), checked on numbers before any placement."""

from __future__ import annotations

import time

import pytest

from actors.admin.partition_limits import (
    PartitionLimits,
    ReplicaCounts,
    check_before_placement,
    check_placement,
    check_replica_counts,
    topic_znode_bytes,
)
from actors.admin.topic_admin import TopicError, partitions_to_add, validate_counts
from actors.base.ports import ReplicaAssignment, TopicAssignment
from actors.replica.metadata_cache import MetadataCache
from node.broker.config import load_config
from node.config.properties import ConfigError
from node.zk.data import encode_topic
from wire.api import UpdateMetadataPartitionState, UpdateMetadataRequest
from wire.api.update_metadata import LEADER_DURING_DELETE
from wire.errors import ErrorCode

LIMITS = PartitionLimits(max_partitions=100, max_broker_partitions=40)
# Three brokers holding 10 partition replicas each.
HELD = ReplicaCounts(30, {1: 10, 2: 10, 3: 10})


def refusal(check: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(TopicError) as caught:
        check(*args, **kwargs)  # type: ignore[operator]
    assert caught.value.code == ErrorCode.POLICY_VIOLATION
    return caught.value.message


def test_a_count_past_max_partitions_is_refused_naming_the_limit_and_the_count() -> None:
    message = refusal(check_replica_counts, 71, {1, 2, 3}, HELD, LIMITS)
    assert message == "max.partitions is 100: the cluster would hold 101 partition replicas (30 now, 71 more)"
    check_replica_counts(70, {1, 2, 3}, HELD, PartitionLimits(100, 100))


def test_a_hundred_million_partitions_are_refused_on_numbers_alone() -> None:
    started = time.perf_counter()
    message = refusal(
        check_before_placement,
        "hugep",
        partitions=100_000_000,
        added_partitions=100_000_000,
        replication_factor=1,
        brokers={1, 2, 3},
        counts=HELD,
        limits=PartitionLimits(300_000, 9_000),
    )
    assert time.perf_counter() - started < 0.1
    assert "max.partitions is 300000" in message and "100000030" in message


def test_max_broker_partitions_holds_the_average_before_placement() -> None:
    # 30 held + 91 new over 3 brokers: some broker gets at least 41.
    message = refusal(check_replica_counts, 91, {1, 2, 3}, HELD, PartitionLimits(1000, 40))
    assert message == (
        "max.broker.partitions is 40: a broker would hold at least 41 partition replicas (121 over 3 brokers)"
    )
    check_replica_counts(90, {1, 2, 3}, HELD, PartitionLimits(1000, 40))


def test_max_broker_partitions_after_placement_names_the_broker() -> None:
    placed = {0: [1, 2], 1: [1, 3], **{p: [1, 2] for p in range(2, 30)}}
    message = refusal(check_placement, placed, HELD, PartitionLimits(1000, 39))
    assert (
        message == "max.broker.partitions is 39: broker 1 would hold 40 partition replicas (10 now, 30 more)"
    )
    check_placement(placed, HELD, PartitionLimits(1000, 40))


@pytest.mark.parametrize(
    ("partitions", "factor", "broker_id"),
    [(1, 1, 1), (10, 3, 1), (1234, 3, 20), (100_001, 2, 300)],
)
def test_the_znode_size_is_computed_exactly_from_the_counts(
    partitions: int, factor: int, broker_id: int
) -> None:
    assignment = TopicAssignment(
        "t", {p: ReplicaAssignment((broker_id,) * factor) for p in range(partitions)}
    )
    assert topic_znode_bytes(partitions, factor, len(str(broker_id))) == len(encode_topic(assignment))


def test_a_topic_whose_znode_would_not_fit_jute_maxbuffer_is_refused() -> None:
    limits = PartitionLimits(10**9, 10**9)
    message = refusal(
        check_before_placement,
        "wide",
        partitions=70_000,
        added_partitions=70_000,
        replication_factor=3,
        brokers={1, 2, 3},
        counts=ReplicaCounts(),
        limits=limits,
    )
    assert message.startswith(
        "zookeeper.jute.maxbuffer is 1048575: the assignment znode /brokers/topics/wide"
    )
    assert "at least 1108962 bytes, over the 1047551" in message
    fits = dict(partitions=10_000, added_partitions=10_000, replication_factor=3, counts=ReplicaCounts())
    assert check_before_placement("t", brokers={1, 2, 3}, limits=limits, **fits) is False  # type: ignore[arg-type]
    # With broker ids of 1 and 6 digits only the placement can tell.
    mixed = PartitionLimits(10**9, 10**9, jute_max_buffer=topic_znode_bytes(10_000, 3, 3) + 1024)
    assert check_before_placement("t", brokers={1, 100_000}, limits=mixed, **fits) is True  # type: ignore[arg-type]


def test_counts_add_up_over_the_topics_of_one_request() -> None:
    assert HELD.plus({0: [1, 2], 1: [2, 4]}) == ReplicaCounts(34, {1: 11, 2: 12, 3: 10, 4: 1})


def test_counts_and_validity_come_before_the_limits() -> None:
    with pytest.raises(TopicError) as caught:
        validate_counts(3, 5, 3)
    assert caught.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    existing = {0: ReplicaAssignment((1, 2))}
    assert partitions_to_add(existing, 100_000_000) == 99_999_999
    with pytest.raises(TopicError) as smaller:
        partitions_to_add(existing, 1)
    assert smaller.value.code == ErrorCode.INVALID_PARTITIONS


def _state(partition: int, replicas: list[int], leader: int | None = None) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        topic="t",
        partition=partition,
        controller_epoch=1,
        leader=replicas[0] if leader is None else leader,
        leader_epoch=0,
        isr=replicas,
        partition_epoch=0,
        replicas=replicas,
    )


def test_the_metadata_cache_counts_replicas_as_states_come_and_go() -> None:
    cache = MetadataCache()

    def update(*states: UpdateMetadataPartitionState) -> ReplicaCounts:
        cache.update(
            UpdateMetadataRequest(controller_id=1, controller_epoch=1, partition_states=list(states))
        )
        return cache.replica_counts()

    assert update(_state(0, [1, 2, 3]), _state(1, [2, 3, 1])) == ReplicaCounts(6, {1: 2, 2: 2, 3: 2})
    # A reassignment moves partition 0 from broker 3 to broker 4; the same state again changes nothing.
    assert update(_state(0, [1, 2, 4]), _state(1, [2, 3, 1])) == ReplicaCounts(6, {1: 2, 2: 2, 3: 1, 4: 1})
    assert update(_state(0, [1, 2, 4], leader=LEADER_DURING_DELETE)) == ReplicaCounts(3, {1: 1, 2: 1, 3: 1})


def test_the_limits_are_broker_properties() -> None:
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
    config = load_config(base)
    assert config.get_int("max.partitions") == 300_000
    assert config.get_int("max.broker.partitions") == 9_000
    assert config.get_int("zookeeper.jute.maxbuffer") == 1_048_575
    with pytest.raises(ConfigError, match="outside") as caught:
        load_config({**base, "max.broker.partitions": "0"})
    assert caught.value.key == "max.broker.partitions"
    with pytest.raises(ConfigError, match="not an integer"):
        load_config({**base, "max.partitions": "lots"})
