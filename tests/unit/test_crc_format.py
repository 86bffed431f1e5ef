"""A log directory written with zlib's CRC-32 is converted once to Kafka's CRC-32C, before
its logs load: every batch readable after, nothing else in the files changed."""

from __future__ import annotations

import zlib
from pathlib import Path

from actors.base.ports import TopicPartition
from node.broker.log.config import LogConfig
from node.broker.log.crc_format import FORMAT_FILE, ensure_crc32c
from node.broker.log.manager import LogManager
from wire import records


def legacy(batch: bytes) -> bytes:
    """`batch` as Keel wrote it before CRC-32C: zlib's CRC-32 in the CRC field."""
    out = bytearray(batch)
    out[17:21] = zlib.crc32(out[21:]).to_bytes(4, "big")
    return bytes(out)


def legacy_log(directory: Path, values: list[bytes]) -> Path:
    """A partition directory whose one segment holds a batch per value, with the old CRC."""
    partition = directory / "orders-0"
    partition.mkdir(parents=True)
    data = bytearray()
    for offset, value in enumerate(values):
        batch = bytearray(records.build_batch([(None, value)], timestamp=1, base_offset=0))
        records.stamp(batch, 0, base_offset=offset, leader_epoch=0)
        data += legacy(bytes(batch))
    segment = partition / f"{0:020d}.log"
    segment.write_bytes(bytes(data))
    return segment


def test_a_legacy_directory_is_converted_and_its_log_reads_every_record(tmp_path: Path) -> None:
    segment = legacy_log(tmp_path, [b"a", b"b", b"c"])
    before = segment.read_bytes()
    manager = LogManager([tmp_path], LogConfig())
    manager.load()
    log = manager.get(TopicPartition("orders", 0))
    assert log is not None and log.log_end_offset == 3
    assert [r.value for r in records.records(log.read(0, 1 << 20))] == [b"a", b"b", b"c"]
    after = segment.read_bytes()
    assert len(after) == len(before)
    # Only the CRC fields changed (bytes 17-20 of each batch; the three are the same size).
    size = records.read_header(before).size
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert changed and all(i % size in range(17, 21) for i in changed)
    assert (tmp_path / FORMAT_FILE).read_text() == "crc32c\n"
    assert ensure_crc32c(tmp_path) == 0  # once marked, never scanned again


def test_a_converted_or_damaged_batch_and_a_torn_tail_are_left_alone(tmp_path: Path) -> None:
    segment = legacy_log(tmp_path, [b"a", b"b"])
    data = bytearray(segment.read_bytes())
    size = len(data) // 2
    records.convert_legacy_crc(data, 0)  # the first batch converted before a crash
    data[size + 30] ^= 0xFF  # the second damaged: its CRC is neither
    damaged = bytes(data)
    segment.write_bytes(damaged + damaged[:10])  # and a torn tail
    assert ensure_crc32c(tmp_path) == 0
    assert segment.read_bytes() == damaged + damaged[:10]


def test_a_new_directory_is_marked_without_a_scan(tmp_path: Path) -> None:
    assert ensure_crc32c(tmp_path) == 0
    assert (tmp_path / FORMAT_FILE).exists()
