"""Compressed batches as Kafka's clients write them: the leader checks their records and keeps
them as they are, consumers read them back, and a batch that would expand without end is
refused at the bound, not after it."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from node.broker.log.validator import MAX_DECOMPRESSED_BYTES, validate_as_leader
from wire import compression, records
from wire.errors import CorruptMessage, InvalidRecord, UnsupportedCompressionType


def kafka_python_batch(codec: int, values: list[bytes]) -> bytes:
    """A batch as kafka-python's producer writes it with `codec` (an independent writer)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700 + offset, key=b"k", value=value, headers=[])
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_each_codec_of_kafka_python_is_checked_and_read_back(codec: int) -> None:
    values = [b"value-%d " % i * 20 for i in range(50)]
    batch = kafka_python_batch(codec, values)
    assert records.read_header(batch).attributes & records.COMPRESSION_MASK == codec
    assert len(batch) < sum(map(len, values)), "it really is compressed"
    [(_, header)] = validate_as_leader(batch, 1 << 20)
    assert header.records_count == 50
    assert [r.value for r in records.records(batch)] == values


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_what_keel_compresses_kafka_python_reads(codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    data = b"x" * 100_000
    assert compression.decompress(codec, compression.compress(codec, data), len(data)) == data
    plain = records.build_batch([(None, b"abc" * 10)], timestamp=5)
    body = compression.compress(codec, plain[records.HEADER_SIZE :])
    batch = bytearray(plain[: records.HEADER_SIZE] + body)
    batch[8:12] = (len(batch) - records.LOG_OVERHEAD).to_bytes(4, "big")
    batch[21:23] = codec.to_bytes(2, "big")
    batch[17:21] = records.checksum(batch[21:]).to_bytes(4, "big")
    assert [r.value for r in DefaultRecordBatch(bytes(batch))] == [b"abc" * 10]


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_a_decompression_bomb_is_refused_at_the_bound(codec: int) -> None:
    bomb = compression.compress(codec, b"\x00" * (MAX_DECOMPRESSED_BYTES + 1))
    assert len(bomb) < MAX_DECOMPRESSED_BYTES // 20  # snappy expands about 21x at most
    with pytest.raises(CorruptMessage, match="more than"):
        compression.decompress(codec, bomb, MAX_DECOMPRESSED_BYTES)


def test_bad_compressed_bytes_and_unknown_codecs_are_refused() -> None:
    batch = bytearray(kafka_python_batch(compression.GZIP, [b"a" * 100]))
    batch[-5] ^= 0xFF
    batch[17:21] = records.checksum(batch[21:]).to_bytes(4, "big")  # a right CRC over bad gzip
    with pytest.raises((CorruptMessage, InvalidRecord)):
        validate_as_leader(bytes(batch), 1 << 20)
    with pytest.raises(UnsupportedCompressionType):
        compression.decompress(5, b"anything", 100)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_keels_producer_batches_compress_and_kafka_python_reads_them(codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    items = [(b"k%d" % i, b"value " * 50) for i in range(20)]
    batch = records.build_batch(items, timestamp=9, compression_codec=codec)
    assert len(batch) < records.batch_size(items) // 2
    [(_, header)] = validate_as_leader(batch, 1 << 20)
    assert header.attributes & records.COMPRESSION_MASK == codec
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc() and [(r.key, r.value) for r in theirs] == items
    assert [(r.key, r.value) for r in records.records(batch)] == items
