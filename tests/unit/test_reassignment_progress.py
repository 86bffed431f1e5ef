"""The bytes a reassignment still has to copy, as the leader counts them: from each adding
replica's last fetch offset to the log end, across segments."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_log import batch, open_log
from tests.unit.test_replication import TP, Brokers, produce
from wire.api import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LiveLeader


def test_size_from_counts_whole_batches_to_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, index_interval_bytes=1)
    sizes = []
    for i in range(6):
        data = batch(bytes([65 + i]) * 100)
        sizes.append(len(data))
        log.append_as_leader(data, leader_epoch=0)
    assert log.size_from(0) == log.size == sum(sizes)
    assert log.size_from(4) == sum(sizes[4:])
    assert log.size_from(6) == 0 == log.size_from(60)
    log.append_as_leader(batch(b"x", b"y", b"z"), leader_epoch=0)  # offsets 6-8 in one batch
    assert log.size_from(7) == log.size_from(6) == log.size - sum(sizes)


def moving(leader: int, epoch: int, replicas: list[int], adding: list[int]) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=9,
        controller_epoch=1,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="t",
                partition=0,
                controller_epoch=1,
                leader=leader,
                leader_epoch=epoch,
                isr=[leader],
                partition_epoch=epoch,
                replicas=replicas,
                adding_replicas=adding,
            )
        ],
        live_leaders=[LiveLeader(broker_id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2, 3)],
    )


async def test_the_leader_counts_what_each_adding_replica_lacks(tmp_path: Path) -> None:
    brokers = Brokers(tmp_path)
    for b in (1, 2, 3):
        brokers[b].become_leader_or_follower(moving(1, 0, [1], []), -1)
    leader = brokers[1]
    leader.leader_path.append_records(produce([b"v" * 1000] * 10, acks=1))
    leader.leader_path.append_records(produce([b"w" * 1000] * 10, acks=1))
    assert leader.leader_path.bytes_to_copy() == {}, "nothing is being added"
    for b in (1, 2, 3):
        brokers[b].become_leader_or_follower(moving(1, 1, [1, 2, 3], [2, 3]), -1)
    whole = leader.state.partitions[TP].log.size  # type: ignore[union-attr]
    assert leader.leader_path.bytes_to_copy() == {TP: 2 * whole}, "neither has fetched yet"
    brokers.replicate(2, 1)  # broker 2 copies everything in one fetch
    brokers.replicate(2, 1)  # and its next fetch tells the leader where it ends
    assert leader.leader_path.bytes_to_copy() == {TP: whole}
    assert leader.leader_path.bytes_to_copy({"other"}) == {}
    for b in (1, 2, 3):
        brokers[b].become_leader_or_follower(moving(1, 2, [1, 2, 3], []), -1)
    assert leader.leader_path.bytes_to_copy() == {}, "the reassignment completed"
