"""Replication throttles: the quota's arithmetic on a manual clock, the throttled-replicas
configs, and Kafka's rule on the leader and the follower (only out-of-sync replicas of
throttled partitions are held back, and only while the quota is exceeded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.admin.throttle_configs import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    parse_rate,
    parse_throttled_replicas,
)
from actors.replica.partition import TopicPartition
from actors.replica.replication_quota import UNLIMITED, ReplicationQuota, ReplicationThrottle, throttled_on
from tests.support import ManualClock
from tests.unit.test_replication import TP, Brokers, fetch, produce

MB = 1 << 20


def test_an_unlimited_quota_is_never_exceeded() -> None:
    clock = ManualClock()
    for quota in (ReplicationQuota(clock), ReplicationQuota(clock, UNLIMITED)):
        quota.record(10 * MB)
        assert not quota.exceeded() and quota.wait_s() == 0.0 and quota.rate is None


def test_the_bytes_moved_follow_the_rate_without_an_initial_burst() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, MB)
    moved = 0
    # A mover that sends 256 KiB whenever the quota allows, checked every 10 ms for 10 s.
    for _ in range(1000):
        if not quota.exceeded():
            quota.record(256 * 1024)
            moved += 256 * 1024
        clock.advance(0.01)
    # 10 s at 1 MiB/s, give or take the one transfer that overdraws the bucket.
    assert 10 * MB <= moved <= 10 * MB + 256 * 1024


def test_an_overdraft_is_paid_back_before_the_next_transfer() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 1000)
    assert not quota.exceeded()
    quota.record(3000)
    assert quota.exceeded()
    assert quota.wait_s() == pytest.approx(3.0)
    clock.advance(2.9)
    assert quota.exceeded() and quota.wait_s() == pytest.approx(0.1)
    clock.advance(0.1)
    assert not quota.exceeded() and quota.wait_s() == 0.0


def test_an_idle_quota_saves_at_most_one_burst() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 1000, burst_s=2.0)
    clock.advance(60)
    quota.record(2000)
    assert not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()


def test_changing_the_rate_applies_from_now() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 1000)
    quota.record(5000)
    quota.set_rate(5000)
    assert quota.wait_s() == pytest.approx(1.0)
    quota.set_rate(None)
    assert not quota.exceeded()
    quota.set_rate(0)
    quota.record(1)
    assert quota.exceeded() and quota.wait_s() == float("inf")


def test_throttled_replicas_values() -> None:
    assert parse_throttled_replicas("*") is None
    assert parse_throttled_replicas(" 0:101, 1:102 ") == [(0, 101), (1, 102)]
    assert parse_throttled_replicas("") == []
    for bad in ("0", "0:x", "a:1", "0:1,", "*,0:1", "-1:2", "0:-2"):
        with pytest.raises(ValueError):
            parse_throttled_replicas(bad)
    assert 5 in throttled_on("*", 1)
    mine = throttled_on("0:1,1:2,2:1", 1)
    assert 0 in mine and 2 in mine and 1 not in mine
    assert not throttled_on("0:2", 1) and not throttled_on(None, 1) and not throttled_on("junk", 1)


def test_rates() -> None:
    assert parse_rate(" 1048576 ") == MB and parse_rate("0") == 0
    for bad in ("-1", "1.5", "lots", ""):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_kafkas_rule_in_sync_replicas_and_unthrottled_partitions_are_never_held() -> None:
    clock = ManualClock()
    throttle = ReplicationThrottle(1, clock)
    throttle.set_rates(1000, 1000)
    throttle.set_topic_config("t", {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "1:1"})
    throttle.leader.record(5000)
    throttle.follower.record(5000)
    assert throttle.leader_holds(TopicPartition("t", 0), in_sync=False)
    assert not throttle.leader_holds(TopicPartition("t", 0), in_sync=True)
    assert not throttle.leader_holds(TopicPartition("t", 1), in_sync=False)
    assert throttle.follower_holds(TopicPartition("t", 1), in_sync=False)
    assert not throttle.follower_holds(TopicPartition("t", 0), in_sync=False)
    throttle.set_topic_config("t", {})
    assert not throttle.leader_holds(TopicPartition("t", 0), in_sync=False)
    assert throttle.throttled_topics == set()


# --- on the replica manager: the leader's answers and the follower's fetches ---


@pytest.fixture
def brokers(tmp_path: Path) -> Brokers:
    return Brokers(tmp_path)


def _batch_of(size: int) -> list[bytes]:
    return [b"x" * 1000] * (size // 1000)


async def test_the_leader_holds_back_an_out_of_sync_follower_of_a_throttled_partition(
    brokers: Brokers,
) -> None:
    brokers.lead(1, 0, [1, 2])  # 3 is not in the ISR
    leader = brokers[1]
    leader.set_throttles((10_000, None), {"t": {LEADER_REPLICAS: "*"}})
    leader.leader_path.append_records(produce(_batch_of(20_000), acks=1))
    first = leader.leader_path.read(fetch(0, replica=3, epoch=0), wait=False)
    assert first.response.responses[0].partitions[0].records, "the quota starts unexceeded"
    assert first.retry_s is None
    held = leader.leader_path.read(fetch(0, replica=3, epoch=0), wait=False)
    assert held.response.responses[0].partitions[0].records == b""
    assert held.retry_s == pytest.approx(2.0, abs=0.1), "20 kB sent against a 10 kB/s quota"
    in_sync = leader.leader_path.read(fetch(0, replica=2, epoch=0), wait=False)
    assert in_sync.response.responses[0].partitions[0].records, "the ISR is never throttled"
    consumer = leader.leader_path.read(fetch(0), wait=False)
    assert consumer.retry_s is None
    # In-sync traffic of a throttled partition counts against the quota, as in Kafka.
    assert leader.state.throttle.leader.wait_s() == pytest.approx(4.0, abs=0.1)
    brokers.clock.advance(4.1)
    again = leader.leader_path.read(fetch(0, replica=3, epoch=0), wait=False)
    assert again.response.responses[0].partitions[0].records


async def test_the_follower_leaves_throttled_partitions_out_of_its_fetch(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    follower = brokers[3]
    follower.set_throttles((None, 10_000), {"t": {FOLLOWER_REPLICAS: "0:3"}})
    brokers[1].leader_path.append_records(produce(_batch_of(20_000), acks=1))
    brokers.replicate(3, 1)  # opens the session and brings the data
    assert TP in follower.state.partitions and follower.state.partitions[TP].log_end_offset == 20
    assert follower.state.throttle.follower.exceeded()
    brokers[1].leader_path.append_records(produce(_batch_of(5_000), acks=1))
    plan = follower.follower_path.plan_fetch(1)
    assert plan is not None and plan.fetch_request is not None
    request = plan.fetch_request
    assert not request.topics, "the held partition is not asked for"
    assert [t.partitions for t in request.forgotten_topics_data] == [[0]], "and it leaves the session"
    assert 1 <= request.max_wait_ms <= 1100, "the long poll ends when the quota frees"
    follower.follower_path.process_fetched(1, plan, brokers[1].leader_path.read(request, wait=False).response)
    assert follower.state.partitions[TP].log_end_offset == 20
    brokers.clock.advance(5.0)
    plan = follower.follower_path.plan_fetch(1)
    assert plan is not None and plan.fetch_request is not None
    assert [p.fetch_offset for t in plan.fetch_request.topics for p in t.partitions] == [20]
    follower.follower_path.process_fetched(
        1, plan, brokers[1].leader_path.read(plan.fetch_request, wait=False).response
    )
    assert follower.state.partitions[TP].log_end_offset == 25


async def test_a_zero_rate_holds_throttled_replicas_within_the_long_poll(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    follower = brokers[3]
    follower.set_throttles((None, 0), {"t": {FOLLOWER_REPLICAS: "*"}})
    brokers[1].leader_path.append_records(produce(_batch_of(5_000), acks=1))
    brokers.replicate(3, 1)  # the first transfer goes through, as in Kafka
    assert follower.state.partitions[TP].log_end_offset == 5
    brokers[1].leader_path.append_records(produce(_batch_of(5_000), acks=1))
    plan = follower.follower_path.plan_fetch(1)
    assert plan is not None and plan.fetch_request is not None
    assert not plan.fetch_request.topics
    assert plan.fetch_request.max_wait_ms == follower.state.config.fetch_wait_max_ms
