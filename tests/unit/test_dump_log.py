"""`keel dump-log`'s reading and lines, on batches built in memory: Kafka's words for each
batch and record, compressed batches read through, and damage printed where it lies."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from node.cli.dump_log_commands import DumpOptions, LogDump, checked_files, dump_index, dump_log
from node.command.entry import UsageError
from wire import compression, records

TS = 1_700_000_000_000
PRINT = DumpOptions(print_data_log=True)


def dumped(data: bytes, options: DumpOptions = PRINT) -> tuple[list[str], LogDump]:
    lines: list[str] = []
    found = dump_log(
        "/d/00000000000000000000.log", lambda p, n: data[p : p + n], len(data), options, lines.append
    )
    return lines, found


def test_a_batch_and_its_records_print_in_kafkas_words() -> None:
    batch = records.build_batch([(b"k1", b"v1"), (None, b"v2")], timestamp=TS, base_offset=10)
    header = records.validate(batch)
    lines, found = dumped(batch)
    assert lines == [
        f"baseOffset: 10 lastOffset: 11 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1"
        f" producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false isControl: false"
        f" deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {TS} size: {len(batch)} magic: 2"
        f" compresscodec: none crc: {header.crc} isvalid: true",
        f"| offset: 10 CreateTime: {TS} keySize: 2 valueSize: 2 sequence: -1 headerKeys: []"
        " key: k1 payload: v1",
        f"| offset: 11 CreateTime: {TS} keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: v2",
    ]
    assert found.problems == [] and found.non_consecutive == []


def test_shallow_iteration_prints_batches_only_and_deep_iteration_no_payloads() -> None:
    data = records.build_batch([(b"a", b"b")], timestamp=TS) + records.build_batch(
        [(b"c", b"d")], timestamp=TS, base_offset=1
    )
    shallow, _ = dumped(data, DumpOptions())
    assert [line.split(" position: ")[1].split()[0] for line in shallow] == ["0", str(len(data) // 2)]
    deep, _ = dumped(data, DumpOptions(deep_iteration=True))
    assert deep[1] == f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: -1 headerKeys: []"


@pytest.mark.parametrize("codec", sorted(compression.NAMES.keys() - {compression.NONE}))
def test_compressed_batches_are_read_through(codec: int) -> None:
    batch = records.build_batch([(b"k", b"x" * 300), (b"k2", b"y")], timestamp=TS, compression_codec=codec)
    lines, found = dumped(batch)
    assert f"compresscodec: {compression.NAMES[codec]} " in lines[0] and lines[0].endswith("isvalid: true")
    assert lines[1].endswith(
        f"keySize: 1 valueSize: 300 sequence: -1 headerKeys: [] key: k payload: {'x' * 300}"
    )
    assert lines[2].endswith("key: k2 payload: y")
    assert not found.problems


def test_an_idempotent_batch_shows_its_producer_sequences_and_headers() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=3,
        base_sequence=2**31 - 1,  # the next sequence wraps to 0
        batch_size=1 << 16,
    )
    builder.append(0, timestamp=TS, key=None, value=b"a", headers=[("h1", b"x"), ("h2", None)])
    builder.append(1, timestamp=TS + 5, key=None, value=None, headers=[])
    lines, _ = dumped(bytes(builder.build()))
    assert "baseSequence: 2147483647 lastSequence: 0 producerId: 7 producerEpoch: 3 " in lines[0]
    assert f" CreateTime: {TS + 5} " in lines[0]
    assert lines[1] == (
        f"| offset: 0 CreateTime: {TS} keySize: -1 valueSize: 1 sequence: 2147483647"
        " headerKeys: [h1,h2] payload: a"
    )
    assert (
        lines[2] == f"| offset: 1 CreateTime: {TS + 5} keySize: -1 valueSize: -1 sequence: 0 headerKeys: []"
    )


def test_a_batch_that_fails_its_crc_is_shown_invalid_and_counted() -> None:
    good = records.build_batch([(None, b"a")], timestamp=TS)
    bad = bytearray(records.build_batch([(None, b"b")], timestamp=TS, base_offset=1))
    bad[-2] ^= 0x01  # the value b becomes c (the last byte is the header count): the records read
    lines, found = dumped(good + bytes(bad))
    assert lines[0].endswith("isvalid: true") and lines[2].endswith("isvalid: false")
    assert f"position: {len(good)} " in lines[2]
    assert lines[3].endswith("payload: c")
    assert found.problems == [f"the batch at position {len(good)} fails its CRC"]


def test_a_torn_tail_is_reported_as_kafka_does_unless_max_bytes_cut_it() -> None:
    batch = records.build_batch([(None, b"a")], timestamp=TS)
    torn = batch + batch[:30]
    lines, found = dumped(torn)
    assert lines[-1] == "Found 30 invalid bytes at the end of 00000000000000000000.log"
    assert found.problems == [lines[-1]]
    limited, found = dumped(torn, DumpOptions(max_bytes=len(batch) + 10))
    assert len(limited) == 1 and not found.problems


def test_a_batch_length_too_small_to_read_past_stops_the_dump() -> None:
    batch = records.build_batch([(None, b"a")], timestamp=TS)
    broken = bytearray(batch * 2)
    struct.pack_into(">i", broken, len(batch) + 8, 3)
    lines, found = dumped(bytes(broken))
    assert lines[-1] == (
        "Found record size 3 smaller than minimum record overhead (14) in file /d/00000000000000000000.log."
    )
    assert len(lines) == 3 and found.problems == [lines[-1]]


def test_records_that_do_not_decompress_are_reported_at_their_batch() -> None:
    batch = bytearray(
        records.build_batch([(None, b"z" * 100)], timestamp=TS, compression_codec=compression.GZIP)
    )
    batch[records.HEADER_SIZE + 12 :] = b"\xff" * (len(batch) - records.HEADER_SIZE - 12)
    header = records.read_header(batch)
    struct.pack_into(">I", batch, 17, records.computed_crc(batch, 0, header))  # a valid CRC over bad bytes
    lines, found = dumped(bytes(batch))
    assert lines[0].endswith(f"compresscodec: gzip crc: {records.read_header(batch).crc} isvalid: true")
    assert lines[1].startswith(
        "Found invalid records in the batch at position 0 in file /d/00000000000000000000.log: "
    )
    assert found.problems == [lines[1]]


def test_an_unreadable_header_is_reported_and_the_next_batch_still_read() -> None:
    batch = records.build_batch([(None, b"a")], timestamp=TS)
    broken = bytearray(batch)
    broken[16] = 1  # magic 1
    lines, found = dumped(bytes(broken) + records.build_batch([(None, b"b")], timestamp=TS, base_offset=1))
    assert lines[0] == (
        "Found an unreadable batch at position 0 in file /d/00000000000000000000.log: "
        "magic 1: Keel reads only v2 batches (magic 2)"
    )
    assert lines[1].startswith("baseOffset: 1 ") and lines[2].endswith("payload: b")
    assert found.problems == [lines[0]]


def test_index_entries_are_checked_against_the_batches_they_name() -> None:
    first = records.build_batch([(None, b"a"), (None, b"b")], timestamp=TS, base_offset=100)
    log = first + records.build_batch([(None, b"c")], timestamp=TS, base_offset=102)
    index = struct.pack(">II", 0, 0) + struct.pack(">II", 2, len(first)) + struct.pack(">II", 1, len(first))
    lines: list[str] = []
    problems = dump_index(
        "x.index", index, 100, lines.append, log=lambda p, n: log[p : p + n], log_size=len(log)
    )
    assert lines == [
        "offset: 100 position: 0",
        f"offset: 102 position: {len(first)}",
        f"offset: 101 position: {len(first)}",
    ]
    assert problems == ["1 index entries do not match the log"]
    empty: list[str] = []
    assert dump_index("y.index", b"", 0, empty.append) == [] and empty == ["y.index is empty."]


def test_only_existing_log_and_index_files_are_taken(tmp_path: pytest.TempPathFactory) -> None:
    log = tmp_path / "00000000000000000000.log"  # type: ignore[operator]
    log.write_bytes(b"")
    assert checked_files(f" {log} ") == [log]
    for text, phrase in (
        (str(log.with_suffix(".timeindex")), "Keel keeps no time index"),
        (str(log.with_name("00000000000000000001.log")), "no such file"),
        (f"{log},{log.with_name('x.txt')}", "not a segment file"),
        (",", "names no file"),
    ):
        with pytest.raises(UsageError, match=phrase):
            checked_files(text)
