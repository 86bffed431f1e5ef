"""The partition log on real files: appends, reads, segments, recovery, truncation, retention,
and the leader-epoch cache."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from actors.base.ports import LogCorruption, TopicPartition
from node.broker.log import manager as manager_module
from node.broker.log import segment as segment_module
from node.broker.log.checkpoint import read_checkpoint
from node.broker.log.config import LogConfig
from node.broker.log.epoch_cache import LeaderEpochCache
from node.broker.log.failure_channel import LogDirFailureChannel
from node.broker.log.log import Log
from node.broker.log.manager import LogManager
from wire import records
from wire.errors import CorruptMessage, ErrorCode, KafkaStorageError, MessageTooLarge, OffsetOutOfRange

TP = TopicPartition("orders", 0)


def batch(*values: bytes, timestamp: int = 1_000) -> bytes:
    return records.build_batch([(None, v) for v in values], timestamp=timestamp)


def values(data: bytes) -> list[bytes | None]:
    return [r.value for r in records.records(data)]


def open_log(path: Path, **config: int) -> Log:
    return Log(path / "orders-0", TP, LogConfig(**config))


def test_the_leader_gives_consecutive_offsets_and_reads_return_them(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.append_as_leader(batch(b"a", b"b"), leader_epoch=0) == (0, 1)
    assert log.append_as_leader(batch(b"c"), leader_epoch=0) == (2, 2)
    assert log.log_end_offset == 3
    assert [r.offset for r in records.records(log.read(0, 1 << 20))] == [0, 1, 2]
    assert values(log.read(2, 1 << 20)) == [b"c"]
    assert values(log.read(1, 1 << 20)) == [b"a", b"b", b"c"]  # whole batches
    assert log.read(3, 1 << 20) == b""


def test_reads_stop_at_the_high_watermark_and_the_byte_budget_but_return_one_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(5):
        log.append_as_leader(batch(bytes([i]) * 100), leader_epoch=0)
    assert values(log.read(0, 1 << 20, max_offset=2)) == [b"\x00" * 100, b"\x01" * 100]
    assert len(values(log.read(0, 10))) == 1  # larger than the budget, still returned
    assert len(values(log.read(0, 400))) == 2


def test_offsets_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_a_bad_batch_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500)
    good = batch(b"a")
    corrupt = bytearray(batch(b"b"))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptMessage):
        log.append_as_leader(good + bytes(corrupt), leader_epoch=0)
    with pytest.raises(MessageTooLarge):
        log.append_as_leader(batch(b"x" * 600), leader_epoch=0)
    with pytest.raises(CorruptMessage):
        log.append_as_leader(b"", leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.size == 0


def test_segments_roll_by_size_and_reads_cross_them(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(10):
        log.append_as_leader(batch(bytes([65 + i]) * 100), leader_epoch=0)
    assert len(list((tmp_path / "orders-0").glob("*.log"))) == 10
    assert values(log.read(3, 1 << 20)) == [bytes([65 + i]) * 100 for i in range(3, 10)]


def test_reopening_keeps_every_batch_and_the_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    for i in range(30):
        log.append_as_leader(batch(str(i).encode() * 20), leader_epoch=i // 10)
    log.close()
    again = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    assert (again.log_start_offset, again.log_end_offset) == (0, 30)
    assert values(again.read(17, 1 << 20))[0] == b"17" * 20
    assert again.epochs.entries == [(0, 0), (1, 10), (2, 20)]


def test_a_torn_tail_is_cut_back_to_the_last_good_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    log.close()
    segment = tmp_path / "orders-0" / f"{0:020d}.log"
    segment.write_bytes(segment.read_bytes()[:-20])  # the last batch is cut mid-way
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path)
    assert again.log_end_offset == 2
    assert values(again.read(0, 1 << 20)) == [b"\x00" * 50, b"\x01" * 50]
    assert "torn bytes dropped" in caplog.text
    assert again.append_as_leader(batch(b"next"), leader_epoch=0) == (2, 2)


def test_a_tail_batch_failing_its_crc_is_dropped_on_recovery(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"kept"), leader_epoch=0)
    log.append_as_leader(batch(b"damaged"), leader_epoch=0)
    log.close()
    segment = tmp_path / "orders-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-2] ^= 0xFF
    segment.write_bytes(bytes(data))
    again = open_log(tmp_path)
    assert values(again.read(0, 1 << 20)) == [b"kept"]


def test_a_follower_appends_the_leaders_offsets_and_refuses_overlaps(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    leader.append_as_leader(batch(b"a", b"b"), leader_epoch=3)
    leader.append_as_leader(batch(b"c"), leader_epoch=4)
    assert follower.append_as_follower(leader.read(0, 1 << 20)) == 2
    assert follower.log_end_offset == 3
    assert follower.epochs.entries == [(3, 0), (4, 2)]
    with pytest.raises(CorruptMessage, match="does not follow"):
        follower.append_as_follower(leader.read(2, 1 << 20))


def test_truncation_drops_later_batches_and_their_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    for epoch in range(4):
        log.append_as_leader(batch(bytes([epoch]) * 80), leader_epoch=epoch)
    log.truncate_to(2)
    assert log.log_end_offset == 2
    assert log.epochs.entries == [(0, 0), (1, 1)]
    assert log.append_as_leader(batch(b"new"), leader_epoch=5) == (2, 2)
    assert values(log.read(0, 1 << 20))[-1] == b"new"


def test_a_truncation_at_the_log_end_drops_an_epoch_that_starts_there(tmp_path: Path) -> None:
    """Kafka's truncateTo: a broker that led in an epoch and wrote nothing in it has an entry
    for it at its log end; a follower's truncation there drops it, else the follower would
    ask its leader where that epoch ends again and again (simulation seed 37862)."""
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.assign_epoch_start_offset(2, log.log_end_offset)
    log.truncate_to(log.log_end_offset)
    assert (log.log_end_offset, log.latest_epoch) == (1, 1)
    assert LeaderEpochCache(tmp_path / "orders-0").entries == [(1, 0)]


def test_a_failed_checkpoint_write_in_a_truncation_at_the_log_end_takes_the_directory_offline(
    tmp_path: Path,
) -> None:
    """The epoch dropped at the log end rewrites leader-epoch-checkpoint: an I/O error there is
    a storage error like any other, not an OSError that escapes the replica manager."""
    failures = LogDirFailureChannel()
    log = Log(tmp_path / "orders-0", TP, LogConfig(), failures=failures)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.assign_epoch_start_offset(2, log.log_end_offset)
    shutil.rmtree(tmp_path / "orders-0")  # the checkpoint cannot be written again
    with pytest.raises(KafkaStorageError):
        log.truncate_to(log.log_end_offset)
    assert failures.offline == {tmp_path}


def test_retention_deletes_old_closed_segments_below_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200, retention_bytes=400)
    for i in range(6):
        log.append_as_leader(batch(bytes([i]) * 100, timestamp=1_000 + i), leader_epoch=0)
    assert log.delete_old_segments(now_ms=2_000, high_watermark=0) == 0  # the HW protects them
    assert log.delete_old_segments(now_ms=2_000, high_watermark=6) > 0
    assert log.size <= 400 + 200
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)


def test_retention_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200, retention_ms=1_000)
    for i in range(4):
        log.append_as_leader(batch(bytes([i]) * 100, timestamp=1_000 * i), leader_epoch=0)
    log.delete_old_segments(now_ms=3_500, high_watermark=4)
    assert log.log_start_offset == 3  # segments whose newest record is over a second old


def test_offset_for_timestamp_finds_the_first_batch_at_or_after_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(batch(b"x", timestamp=100 * (i + 1)), leader_epoch=0)
    assert log.offset_for_timestamp(150) == (1, 200, 0)
    assert log.offset_for_timestamp(400) is None


def test_the_epoch_cache_answers_where_an_epoch_ends(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 25)
    assert cache.end_offset_for(4, log_end_offset=40) == (4, 40)  # the latest: the log end
    assert cache.end_offset_for(3, log_end_offset=40) == (3, 25)
    assert cache.end_offset_for(2, log_end_offset=40) == (1, 10)  # unknown: the one below
    assert cache.end_offset_for(0, log_end_offset=40) == (0, 0)  # older than any
    assert cache.end_offset_for(9, log_end_offset=40) == (-1, -1)
    assert read_checkpoint(tmp_path / "leader-epoch-checkpoint") == [["1", "0"], ["3", "10"], ["4", "25"]]
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (3, 10), (4, 25)]


def test_the_epoch_cache_drops_entries_a_new_assignment_contradicts() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(2, 0)
    cache.assign(5, 10)
    cache.assign(4, 8)  # an older epoch at a lower offset: the later entries cannot stand
    assert cache.entries == [(2, 0), (4, 8)]
    cache.truncate_from_start(9)
    assert cache.entries == [(4, 9)]


async def test_new_logs_go_to_the_directory_holding_fewest_and_high_watermarks_survive(
    tmp_path: Path,
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    manager.load()
    for p in range(4):
        manager.get_or_create(TopicPartition("t", p), {})
    assert [sum(c.is_dir() for c in d.iterdir()) for d in dirs] == [2, 2]
    manager.delete(TopicPartition("t", 0))
    manager.get_or_create(TopicPartition("u", 0), {})
    assert (dirs[0] / "u-0").is_dir(), "the directory that lost a log gets the next one"
    await manager.checkpoint_high_watermarks({TopicPartition("t", 1): 7})
    await manager.close()
    again = LogManager(dirs, LogConfig())
    again.load()
    assert again.checkpointed_high_watermark(TopicPartition("t", 1)) == 7
    assert set(again.logs) == {TopicPartition("t", p) for p in (1, 2, 3)} | {TopicPartition("u", 0)}


async def test_a_checkpoint_that_cannot_be_written_takes_only_its_directory_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    manager.load()
    for p in range(2):
        manager.get_or_create(TopicPartition("t", p), {})
    (dirs[0] / "replication-offset-checkpoint.tmp").mkdir()  # where the write goes first
    await manager.checkpoint_high_watermarks({TopicPartition("t", 0): 3, TopicPartition("t", 1): 4})
    assert [manager.failures.is_offline(d) for d in dirs] == [True, False]
    assert len(read_checkpoint(dirs[1] / "replication-offset-checkpoint")) == 1


# --- recovery from the recovery point (Kafka's recovery-point-offset-checkpoint) ---


def flip_byte(segment: Path, from_end: int) -> None:
    data = bytearray(segment.read_bytes())
    data[len(data) - from_end] ^= 0xFF
    segment.write_bytes(bytes(data))


def three_segments(tmp_path: Path) -> tuple[Log, list[Path]]:
    """A log of three segments of three 50-byte batches each, offsets 0..8."""
    log = open_log(tmp_path, segment_bytes=400)
    for i in range(9):
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    segments = sorted((tmp_path / "orders-0").glob("*.log"))
    assert len(segments) == 3
    return log, segments


def test_recovery_checks_every_segment_after_the_recovery_point_not_only_the_active_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log, segments = three_segments(tmp_path)
    log.close()
    flip_byte(segments[1], from_end=2)  # the last batch of the middle segment, offset 5
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path, segment_bytes=400)  # no recovery point: all is checked
    assert again.log_end_offset == 5
    assert values(again.read(0, 1 << 20)) == [bytes([i]) * 50 for i in range(5)]
    assert not segments[2].exists(), "the segment after the bad batch is deleted"
    assert "1 later segment(s) deleted" in caplog.text
    assert again.append_as_leader(batch(b"next"), leader_epoch=1) == (5, 5)


def test_recovery_skips_segments_below_the_recovery_point(tmp_path: Path) -> None:
    log, segments = three_segments(tmp_path)
    log.close()
    flip_byte(segments[0], from_end=2)  # below the recovery point: trusted, not checked
    flip_byte(segments[2], from_end=2)
    again = Log(tmp_path / "orders-0", TP, LogConfig(segment_bytes=400), recovery_point=6)
    assert again.log_end_offset == 8, "the bad batch after the recovery point is cut"
    assert again.recovery_point == 6


def test_a_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    log, segments = three_segments(tmp_path)
    log.close()
    flip_byte(segments[2], from_end=2)
    again = Log(
        tmp_path / "orders-0", TP, LogConfig(segment_bytes=400), recovery_point=9, clean_shutdown=True
    )
    assert again.log_end_offset == 9
    assert again.recovery_point == 9


def test_flush_moves_the_recovery_point_and_truncation_brings_it_back(tmp_path: Path) -> None:
    log, _ = three_segments(tmp_path)
    assert log.recovery_point == 6, "each roll flushed (without a flusher, there and then)"
    log.flush()
    assert log.recovery_point == 9
    log.truncate_to(4)
    assert log.recovery_point == 4
    log.truncate_fully_and_start_at(20)
    assert log.recovery_point == 20


async def test_the_log_manager_checkpoints_recovery_points_and_marks_a_clean_shutdown(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=400)
    manager = LogManager([tmp_path], config)
    manager.load()
    log = manager.get_or_create(TP, {})
    for i in range(6):
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    log.flush()  # the recovery point is 6: the first two segments are on disk
    for i in range(6, 9):
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    await manager.checkpoint_recovery_points()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == [["orders", "0", "6"]]
    log.close()  # a crash: no clean-shutdown marker
    segments = sorted((tmp_path / "orders-0").glob("*.log"))
    flip_byte(segments[2], from_end=2)
    crashed = LogManager([tmp_path], config)
    crashed.load()
    recovered = crashed.get(TP)
    assert recovered is not None and recovered.log_end_offset == 8
    await crashed.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == [["orders", "0", "8"]]
    clean = LogManager([tmp_path], config)
    clean.load()
    assert not (tmp_path / ".kafka_cleanshutdown").exists(), "a later crash must not pass for clean"


# --- damaged batches are never served ---


def test_a_read_never_serves_a_batch_failing_its_crc_and_holds_the_recovery_point_below_it(
    tmp_path: Path,
) -> None:
    log, segments = three_segments(tmp_path)
    log.flush()
    flip_byte(segments[1], from_end=2)  # offset 5, on disk under a running broker
    first_segment = segments[0].stat().st_size
    assert values(log.read(0, first_segment)) == [bytes([i]) * 50 for i in range(3)], "before it: served"
    with pytest.raises(LogCorruption) as found:
        log.read(0, 1 << 20)
    assert found.value.offset == 5
    assert log.recovery_point == 5
    log.flush()
    assert log.recovery_point == 5, "a flush does not move the recovery point past the damage"
    log.close()
    again = Log(
        tmp_path / "orders-0", TP, LogConfig(segment_bytes=400), recovery_point=5, clean_shutdown=True
    )
    assert again.log_end_offset == 5, "even after a clean shutdown, the next start cuts the damage"


def test_a_damaged_header_is_reported_from_the_index_entry_before_it(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=1 << 20)  # one index entry: offset 0
    for i in range(4):
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    segment = tmp_path / "orders-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[len(data) // 2 + 16] = 9  # the magic byte of the third batch
    segment.write_bytes(bytes(data))
    with pytest.raises(LogCorruption) as found:
        log.read(3, 1 << 20)
    assert found.value.offset == 0, "a scan from the index entry met it: whole only below that entry"


def test_the_scrub_walks_the_log_and_wraps_around(tmp_path: Path) -> None:
    log, segments = three_segments(tmp_path)
    third = log.size // 3  # a segment's worth
    checked = []
    for _ in range(3):
        assert not log.scrubbed_to_end
        checked.append(log.scrub(third))
    assert sum(checked) == log.size, "three passes cover the three segments"
    assert log.scrubbed_to_end
    checked.append(log.scrub(third))
    assert checked[3] > 0, "then it starts again at the log start"
    flip_byte(segments[2], from_end=2)
    with pytest.raises(LogCorruption) as found:
        for _ in range(4):
            log.scrub(third)
    assert found.value.offset == 8
    log.truncate_to(found.value.offset)
    log.scrub(1 << 20)  # the rest of this pass
    assert log.scrub(1 << 20) == log.size, "the next pass finds the whole log good"


def test_an_io_error_takes_the_directory_offline_once_and_fails_every_later_operation(
    tmp_path: Path,
) -> None:
    failures = LogDirFailureChannel()
    log = Log(tmp_path / "orders-0", TP, LogConfig(), failures=failures)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    for segment in log._segments:
        segment.close()  # the next write meets EBADF: an I/O error like any other
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(b"b"), leader_epoch=0)
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    assert failures.offline == {tmp_path}
    assert failures._queue.qsize() == 1, "the directory is reported once"


def test_a_leaders_epoch_is_kept_in_memory_until_its_first_append_saves_it(tmp_path: Path) -> None:
    """A broker taking over thousands of partitions does not fsync an epoch checkpoint for
    each; the first append in the epoch writes it, and a restart before any append forgets
    an entry nothing was written under."""
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a"), leader_epoch=1)
    log.assign_epoch_start_offset(2, log.log_end_offset)
    assert log.epochs.entries == [(1, 0), (2, 1)]
    assert LeaderEpochCache(tmp_path / "orders-0").entries == [(1, 0)], "no checkpoint write yet"
    log.append_as_leader(batch(b"b"), leader_epoch=2)
    assert LeaderEpochCache(tmp_path / "orders-0").entries == [(1, 0), (2, 1)]


# --- offsets that a 32-bit index cannot hold, and batches out of order on disk ---


def claiming(base_offset: int, count: int, value: bytes = b"x") -> bytes:
    """A batch whose header claims `count` records (a follower appends what its leader gave
    it without walking the records), at `base_offset`."""
    out = bytearray(records.build_batch([(None, value)], timestamp=1, base_offset=base_offset))
    out[23:27] = (count - 1).to_bytes(4, "big")  # last offset delta
    out[57:61] = count.to_bytes(4, "big")  # records count
    out[17:21] = records.checksum(out[21:]).to_bytes(4, "big")
    return bytes(out)


def test_a_segment_rolls_before_an_offset_would_leave_its_32_bit_index(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(claiming(0, 2**31 - 1))  # offsets 0 to 2^31 - 2
    log.append_as_follower(claiming(2**31 - 1, 2))  # the last would be 2^31 past the base
    assert log.log_end_offset == 2**31 + 1
    assert [p.name for p in sorted((tmp_path / "orders-0").glob("*.log"))] == [
        f"{0:020d}.log",
        f"{2**31 - 1:020d}.log",
    ]
    log.close()
    again = open_log(tmp_path)
    assert again.log_end_offset == 2**31 + 1


def test_recovery_stops_at_a_batch_whose_offset_does_not_follow(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    log.close()
    segment = tmp_path / "orders-0" / f"{0:020d}.log"
    with segment.open("ab") as f:  # offset 1 again, after offsets 0-1
        f.write(records.build_batch([(None, b"c")], timestamp=1, base_offset=1))
    recovered = open_log(tmp_path)
    assert recovered.log_end_offset == 2
    assert values(recovered.read(0, 1 << 20)) == [b"a", b"b"]


def test_a_segment_append_that_cannot_be_indexed_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    segment = log._segments[-1]
    size, end = segment.size, segment.next_offset
    forged = claiming(2**31 + 5, 1)  # past what 32 bits above the segment's base hold
    header = records.read_header(forged)
    with pytest.raises(ValueError):
        segment.append(forged, header, header, header.max_timestamp)
    assert (segment.size, segment.next_offset) == (size, end)
    assert (tmp_path / "orders-0" / f"{0:020d}.log").stat().st_size == size


async def test_a_log_that_cannot_be_loaded_takes_its_directory_offline_not_the_broker(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    manager.load()
    manager.get_or_create(TopicPartition("t", 0), {}).append_as_leader(batch(b"x"), leader_epoch=0)
    manager.get_or_create(TopicPartition("t", 1), {}).append_as_leader(batch(b"y"), leader_epoch=0)
    await manager.close()
    broken = next(d for d in dirs if (d / "t-0").exists())
    (broken / "t-0" / f"{0:020d}.log").unlink()
    (broken / "t-0" / f"{0:020d}.log").mkdir()  # unreadable as a segment
    again = LogManager(dirs, LogConfig())
    again.load()
    assert again.failures.is_offline(broken)
    assert await again.failures.take_next_offline_log_dir() == broken
    assert TopicPartition("t", 0) in again.handle_log_dir_failure(broken)
    with pytest.raises(KafkaStorageError):
        again.get_or_create(TopicPartition("t", 0), {})  # never afresh in the other directory
    assert not (broken / "t-1").exists(), "new logs go to the directory holding fewest"
    log = again.get(TopicPartition("t", 1))
    assert log is not None and values(log.read(0, 1 << 20)) == [b"y"], "the other directory serves on"


# --- out of file descriptors: not a failed disk ---


def test_an_append_out_of_file_descriptors_fails_alone_and_the_log_stays_online(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = LogDirFailureChannel()
    log = Log(tmp_path / "orders-0", TP, LogConfig(segment_bytes=100), failures=failures)
    log.append_as_leader(batch(b"a" * 80), leader_epoch=0)

    def no_descriptor(*_: object) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    with monkeypatch.context() as patched:
        patched.setattr(segment_module.os, "open", no_descriptor)
        with pytest.raises(KafkaStorageError):
            log.append_as_leader(batch(b"b" * 80), leader_epoch=0)  # rolls: a new segment's files
    assert not log.offline and not failures.is_offline(tmp_path)
    assert log.append_as_leader(batch(b"c" * 80), leader_epoch=0) == (1, 1)


async def test_a_checkpoint_out_of_file_descriptors_is_retried_not_an_offline_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    manager.get_or_create(TP, {})

    def no_descriptor(*_: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    with monkeypatch.context() as patched:
        patched.setattr(manager_module, "write_checkpoint", no_descriptor)
        await manager.checkpoint_high_watermarks({TP: 5})
    assert not manager.failures.is_offline(tmp_path)
    await manager.checkpoint_high_watermarks({})  # nothing moved since: written all the same
    assert read_checkpoint(tmp_path / "replication-offset-checkpoint") == [["orders", "0", "5"]]


async def test_the_high_watermark_checkpoint_is_written_again_only_when_something_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    manager.get_or_create(TP, {})
    writes: list[list[list[str]]] = []
    real_write = manager_module.write_checkpoint

    def counted(path: Path, lines: list[str]) -> None:
        writes.append([line.split() for line in lines])
        real_write(path, lines)

    monkeypatch.setattr(manager_module, "write_checkpoint", counted)
    await manager.checkpoint_high_watermarks({})  # a new log: written, at 0
    await manager.checkpoint_high_watermarks({})
    await manager.checkpoint_high_watermarks({TP: 3})
    await manager.checkpoint_high_watermarks({})
    other = TopicPartition("other", 1)
    manager.get_or_create(other, {})
    await manager.checkpoint_high_watermarks({})
    manager.delete(other)
    await manager.checkpoint_high_watermarks({})
    assert [sorted(w) for w in writes] == [
        [["orders", "0", "0"]],
        [["orders", "0", "3"]],
        [["orders", "0", "3"], ["other", "1", "0"]],
        [["orders", "0", "3"]],
    ]


async def test_a_roll_flushes_the_rolled_segments_off_the_loop_and_moves_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kafka's flush on roll: an unclean restart then recovers the active segment only.
    Every fsync of a segment runs on the flusher's thread, flush.messages=1's too."""
    synced_on: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith((".log", ".index")):
            synced_on.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    manager = LogManager([tmp_path], LogConfig(segment_bytes=400))
    manager.load()
    log = manager.get_or_create(TP, {})
    for i in range(7):  # 3 batches a segment: rolls at offsets 3 and 6
        log.append_as_leader(batch(bytes([i]) * 50), leader_epoch=0)
    assert log.recovery_point == 0, "nothing flushed on the loop"
    await manager.flushed()
    assert log.recovery_point == 6
    await manager.checkpoint_recovery_points()
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == [["orders", "0", "6"]]
    every_append = manager.get_or_create(TopicPartition("audit", 0), {"flush.messages": "1"})
    for i in range(5):
        every_append.append_as_leader(batch(bytes([i])), leader_epoch=0)
    await manager.flushed()
    assert every_append.recovery_point == 5
    assert synced_on and threading.main_thread().name not in synced_on
    log.truncate_to(2)  # a flush that finishes after a truncation moves nothing
    log.flush_wanted = 7
    upto, truncations, _ = log.files_to_flush()
    log.truncate_to(1)
    log.flushed(upto, truncations)
    assert log.recovery_point == 1


def test_a_topics_segment_size_below_the_floor_counts_as_the_floor() -> None:
    """A topic given a smaller segment.bytes before KIP-1030's floor keeps it in ZooKeeper;
    its logs roll at 1 MiB. The broker's log.internal.segment.bytes (tests) still decides."""
    assert LogConfig().with_topic_configs({"segment.bytes": "14"}).roll_bytes == 1 << 20
    small = LogConfig(internal_segment_bytes=2048)
    assert small.with_topic_configs({"segment.bytes": "14"}).roll_bytes == 2048


async def test_an_append_that_sets_off_a_flush_is_answered_once_it_is_on_disk(tmp_path: Path) -> None:
    """flush.messages: as Kafka's append, which flushes there and then, the produce that set
    off the flush waits for it (on the flusher's thread, not the loop); the others do not."""
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    every_second = manager.get_or_create(TP, {"flush.messages": "2"})
    every_second.append_as_leader(batch(b"a"), leader_epoch=0)
    assert every_second.flush_waiter(1) is None, "no flush set off: nothing to wait for"
    every_second.append_as_leader(batch(b"b"), leader_epoch=0)
    waiter = every_second.flush_waiter(2)
    assert waiter is not None and not waiter.done()
    await manager.flushed()
    assert waiter.result() == ErrorCode.NONE and every_second.recovery_point == 2
    every_second.append_as_leader(batch(b"c", b"d"), leader_epoch=0)
    lost = every_second.flush_waiter(4)
    assert lost is not None
    every_second.close()  # its directory offline before the flush
    assert lost.result() == ErrorCode.KAFKA_STORAGE_ERROR


def test_a_segment_loaded_from_its_index_keeps_its_largest_timestamp(tmp_path: Path) -> None:
    """Loading reads only the batches after the last index entry; the largest timestamp of
    the segment may be before it. Retention by time and ListOffsets by time go by it: a
    segment counted by its tail's older timestamp was deleted a retention period early."""
    config = LogConfig(segment_bytes=400, index_interval_bytes=1, retention_ms=1_000_000)
    log = Log(tmp_path / "orders-0", TP, config)
    log.append_as_leader(batch(b"new" * 20, timestamp=5_000_000), leader_epoch=0)
    log.append_as_leader(batch(b"old" * 20, timestamp=1_000), leader_epoch=0)
    log.append_as_leader(batch(b"x" * 400, timestamp=5_000_000), leader_epoch=0)  # rolls a segment
    assert len(log._segments) == 2
    end = log.log_end_offset
    log.close()
    again = Log(tmp_path / "orders-0", TP, config, recovery_point=end, clean_shutdown=True)
    assert again.offset_for_timestamp(4_000_000) == (0, 5_000_000, 0)
    assert again.delete_old_segments(now_ms=5_500_000, high_watermark=end) == 0, "younger than retention.ms"
    assert again.delete_old_segments(now_ms=6_100_000, high_watermark=end) == 1


def test_a_truncation_keeps_the_largest_timestamp_of_what_is_left(tmp_path: Path) -> None:
    log = Log(tmp_path / "orders-0", TP, LogConfig(index_interval_bytes=1))
    for timestamp in (5_000_000, 1_000, 2_000):
        log.append_as_leader(batch(b"a", timestamp=timestamp), leader_epoch=0)
    log.truncate_to(2)
    assert log.offset_for_timestamp(4_000_000) == (0, 5_000_000, 0)


def test_an_append_of_several_batches_counts_the_timestamps_of_every_one(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fetched = b"".join(
        records.build_batch([(None, b"v")], timestamp=t, base_offset=i)
        for i, t in enumerate((1_000, 9_000_000, 2_000))
    )
    assert log.append_as_follower(fetched) == 3
    assert log.offset_for_timestamp(5_000_000) == (1, 9_000_000, -1)  # built with no leader epoch


@pytest.mark.parametrize("target", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
def test_a_topics_compression_type_has_the_leader_recompress_what_differs(
    tmp_path: Path, target: str
) -> None:
    """compression.type other than producer: batches in another codec are stored in the
    topic's (their records, producer fields and timestamps kept, the CRC made anew); a batch
    already in it is stored as sent."""
    from wire import compression

    log = Log(tmp_path / "orders-0", TP, LogConfig(compression_type=target))
    wanted = compression.CODECS.get(target, compression.NONE)
    other = compression.LZ4 if wanted != compression.LZ4 else compression.GZIP
    plain = records.build_batch([(b"k1", b"v1"), (None, b"v2")], timestamp=5_000)
    squeezed = records.build_batch([(b"k3", b"v3")], timestamp=6_000, compression_codec=other)
    same = records.build_batch([(b"k4", b"v4")], timestamp=7_000, compression_codec=wanted)
    for data in (plain, squeezed, same):
        log.append_as_leader(data, leader_epoch=3)
    stored = log.read(0, 1 << 20)
    codecs = [header.attributes & records.COMPRESSION_MASK for _, header in records.batches(stored)]
    assert codecs == [wanted, wanted, wanted], "every batch CRC-checked, in the topic's codec"
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records.records(stored)] == [
        (0, b"k1", b"v1", 5_000),
        (1, None, b"v2", 5_000),
        (2, b"k3", b"v3", 6_000),
        (3, b"k4", b"v4", 7_000),
    ]
    last = list(records.batches(stored))[-1]
    assert (
        stored[last[0] : last[0] + last[1].size][records.LOG_OVERHEAD + 4 :]
        == same[records.LOG_OVERHEAD + 4 :]
    ), "a batch already in the codec is kept byte for byte (but its offset and leader epoch)"


def test_records_deleted_below_an_offset_are_gone_for_readers_and_stay_gone(tmp_path: Path) -> None:
    """DeleteRecords: the log starts at the offset asked, inside a segment; the segments wholly
    below it go; the start never moves back nor past the log end; the manager's checkpoint
    keeps it across a restart."""
    log = open_log(tmp_path, internal_segment_bytes=1)  # a segment per batch
    for value in (b"a", b"b", b"c", b"d"):
        log.append_as_leader(batch(value, value), leader_epoch=0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 8)
    assert log.advance_log_start_offset(5)
    assert log.log_start_offset == 5
    assert sorted(p.name for p in (tmp_path / "orders-0").glob("*.log")) == [
        "00000000000000000004.log",
        "00000000000000000006.log",
    ], "the segments wholly below offset 5 are deleted, the one holding it kept"
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 1 << 20)
    assert [r.offset for r in records.records(log.read(5, 1 << 20))][:2] == [4, 5], "whole batches"
    assert not log.advance_log_start_offset(3), "never back"
    assert log.advance_log_start_offset(100) and log.log_start_offset == 8, "never past the end"
    log.close()
    reopened = Log(tmp_path / "orders-0", TP, LogConfig(internal_segment_bytes=1), log_start_offset=8)
    assert reopened.log_start_offset == 8


async def test_the_log_start_offsets_are_checkpointed_and_read_back(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    log = manager.get_or_create(TP, {})
    for value in (b"a", b"b", b"c"):
        log.append_as_leader(batch(value), leader_epoch=0)
    log.advance_log_start_offset(2)
    await manager.close()
    again = LogManager([tmp_path], LogConfig())
    again.load()
    restored = again.get(TP)
    assert restored is not None and restored.log_start_offset == 2
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == [["orders", "0", "2"]]


def idempotent_batch(producer_id: int, sequence: int, *values: bytes) -> bytes:
    """A batch of an idempotent producer: its id, epoch 0 and first sequence in the header."""
    import struct

    data = bytearray(batch(*values))
    struct.pack_into(">qhi", data, 43, producer_id, 0, sequence)
    struct.pack_into(">I", data, 17, records.checksum(memoryview(data)[21:]))
    return bytes(data)


def test_producer_state_is_snapshotted_on_roll_and_close_and_read_back_from_the_newest(
    tmp_path: Path,
) -> None:
    """A retry after a restart is still answered with its first offsets, from the snapshot
    and the headers after it; a truncation below a snapshot deletes it; a damaged one is
    passed over for the log's headers."""
    log = open_log(tmp_path, internal_segment_bytes=1)  # every batch rolls a segment
    assert log.append_as_leader(idempotent_batch(11, 0, b"a", b"b"), leader_epoch=0) == (0, 1)
    assert log.append_as_leader(idempotent_batch(11, 2, b"c"), leader_epoch=0) == (2, 2)
    assert log.append_as_leader(idempotent_batch(12, 0, b"d"), leader_epoch=0) == (3, 3)
    log.close()
    directory = tmp_path / "orders-0"
    snapshots = sorted(p.name for p in directory.glob("*.snapshot"))
    assert snapshots == ["00000000000000000003.snapshot", "00000000000000000004.snapshot"], "two kept"
    reopened = open_log(tmp_path, internal_segment_bytes=1)
    assert reopened.append_as_leader(idempotent_batch(11, 2, b"c"), leader_epoch=0) == (2, 2), "a retry"
    assert reopened.log_end_offset == 4
    reopened.truncate_to(3)
    assert sorted(p.name for p in directory.glob("*.snapshot")) == ["00000000000000000003.snapshot"]
    (directory / "00000000000000000003.snapshot").write_bytes(b"\x00\x01garbage")
    reread = open_log(tmp_path, internal_segment_bytes=1)
    assert reread.append_as_leader(idempotent_batch(11, 2, b"c"), leader_epoch=0) == (2, 2), (
        "read from the headers when the snapshot is damaged"
    )


def batch_of_times(*stamps: int) -> bytes:
    """One batch whose records carry these timestamps (kafka-python's builder: CreateTime)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, stamp in enumerate(stamps):
        builder.append(i, timestamp=stamp, key=None, value=f"r{i}".encode(), headers=[])
    return bytes(builder.build())


def test_by_time_the_first_record_at_or_after_it_and_the_largest_timestamps_first_record(
    tmp_path: Path,
) -> None:
    """ListOffsets by time answers a record, not the batch holding it (Kafka's rule); MAX_TIMESTAMP
    (KIP-734) the first record with the log's largest timestamp, inside its batch."""
    log = open_log(tmp_path)
    log.append_as_leader(batch_of_times(100, 400, 200), leader_epoch=3)  # offsets 0-2
    log.append_as_leader(batch_of_times(300, 400, 500, 450), leader_epoch=3)  # offsets 3-6
    assert log.offset_for_timestamp(150) == (1, 400, 3), "record 1 (400), not the batch's first (100)"
    assert log.offset_for_timestamp(201) == (1, 400, 3)
    assert log.offset_for_timestamp(401) == (5, 500, 3)
    assert log.offset_for_timestamp(501) is None
    assert log.offset_for_max_timestamp() == (5, 500, 3)
    log.advance_log_start_offset(2)
    assert log.offset_for_timestamp(150) == (2, 200, 3), "never below the log start"


def test_snapshots_past_the_recovered_end_or_below_the_start_are_not_read(tmp_path: Path) -> None:
    log = open_log(tmp_path, internal_segment_bytes=1)
    log.append_as_leader(idempotent_batch(11, 0, b"a"), leader_epoch=0)
    log.append_as_leader(idempotent_batch(11, 1, b"b"), leader_epoch=0)  # a snapshot at 1
    log.append_as_leader(idempotent_batch(11, 2, b"c"), leader_epoch=0)  # and at 2
    log.close()
    directory = tmp_path / "orders-0"
    (directory / "00000000000000000009.snapshot").write_bytes(
        (directory / "00000000000000000003.snapshot").read_bytes()
    )
    reopened = open_log(tmp_path, internal_segment_bytes=1)
    assert not (directory / "00000000000000000009.snapshot").exists(), "past the log end: deleted at load"
    reopened.advance_log_start_offset(3)
    assert [offset for offset, _ in reopened._snapshots()] == [2, 3]
    assert reopened._newest_producer_snapshot()[1] == 3
    (directory / "00000000000000000003.snapshot").unlink()
    assert reopened._newest_producer_snapshot()[1] == 0, "the one below the log start is passed over"
