"""Storage faults on one broker and at the controller (spec §7.11): replicas whose log
directory failed, or whose leader log holds a damaged batch, answer KAFKA_STORAGE_ERROR; the
controller, told by a log-dir event notification, resends LeaderAndIsr, takes such replicas
offline and elects other leaders; a follower cuts a damaged batch off and fetches it again."""

from __future__ import annotations

from pathlib import Path

from actors.replica.partition import PendingIsr, TopicPartition
from actors.replica.replica_manager import ReplicaManager
from actors.replica.replica_messages import LogDirFailed
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from tests.controllers import ControllerCluster, settled, started
from tests.support import eventually
from tests.unit.test_replica_manager import MY_EPOCH, codes, leader_and_isr, state
from wire import records
from wire.api import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from wire.errors import ErrorCode

TP = TopicPartition("t", 0)


class RecordedEffects:
    def __init__(self) -> None:
        self.reports = 0

    def start_fetcher(self, source: int) -> None:
        pass

    def propose_isr(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        pass

    def report_offline_replicas(self) -> None:
        self.reports += 1


def manager_with_log(
    tmp_path: Path, *, leader: int, partitions: int = 1
) -> tuple[ReplicaManager, RecordedEffects, LogManager]:
    """Broker 1 hosting t-0 (and t-1, ... up to `partitions`; leader or follower) with three
    batches in each log."""
    logs = LogManager([tmp_path], LogConfig())
    logs.load()
    effects = RecordedEffects()
    manager = ReplicaManager(1, logs, effects=effects)
    manager.become_leader_or_follower(
        leader_and_isr(*(state(p, leader=leader) for p in range(partitions))), MY_EPOCH
    )
    for p in range(partitions):
        tp = TopicPartition("t", p)
        partition_log = logs.get_or_create(tp, {})
        for i in range(3):
            partition_log.append_as_leader(records.build_batch([(None, bytes([i]) * 50)], timestamp=1), 0)
        manager.state.partitions[tp].log = partition_log
        manager.state.partitions[tp].high_watermark = 3
    return manager, effects, logs


def damage_last_batch(tmp_path: Path, partition: int = 0) -> None:
    segment = tmp_path / f"t-{partition}" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-2] ^= 0xFF
    segment.write_bytes(bytes(data))


def consumer_fetch() -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
    )


def test_a_leader_never_serves_a_damaged_batch_and_its_replica_goes_offline(tmp_path: Path) -> None:
    manager, effects, _ = manager_with_log(tmp_path, leader=1)
    damage_last_batch(tmp_path)
    answer = manager.leader_path.read(consumer_fetch(), wait=False).response
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not partition.records
    assert effects.reports == 1, "the controller is told"
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=100,
        topic_data=[
            ProduceTopicData(
                name="t",
                partition_data=[
                    ProducePartitionData(index=0, records=records.build_batch([(None, b"x")], timestamp=1))
                ],
            )
        ],
    )
    assert manager.leader_path.append_records(produce).answers[TP].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    # The controller's resent LeaderAndIsr, at any epoch: the replica cannot be hosted here.
    response = manager.become_leader_or_follower(leader_and_isr(state(0, leader_epoch=5), epoch=2), MY_EPOCH)
    assert codes(response) == [ErrorCode.KAFKA_STORAGE_ERROR]


async def test_a_follower_cuts_a_damaged_batch_off_and_fetches_it_again(tmp_path: Path) -> None:
    manager, effects, logs = manager_with_log(tmp_path, leader=2)
    damage_last_batch(tmp_path)
    await manager.scrub(1 << 20)
    partition_log = logs.get(TP)
    assert partition_log is not None and partition_log.log_end_offset == 2
    assert manager.state.partitions[TP].high_watermark == 2
    source = manager.state.fetch_targets.get(2)
    assert source is None or TP in source.updates or not source.followed, "the next fetch asks from offset 2"
    assert effects.reports == 0 and TP not in manager.state.offline


async def test_scrubs_of_a_small_budget_go_on_where_the_last_stopped_until_every_log_is_checked(
    tmp_path: Path,
) -> None:
    manager, _, logs = manager_with_log(tmp_path, leader=2, partitions=3)
    damage_last_batch(tmp_path, partition=2)
    # One byte of budget checks one batch: the damaged one is the last of 9.
    for _ in range(8):
        await manager.scrub(1)
    assert all(logs.get(TopicPartition("t", p)).log_end_offset == 3 for p in range(3))  # type: ignore[union-attr]
    await manager.scrub(1)
    assert logs.get(TopicPartition("t", 2)).log_end_offset == 2  # type: ignore[union-attr]
    assert [logs.get(TopicPartition("t", p)).log_end_offset for p in range(2)] == [3, 3]  # type: ignore[union-attr]


async def test_a_failed_log_directory_takes_its_replicas_offline(tmp_path: Path) -> None:
    manager, effects, _ = manager_with_log(tmp_path, leader=1)
    await manager.receive(LogDirFailed((TP,)))
    await manager.receive(LogDirFailed((TP,)))
    assert effects.reports == 1, "told once"
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=1), state(1, leader_epoch=1), epoch=2), MY_EPOCH
    )
    assert codes(response) == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NONE], "only the offline replica"


async def test_the_controller_moves_leadership_off_a_replica_whose_log_directory_failed() -> None:
    cluster = ControllerCluster()
    await started(cluster, 1, 2, 3)
    await cluster.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    await eventually(
        settled(cluster, lambda: TP in cluster.zk.partition_states), timeout=2, message="no state"
    )
    assert cluster.state("t", 0).leader == 1
    cluster.channel.storage_errors = {(1, TP)}
    await cluster.stores[1].propagate_log_dir_event(1)

    def moved() -> bool:
        current = cluster.state("t", 0)
        return current.leader in (2, 3) and 1 not in current.isr and not cluster.zk.log_dir_events

    await eventually(settled(cluster, moved), timeout=2, message="leadership stayed on the failed replica")
    assert cluster.controller.context.replicas_on_offline_dirs == {1: {TP}}
    assert cluster.state("t", 1).isr == (2, 3, 1), "the broker's other replicas stay in their ISR"
    await cluster.stop()
