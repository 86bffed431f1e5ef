"""The PartitionLog contract, against the log on files (`node.broker.log.log.Log`) and the
simulation's log in memory (`node.sim.log_store.MemoryLog`): the same operations, the same
answers, down to the bytes a read returns. The simulation's verdicts on replication hold for
the broker only as far as its log behaves as the real one does."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.base.ports import PartitionLog, TopicPartition
from node.broker.log.config import LogConfig
from node.broker.log.log import Log
from node.sim.log_store import MemoryLog
from wire import records
from wire.errors import (
    CorruptMessage,
    InvalidProducerEpoch,
    MessageTooLarge,
    OffsetOutOfRange,
    OutOfOrderSequence,
)

TP = TopicPartition("orders", 0)
CONFIG = LogConfig(segment_bytes=1 << 20, max_message_bytes=4096)
Factory = Callable[[], PartitionLog]


@pytest.fixture(params=["file", "memory"])
def new_log(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    made = iter(range(1 << 20))
    if request.param == "file":
        return lambda: Log(tmp_path / f"orders-{next(made)}", TP, CONFIG)
    return lambda: MemoryLog(TP, CONFIG)


def batch(*values: bytes, timestamp: int = 1_000) -> bytes:
    return records.build_batch([(None, v) for v in values], timestamp=timestamp)


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in records.records(data)]


def test_a_leader_stamps_consecutive_offsets_and_its_epoch(new_log: Factory) -> None:
    log = new_log()
    assert log.append_as_leader(batch(b"a", b"b"), leader_epoch=3) == (0, 1)
    assert log.append_as_leader(batch(b"c"), leader_epoch=5) == (2, 2)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (0, 3, 5)
    assert [h.partition_leader_epoch for _, h in records.batches(log.read(0, 1 << 20))] == [3, 5]
    assert log.end_offset_for_epoch(3) == (3, 2)
    assert log.end_offset_for_epoch(4) == (3, 2)
    assert log.end_offset_for_epoch(5) == (5, 3)


def test_reads_return_whole_batches_within_the_bounds(new_log: Factory) -> None:
    log = new_log()
    for i in range(4):
        log.append_as_leader(batch(bytes([i]) * 100, bytes([i])), leader_epoch=0)
    assert offsets(log.read(3, 1 << 20)) == [2, 3, 4, 5, 6, 7]  # from the batch holding 3
    assert offsets(log.read(0, 1 << 20, max_offset=4)) == [0, 1, 2, 3]
    assert offsets(log.read(0, 1)) == [0, 1]  # one batch, however small the budget
    assert log.read(8, 1 << 20) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(9, 100)


def test_a_bad_append_appends_nothing(new_log: Factory) -> None:
    log = new_log()
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    corrupt = bytearray(batch(b"b"))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptMessage):
        log.append_as_leader(batch(b"c") + bytes(corrupt), leader_epoch=0)
    with pytest.raises(MessageTooLarge):
        log.append_as_leader(batch(b"x" * 5000), leader_epoch=0)
    assert log.log_end_offset == 1


def test_a_follower_appends_the_leaders_batches_as_they_are(new_log: Factory) -> None:
    leader, follower = new_log(), new_log()
    leader.append_as_leader(batch(b"a", b"b"), leader_epoch=2)
    leader.append_as_leader(batch(b"c"), leader_epoch=4)
    fetched = leader.read(0, 1 << 20)
    assert follower.append_as_follower(fetched) == 2
    assert follower.read(0, 1 << 20) == fetched
    assert (follower.log_end_offset, follower.latest_epoch) == (3, 4)
    assert follower.end_offset_for_epoch(2) == (2, 2)
    with pytest.raises(CorruptMessage):
        follower.append_as_follower(fetched)  # does not follow the log end


def test_truncation_drops_the_batches_from_the_one_holding_the_offset(new_log: Factory) -> None:
    log = new_log()
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=1)
    log.append_as_leader(batch(b"c", b"d"), leader_epoch=2)
    log.truncate_to(3)  # 3 is in the batch of 2 and 3: it goes whole
    assert (log.log_end_offset, log.latest_epoch) == (2, 1)
    assert offsets(log.read(0, 1 << 20)) == [0, 1]
    log.truncate_fully_and_start_at(10)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (10, 10, -1)
    assert log.append_as_leader(batch(b"e"), leader_epoch=3) == (10, 10)


def _step(log: PartitionLog, rng: random.Random, op: str, leader_log: PartitionLog) -> object:
    """One operation drawn by `op`, its answer (an exception's type counts as an answer)."""
    try:
        match op:
            case "lead":
                values = [
                    bytes([rng.randrange(256)]) * rng.randrange(1, 300) for _ in range(rng.randrange(1, 4))
                ]
                return log.append_as_leader(
                    batch(*values, timestamp=rng.randrange(1, 5000)), rng.randrange(0, 6)
                )
            case "follow":
                start = log.log_end_offset
                if not start <= leader_log.log_end_offset:
                    return "skipped"
                data = (
                    leader_log.read(start, rng.randrange(1, 2000))
                    if start >= leader_log.log_start_offset
                    else b""
                )
                if not data or records.read_header(data).base_offset != start:
                    return "skipped"
                return log.append_as_follower(data)
            case "truncate":
                return log.truncate_to(rng.randrange(-1, log.log_end_offset + 3))
            case "restart":
                return log.truncate_fully_and_start_at(rng.randrange(0, log.log_end_offset + 5))
            case "assign":
                return log.assign_epoch_start_offset(log.latest_epoch + 1, log.log_end_offset)
            case "read":
                at = rng.randrange(log.log_start_offset - 1, log.log_end_offset + 2)
                limit = rng.choice([None, rng.randrange(at, log.log_end_offset + 2)]) if at >= 0 else None
                return log.read(at, rng.randrange(1, 3000), limit)
            case "epoch":
                return log.end_offset_for_epoch(rng.randrange(-1, 8))
            case "size":
                return log.size_from(rng.randrange(log.log_start_offset, log.log_end_offset + 2))
            case "time":
                return log.offset_for_timestamp(rng.randrange(0, 5200))
    except Exception as e:
        return type(e).__name__
    raise AssertionError(op)


OPERATIONS = (
    ["lead"] * 6 + ["follow"] * 3 + ["truncate", "restart", "assign"] + ["read", "epoch", "size", "time"] * 2
)


@pytest.mark.parametrize("seed", range(30))
def test_the_memory_log_answers_as_the_file_log_does(tmp_path: Path, seed: int) -> None:
    """A seeded run of every operation on both logs side by side: every answer equal, and
    the state after each (start, end, latest epoch) too."""
    file_log = Log(tmp_path / "orders-0", TP, CONFIG)
    file_leader = Log(tmp_path / "orders-1", TP, CONFIG)
    memory_log, memory_leader = MemoryLog(TP, CONFIG), MemoryLog(TP, CONFIG)
    rng = random.Random(seed)
    for step in range(120):
        op = rng.choice(OPERATIONS)
        state = rng.getstate()
        if op == "follow":  # both leaders take the same batch first, so there is something to fetch
            lead_state = random.Random(rng.randrange(1 << 30))
            values = [bytes([lead_state.randrange(256)]) * 50 for _ in range(lead_state.randrange(1, 4))]
            data = batch(*values)
            assert file_leader.append_as_leader(data, 1) == memory_leader.append_as_leader(data, 1)
            state = rng.getstate()
        rng.setstate(state)
        on_file = _step(file_log, rng, op, file_leader)
        rng.setstate(state)
        in_memory = _step(memory_log, rng, op, memory_leader)
        assert on_file == in_memory, f"seed {seed} step {step}: {op}"
        assert (file_log.log_start_offset, file_log.log_end_offset, file_log.latest_epoch) == (
            memory_log.log_start_offset,
            memory_log.log_end_offset,
            memory_log.latest_epoch,
        ), f"seed {seed} step {step}: {op}"


# --- idempotent producers (node/broker/log/producer_state.py) ---


def idempotent(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    """A batch as kafka-python's idempotent producer writes it."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 16,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def test_a_retried_batch_is_answered_with_its_first_offsets_and_not_appended(new_log: Factory) -> None:
    log = new_log()
    assert log.append_as_leader(idempotent(7, 0, 0, b"a", b"b"), leader_epoch=1) == (0, 1)
    assert log.append_as_leader(idempotent(7, 0, 2, b"c"), leader_epoch=1) == (2, 2)
    assert log.append_as_leader(idempotent(7, 0, 0, b"a", b"b"), leader_epoch=1) == (0, 1)
    assert log.append_as_leader(idempotent(7, 0, 2, b"c"), leader_epoch=1) == (2, 2)
    assert log.log_end_offset == 3
    assert [r.value for r in records.records(log.read(0, 1 << 20))] == [b"a", b"b", b"c"]
    # Another producer's sequences are its own.
    assert log.append_as_leader(idempotent(8, 0, 0, b"x"), leader_epoch=1) == (3, 3)


def test_a_gap_in_sequences_and_a_fenced_epoch_are_refused(new_log: Factory) -> None:
    log = new_log()
    log.append_as_leader(idempotent(7, 2, 0, b"a"), leader_epoch=1)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent(7, 2, 2, b"lost one before"), leader_epoch=1)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(idempotent(7, 1, 1, b"fenced"), leader_epoch=1)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent(7, 3, 5, b"a new epoch starts at 0"), leader_epoch=1)
    assert log.log_end_offset == 1, "nothing refused was appended"
    assert log.append_as_leader(idempotent(7, 3, 0, b"b"), leader_epoch=1) == (1, 1)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(idempotent(7, 2, 1, b"the old epoch, fenced now"), leader_epoch=1)


def test_a_producer_a_partition_does_not_know_may_start_at_any_sequence(new_log: Factory) -> None:
    log = new_log()
    assert log.append_as_leader(idempotent(9, 0, 41, b"a"), leader_epoch=1) == (0, 0)
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent(9, 0, 43, b"b"), leader_epoch=1)


def test_a_follower_keeps_the_state_a_new_leader_dedupes_with(new_log: Factory) -> None:
    leader, follower = new_log(), new_log()
    leader.append_as_leader(idempotent(7, 0, 0, b"a"), leader_epoch=1)
    follower.append_as_leader(idempotent(1, 0, 0, b"state built before the copy"), leader_epoch=0)
    follower.truncate_to(0)
    follower.append_as_follower(leader.read(0, 1 << 20))
    # The follower, now leader, answers the producer's retry with the offset it was given.
    assert follower.append_as_leader(idempotent(7, 0, 0, b"a"), leader_epoch=2) == (0, 0)
    assert follower.log_end_offset == 1


def test_after_a_truncation_the_state_is_read_again(new_log: Factory) -> None:
    log = new_log()
    log.append_as_leader(idempotent(7, 0, 0, b"a"), leader_epoch=1)
    log.append_as_leader(idempotent(7, 0, 1, b"b"), leader_epoch=1)
    log.truncate_to(1)
    # Sequence 1 is gone with its batch: the producer's retry of it is appended anew.
    assert log.append_as_leader(idempotent(7, 0, 1, b"b"), leader_epoch=2) == (1, 1)


def test_a_reopened_file_log_dedupes_from_its_batches(tmp_path: Path) -> None:
    log = Log(tmp_path / "orders-0", TP, CONFIG)
    log.append_as_leader(idempotent(7, 0, 0, b"a", b"b"), leader_epoch=1)
    log.close()
    again = Log(tmp_path / "orders-0", TP, CONFIG)
    assert again.append_as_leader(idempotent(7, 0, 0, b"a", b"b"), leader_epoch=1) == (0, 1)
    assert again.append_as_leader(idempotent(7, 0, 2, b"c"), leader_epoch=1) == (2, 2)
