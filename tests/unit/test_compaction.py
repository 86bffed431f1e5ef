"""Log compaction on real files: what the cleaner keeps of each batch (node/broker/log/
compaction.py), when a log is worth cleaning, the swap into a live log, a partition that fails
to clean, and what a crash in the middle of a clean leaves for the next load."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.base.ports import TopicPartition
from node.broker.log import compaction
from node.broker.log.cleaner import LogCleaner, dirty_ratio, plan_clean, wants_cleaning
from node.broker.log.config import LogConfig
from node.broker.log.log import Log
from node.broker.log.manager import LogManager
from node.broker.log.producer_state import ProducerState
from node.metrics.names import MBean
from tests.unit.test_replication import TP as REPLICATED_TP
from tests.unit.test_replication import Brokers, produce
from wire import compression, records
from wire.errors import CorruptMessage, InvalidRecord

TP = TopicPartition("prices", 0)
DAY_MS = 86_400_000
NOW_MS = 1_700_000_000_000


def keyed(*pairs: tuple[bytes | None, bytes | None], timestamp: int = NOW_MS, codec: int = 0) -> bytes:
    return records.build_batch(pairs, timestamp=timestamp, compression_codec=codec)


def open_log(path: Path, **config: object) -> Log:
    # Every batch in a segment of its own (each append over 1 byte rolls), unless told.
    settings: dict[str, object] = {"cleanup_policy": "compact", "internal_segment_bytes": 1, **config}
    return Log(path / "prices-0", TP, LogConfig(**settings))  # type: ignore[arg-type]


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records.records(log.read(log.log_start_offset, 1 << 30))]


def clean(log: Log, now_ms: int = NOW_MS, high_watermark: int | None = None) -> compaction.CleanResult:
    """One clean of `log`, run here rather than on a thread, and swapped in."""
    plan = plan_clean(log, log.log_end_offset if high_watermark is None else high_watermark, now_ms)
    assert plan is not None, "nothing to clean"
    result = compaction.clean(plan)
    for group in result.groups:
        assert log.replace_segments(group)
    log.clean_offset = plan.dirty_to
    return result


def test_only_the_latest_value_of_each_key_stays_and_offsets_are_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(keyed((b"a", b"1"), (b"b", b"1")), leader_epoch=0)  # 0, 1
    log.append_as_leader(keyed((b"a", b"2")), leader_epoch=0)  # 2
    log.append_as_leader(keyed((b"b", b"2"), (b"c", b"1")), leader_epoch=0)  # 3, 4
    log.append_as_leader(keyed((b"a", b"3")), leader_epoch=0)  # 5, active segment
    clean(log)
    # b=1 and a=1 went; a=2 stays: the active segment's a=3 is not in the cleaned part.
    assert contents(log) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", b"1"), (5, b"a", b"3")]
    assert log.log_start_offset == 0 and log.log_end_offset == 6
    # The first batch lost both records and went; the others kept their offsets.
    bases = [h.base_offset for _, h in records.batches(log.read(0, 1 << 30))]
    assert bases == [2, 3, 5]
    assert log.read(0, 1 << 30) == log.read(1, 1 << 30)  # an offset in a gap reads what follows


def test_the_active_segment_is_never_touched(tmp_path: Path) -> None:
    log = open_log(tmp_path, internal_segment_bytes=1 << 20)  # one segment: the active one
    for i in range(5):
        log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    before = log.read(0, 1 << 30)
    assert plan_clean(log, log.log_end_offset, NOW_MS) is None
    assert wants_cleaning(log, log.log_end_offset, NOW_MS) is None
    assert log.read(0, 1 << 30) == before


def test_nothing_at_or_above_the_high_watermark_is_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(4):
        log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    clean(log, high_watermark=2)  # only the segment of offset 0 lies wholly below 2 with its successor
    assert [offset for offset, _, _ in contents(log)] == [1, 2, 3]


def test_a_batch_that_loses_some_records_keeps_its_last_offset_and_a_valid_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(keyed((b"a", b"1"), (b"b", b"1"), (b"c", b"1")), leader_epoch=7)  # 0..2
    log.append_as_leader(keyed((b"c", b"2")), leader_epoch=7)  # 3
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=7)  # active
    clean(log)
    ((_, header), *_) = records.batches(log.read(0, 1 << 30))  # CRC-checked
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 2, 2)
    assert header.partition_leader_epoch == 7
    assert contents(log)[:3] == [(0, b"a", b"1"), (1, b"b", b"1"), (3, b"c", b"2")]


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_a_compressed_batch_is_recompressed_with_its_codec(tmp_path: Path, codec: int) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(keyed((b"a", b"1" * 50), (b"b", b"1" * 50), codec=codec), leader_epoch=0)
    log.append_as_leader(keyed((b"a", b"2")), leader_epoch=0)
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=0)
    clean(log)
    ((_, header), *_) = records.batches(log.read(0, 1 << 30))
    assert header.attributes & records.COMPRESSION_MASK == codec
    assert header.records_count == 1 and header.last_offset_delta == 1
    assert contents(log) == [(1, b"b", b"1" * 50), (2, b"a", b"2"), (3, b"z", b"1")]


def test_tombstones_stay_until_delete_retention_ms_after_their_first_clean(tmp_path: Path) -> None:
    log = open_log(tmp_path, delete_retention_ms=DAY_MS)
    log.append_as_leader(keyed((b"a", b"1"), (b"b", b"1")), leader_epoch=0)
    log.append_as_leader(keyed((b"a", None)), leader_epoch=0)  # a tombstone at offset 2
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=0)  # active
    result = clean(log, now_ms=NOW_MS)
    assert contents(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"1")]
    assert result.next_horizon_ms == NOW_MS + DAY_MS
    log.next_delete_horizon_ms = result.next_horizon_ms
    # Nothing new is dirty, but the horizon makes the log due once it passes, not before.
    assert wants_cleaning(log, log.log_end_offset, NOW_MS + DAY_MS - 1) is None
    assert wants_cleaning(log, log.log_end_offset, NOW_MS + DAY_MS) is not None
    clean(log, now_ms=NOW_MS + DAY_MS - 1)
    assert (2, b"a", None) in contents(log)
    clean(log, now_ms=NOW_MS + DAY_MS)
    assert contents(log) == [(1, b"b", b"1"), (3, b"z", b"1")]


def test_a_rebased_tombstone_batch_keeps_its_records_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(keyed((b"a", b"1"), (b"b", None), timestamp=NOW_MS - 5), leader_epoch=0)
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=0)
    clean(log)
    ((_, header), *_) = records.batches(log.read(0, 1 << 30))
    assert header.attributes & records.DELETE_HORIZON_BIT
    assert header.base_timestamp == NOW_MS + DAY_MS
    assert [r.timestamp for r in records.records(log.read(0, 1 << 30))][:2] == [NOW_MS - 5, NOW_MS - 5]


def test_an_idempotent_producers_last_batch_stays_empty_and_its_state_survives(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    producer = bytearray(keyed((b"a", b"1"), (b"b", b"1")))
    # producer id 42, epoch 0, base sequence 0 (fields after the CRC: the CRC is redone)
    tail = records.build_raw_batch(
        records.read_header(producer)._replace(producer_id=42, producer_epoch=0, base_sequence=0),
        attributes=0,
        base_timestamp=NOW_MS,
        max_timestamp=NOW_MS,
        records_count=2,
        section=bytes(producer[records.HEADER_SIZE :]),
    )
    log.append_as_leader(tail, leader_epoch=0)  # 0, 1
    log.append_as_leader(keyed((b"a", b"2"), (b"b", b"2")), leader_epoch=0)  # 2, 3
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=0)  # active
    clean(log)
    (_, header), *_ = records.batches(log.read(0, 1 << 30))
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 1, 0)
    assert header.producer_id == 42
    assert [offset for offset, _, _ in contents(log)] == [2, 3, 4]
    rebuilt = ProducerState()
    rebuilt.appended(h for _, h in records.batches(log.read(0, 1 << 30)))
    assert rebuilt.last_offsets() == [1]
    # Reopened, the log reads the same state from its headers: the retry is still known.
    reopened = Log(log.directory, TP, log.config)
    assert reopened.producer_state().check(records.read_header(tail)._replace(base_offset=0)) == (0, 1)


def test_records_without_a_key_are_refused_in_a_compacted_topic(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecord, match="no key"):
        log.append_as_leader(keyed((b"a", b"1"), (None, b"1")), leader_epoch=0)
    plain = open_log(tmp_path / "plain", cleanup_policy="delete")
    assert plain.append_as_leader(keyed((None, b"1")), leader_epoch=0) == (0, 0)


def test_a_follower_copies_a_compacted_log_with_its_gaps(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    for i in range(4):
        leader.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    clean(leader)
    follower = open_log(tmp_path / "follower", internal_segment_bytes=1 << 20)
    follower.append_as_follower(leader.read(0, 1 << 30))
    assert follower.log_end_offset == leader.log_end_offset == 4
    assert contents(follower) == contents(leader) == [(2, b"k", b"2"), (3, b"k", b"3")]


def test_the_dirty_ratio_decides_when_a_log_is_worth_cleaning(tmp_path: Path) -> None:
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    for i in range(4):
        log.append_as_leader(keyed((str(i).encode(), b"v" * 100)), leader_epoch=0)  # 4 distinct keys
    assert dirty_ratio(log, log.log_end_offset, NOW_MS)[0] == 1.0
    clean(log)
    assert dirty_ratio(log, log.log_end_offset, NOW_MS)[0] == 0.0
    assert wants_cleaning(log, log.log_end_offset, NOW_MS) is None
    # One new closed segment of the same size over four clean ones: 1/4, below 0.5.
    log.append_as_leader(keyed((b"x", b"v" * 100)), leader_epoch=0)
    ratio = dirty_ratio(log, log.log_end_offset, NOW_MS)[0]
    assert 0 < ratio < 0.5
    assert wants_cleaning(log, log.log_end_offset, NOW_MS) is None
    for key in (b"y", b"w", b"u"):
        log.append_as_leader(keyed((key, b"v" * 100)), leader_epoch=0)
    assert wants_cleaning(log, log.log_end_offset, NOW_MS) is not None
    log.config = LogConfig(cleanup_policy="delete", internal_segment_bytes=1)
    assert wants_cleaning(log, log.log_end_offset, NOW_MS) is None  # not compacted


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path, min_compaction_lag_ms=60_000)
    log.append_as_leader(keyed((b"k", b"old"), timestamp=NOW_MS - 120_000), leader_epoch=0)
    log.append_as_leader(keyed((b"k", b"new"), timestamp=NOW_MS), leader_epoch=0)
    log.append_as_leader(keyed((b"z", b"1")), leader_epoch=0)
    assert [s.base_offset for s in log.cleanable_segments(log.log_end_offset, NOW_MS)] == [0]


def test_retention_deletes_nothing_under_compact_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1)
    for i in range(3):
        log.append_as_leader(keyed((b"k", str(i).encode()), timestamp=1), leader_epoch=0)
    assert log.delete_old_segments(NOW_MS, log.log_end_offset) == 0
    log.config = LogConfig(cleanup_policy="compact,delete", retention_ms=1, internal_segment_bytes=1)
    assert log.delete_old_segments(NOW_MS, log.log_end_offset) == 2


def test_a_clean_overtaken_by_retention_is_discarded(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="compact,delete", retention_ms=1)
    for i in range(3):
        log.append_as_leader(keyed((b"k", str(i).encode()), timestamp=1), leader_epoch=0)
    plan = plan_clean(log, log.log_end_offset, NOW_MS)
    assert plan is not None
    result = compaction.clean(plan)
    log.delete_old_segments(NOW_MS, log.log_end_offset)
    first = result.groups[0]
    assert not log.replace_segments(first)
    assert not first.log_path.exists() and not first.index_path.exists()
    assert contents(log) == [(2, b"k", b"2")]


def _crash_after(log: Log, step: Callable[[Path, Path], None]) -> None:
    """A clean written, then `step` of its swap done by hand, then the process gone. The
    segments were written small: with a larger segment size they are cleaned into one."""
    log.config = dataclasses.replace(log.config, internal_segment_bytes=1 << 20)
    plan = plan_clean(log, log.log_end_offset, NOW_MS)
    assert plan is not None
    (group,) = compaction.clean(plan).groups
    step(group.log_path, group.index_path)
    log.close()


def test_a_crash_before_the_swap_leaves_cleaned_files_that_loading_deletes(tmp_path: Path) -> None:
    log = open_log(tmp_path, internal_segment_bytes=200)
    for i in range(6):
        log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    before = contents(log)
    _crash_after(log, lambda _log, _index: None)
    assert list(log.directory.glob("*.cleaned"))
    reopened = Log(log.directory, TP, log.config)
    assert not list(log.directory.glob("*.cleaned"))
    assert contents(reopened) == before


def test_a_crash_in_the_middle_of_the_swap_is_finished_by_loading(tmp_path: Path) -> None:
    log = open_log(tmp_path, internal_segment_bytes=200)
    for i in range(6):
        log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    sources = [s.path for s in log.cleanable_segments(log.log_end_offset, NOW_MS)]
    assert len(sources) >= 2

    def renamed_then_one_source_deleted(cleaned_log: Path, cleaned_index: Path) -> None:
        cleaned_index.rename(cleaned_index.with_name(cleaned_index.name.replace(".cleaned", ".swap")))
        cleaned_log.rename(cleaned_log.with_name(cleaned_log.name.replace(".cleaned", ".swap")))
        sources[1].unlink()  # the crash came while the old segments were being deleted

    _crash_after(log, renamed_then_one_source_deleted)
    reopened = Log(log.directory, TP, log.config)
    assert not list(log.directory.glob("*.swap"))
    # The cleaned segment holds offset 3, the latest of the two it replaced; 4 and 5 are the
    # active segment's.
    assert [offset for offset, _, _ in contents(reopened)] == [3, 4, 5]
    assert reopened.log_end_offset == 6


async def test_a_partition_that_fails_is_marked_uncleanable_and_the_others_are_cleaned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager([tmp_path], LogConfig(internal_segment_bytes=1))
    manager.load()
    configs = {"cleanup.policy": "compact"}
    good, bad = TopicPartition("good", 0), TopicPartition("bad", 0)
    for tp in (good, bad):
        partition_log = manager.get_or_create(tp, configs)
        for i in range(4):
            partition_log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    await manager.checkpoint_high_watermarks({good: 4, bad: 4})
    damaged = manager.get(bad)
    assert damaged is not None
    first = damaged.segments[0].path
    raw = bytearray(first.read_bytes())
    raw[-1] ^= 0xFF  # the first batch's last byte: its CRC fails
    first.write_bytes(raw)
    cleaner = LogCleaner(manager, wall_ms=lambda: NOW_MS)
    with caplog.at_level(logging.ERROR, logger="node.broker.log.cleaner"):
        assert await cleaner.clean_due() == 1
    assert cleaner.uncleanable == {bad}
    assert [r.message for r in caplog.records if "uncleanable" in r.message] == [caplog.records[0].message]
    good_log = manager.get(good)
    assert good_log is not None and contents(good_log) == [(2, b"k", b"2"), (3, b"k", b"3")]
    assert not list(damaged.directory.glob("*.cleaned"))
    assert await cleaner.clean_due() == 0  # not tried again
    gauges = cleaner.gauges()
    assert gauges[("LogCleanerManager", "uncleanable-partitions-count")] == 1
    assert gauges[("LogCleaner", "max-clean-time-secs")] > 0
    # Kafka's hyphenated names, as Prometheus names (the JMX exporter's underscores).
    bean = MBean("kafka.log", "LogCleaner", "max-clean-time-secs")
    assert bean.gauge_name == "kafka_log_logcleaner_max_clean_time_secs"
    await manager.close()


async def test_a_config_change_reaches_an_existing_log(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    partition_log = manager.get_or_create(TP, {})
    assert not partition_log.config.compact
    manager.get_or_create(TP, {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1"})
    assert partition_log.config.compact and partition_log.config.delete
    assert partition_log.config.min_cleanable_dirty_ratio == 0.1
    await manager.close()


def test_record_spans_read_what_the_consumer_reads_long_fields_included() -> None:
    pairs = [(b"k" * 300, b"v" * 20_000), (None, b"x"), (b"t", None), (b"", b"")]
    batch = keyed(*pairs)
    header = records.read_header(batch)
    body = records.record_bytes(batch, 0, header, 1 << 20)
    spans = list(records.record_spans(body, header.records_count))
    assert [(s.key, s.has_value, s.offset_delta) for s in spans] == [
        (key, value is not None, delta) for delta, (key, value) in enumerate(pairs)
    ]
    assert b"".join(body[s.start : s.end] for s in spans) == body
    with pytest.raises(CorruptMessage):
        list(records.record_spans(body[:-1], header.records_count))


def test_a_topic_config_change_reaches_the_replicas_existing_logs(tmp_path: Path) -> None:
    """Kafka's TopicConfigHandler: a changed cleanup.policy applies to the logs a broker has,
    without a restart (the dynamic-config handler hands it to the replica manager)."""
    brokers = Brokers(tmp_path)
    brokers.lead(1, 0, [1, 2])
    leader = brokers[1]
    leader.leader_path.append_records(produce([b"v"], acks=1))
    partition_log = leader.state.partitions[REPLICATED_TP].log
    assert partition_log is not None and not partition_log.config.compact
    leader.set_throttles(None, {"t": {"cleanup.policy": "compact", "delete.retention.ms": "5"}})
    assert partition_log.config.compact and not partition_log.config.delete
    assert partition_log.config.delete_retention_ms == 5
    leader.set_throttles(None, {"t": {}})  # the override removed: the broker's default again
    assert not partition_log.config.compact


def test_retention_removes_a_segment_compaction_emptied(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="compact,delete")
    for i in range(3):
        log.append_as_leader(keyed((b"k", str(i).encode())), leader_epoch=0)
    clean(log)
    assert log.segments[0].size == 0  # every record of offset 0's segment went
    assert log.delete_old_segments(NOW_MS, log.log_end_offset) == 1  # nothing else is old
    assert log.log_start_offset == 1 and contents(log) == [(1, b"k", b"1"), (2, b"k", b"2")]
