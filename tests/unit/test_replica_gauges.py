"""ReplicaManager's gauges, computed from the replica state at scrape time, and the counts the
hot paths keep for BrokerTopicMetrics: what each counts, and what it leaves out."""

from __future__ import annotations

from pathlib import Path

from actors.replica.partition import TopicPartition
from actors.replica.replica_gauges import ReplicaGauges, replica_gauges
from actors.replica.replica_manager import ReplicaManager
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from tests.unit.test_replica_manager import MY_EPOCH, leader_and_isr, state
from tests.unit.test_replication import produce


def test_leaders_under_replicated_under_min_isr_and_reassigning(tmp_path: Path) -> None:
    manager = ReplicaManager(1, LogManager([tmp_path], LogConfig()))
    answer = manager.become_leader_or_follower(
        leader_and_isr(
            state(0),  # led, ISR [1, 2] of [1, 2]
            state(1, isr=[1]),  # led, ISR [1] of [1, 2]: under-replicated and under min ISR 2
            state(2, leader=2),  # followed: none of the leader's gauges
            # Being reassigned to [1, 2, 3]: 3 is being added, so it is not missing from the ISR.
            state(3, replicas=[1, 2, 3], adding_replicas=[3]),
        ),
        MY_EPOCH,
    )
    assert answer.error_code == 0
    gauges = replica_gauges(manager.state, default_min_isr=2)
    assert gauges == ReplicaGauges(
        partition_count=4, leader_count=3, under_replicated=1, under_min_isr=1, reassigning=1
    )
    assert replica_gauges(manager.state, default_min_isr=1).under_min_isr == 0
    # A topic's own min.insync.replicas wins over the broker's.
    manager.state.topic_configs["t"] = {"min.insync.replicas": "3"}
    assert replica_gauges(manager.state, default_min_isr=1).under_min_isr == 3
    stopped = manager.state.partitions[TopicPartition("t", 1)]
    stopped.stopped = True
    assert replica_gauges(manager.state, default_min_isr=1).leader_count == 2


async def test_appends_count_bytes_and_messages_in_per_topic(tmp_path: Path) -> None:
    manager = ReplicaManager(1, LogManager([tmp_path], LogConfig()))
    manager.become_leader_or_follower(leader_and_isr(state(0, isr=[1], replicas=[1])), MY_EPOCH)
    request = produce([b"a", b"bb", b"ccc"], acks=1)
    manager.leader_path.append_records(request)
    stats = manager.state.stats
    sent = len(request.topic_data[0].partition_data[0].records)
    assert (stats.bytes_in["t"], stats.messages_in["t"], stats.produce_requests["t"]) == (sent, 3, 1)
    assert stats.failed_produce_requests["t"] == 0
    stats.isr_changed(3, 2)
    stats.isr_changed(2, 3)
    stats.isr_changed(2, 2)
    assert (stats.isr_shrinks, stats.isr_expands) == (1, 1)
