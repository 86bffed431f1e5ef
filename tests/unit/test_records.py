"""Record batches: what producers build, the broker checks and stamps, and consumers read."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire import records
from wire.errors import CorruptMessage


def test_a_batch_round_trips_its_records_keys_and_values() -> None:
    batch = records.build_batch([(b"k", b"v1"), (None, b"v2"), (b"", None)], timestamp=1_700)
    header = records.validate(batch)
    assert (header.records_count, header.last_offset_delta, header.size) == (3, 2, len(batch))
    assert list(records.records(batch)) == [
        records.Record(0, 1_700, b"k", b"v1"),
        records.Record(1, 1_700, None, b"v2"),
        records.Record(2, 1_700, b"", None),
    ]


def test_stamping_an_offset_and_leader_epoch_keeps_the_crc_valid() -> None:
    batch = bytearray(records.build_batch([(None, b"a"), (None, b"b")], timestamp=5))
    records.stamp(batch, 0, base_offset=41, leader_epoch=7)
    header = records.validate(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.last_offset) == (41, 7, 42)
    assert [r.offset for r in records.records(batch)] == [41, 42]


def test_several_batches_in_one_buffer_are_read_in_order() -> None:
    first = bytearray(records.build_batch([(None, b"a")], timestamp=1))
    second = bytearray(records.build_batch([(None, b"b"), (None, b"c")], timestamp=2))
    records.stamp(second, 0, 1, 0)
    buffer = bytes(first + second)
    assert [h.base_offset for _, h in records.batches(buffer)] == [0, 1]
    assert [r.value for r in records.records(buffer)] == [b"a", b"b", b"c"]


def test_a_flipped_record_byte_fails_the_crc() -> None:
    batch = bytearray(records.build_batch([(None, b"payload")], timestamp=1))
    batch[-3] ^= 0xFF
    with pytest.raises(CorruptMessage, match="CRC"):
        records.validate(batch)


def test_a_cut_short_batch_is_corrupt() -> None:
    batch = records.build_batch([(None, b"payload")], timestamp=1)
    with pytest.raises(CorruptMessage):
        records.validate(batch[:-1])
    with pytest.raises(CorruptMessage):
        records.validate(batch[:20])


def test_an_empty_batch_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        records.build_batch([], timestamp=1)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_corrupt_message(data: bytes) -> None:
    with contextlib.suppress(CorruptMessage):
        list(records.records(data))


@given(
    st.lists(st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=50)), min_size=1)
)
def test_any_records_round_trip(items: list[tuple[bytes | None, bytes | None]]) -> None:
    batch = records.build_batch(items, timestamp=123)
    assert [(r.key, r.value) for r in records.records(batch)] == items


def test_a_batch_carries_kafkas_crc_32c_as_kafka_python_checks_it() -> None:
    """An independent implementation on both sides: kafka-python's consumer checks the CRC of
    what Keel builds, and Keel reads what kafka-python's producer builds."""
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    built = records.build_batch([(b"k", b"v")], timestamp=5)
    theirs = DefaultRecordBatch(built)
    assert theirs.validate_crc()
    assert [(r.key, r.value) for r in theirs] == [(b"k", b"v")]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 16,
    )
    builder.append(0, timestamp=7, key=b"a", value=b"b", headers=[("h", b"x")])
    assert list(records.records(bytes(builder.build()))) == [records.Record(0, 7, b"a", b"b", (("h", b"x"),))]


def test_a_batch_with_the_old_zlib_crc_is_given_its_crc_32c_in_place() -> None:
    import zlib

    batch = bytearray(records.build_batch([(None, b"a"), (None, b"b")], timestamp=5))
    batch[17:21] = zlib.crc32(batch[21:]).to_bytes(4, "big")
    with pytest.raises(CorruptMessage, match="CRC"):
        records.validate(batch)
    untouched = bytes(batch[21:])
    assert records.convert_legacy_crc(batch)
    assert records.validate(batch).records_count == 2
    assert bytes(batch[21:]) == untouched
    assert not records.convert_legacy_crc(batch)  # already CRC-32C


def test_a_batch_whose_crc_is_neither_is_left_for_the_checks_to_find() -> None:
    batch = bytearray(records.build_batch([(None, b"payload")], timestamp=1))
    batch[-3] ^= 0xFF
    before = bytes(batch)
    assert not records.convert_legacy_crc(batch)
    assert bytes(batch) == before
