"""Record batches: how records travel in Produce and Fetch and lie in log segments.

The layout is Kafka's record batch v2. A 61-byte header:

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 (2)
    | crc uint32 | attributes int16 | last_offset_delta int32 | base_timestamp int64
    | max_timestamp int64 | producer_id int64 | producer_epoch int16 | base_sequence int32
    | records_count int32

then the records, each with Kafka's varint framing. `batch_length` counts the bytes after
its own field. The CRC covers everything from `attributes` to the end, so the leader can
stamp `base_offset` and `partition_leader_epoch` without touching the records or the CRC:
the broker never re-encodes a record. The CRC is Kafka's CRC-32C (Castagnoli); logs written
before Keel used it carry zlib's CRC-32 and are converted once, at load
(`node/broker/log/crc_format.py`).

Sans-I/O: bytes in, bytes or values out; every malformed input raises CorruptMessage.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import crc32c

from wire import compression
from wire.errors import CorruptMessage, InvalidRecord

MAGIC = 2
HEADER_SIZE = 61
# base_offset and batch_length: what precedes the part `batch_length` counts.
LOG_OVERHEAD = 12
_CRC_START = 21
NO_TIMESTAMP = -1
# The most one batch's records may decompress to when read back (consumers, tools).
RECORDS_LIMIT = 64 * 1024 * 1024

# The batch attributes' bits (Kafka's DefaultRecordBatch).
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
# KIP-534: the log cleaner has set the batch's base timestamp to the time after which its
# tombstones may go (its records' timestamp deltas are relative to it).
DELETE_HORIZON_BIT = 0x40

Buffer = bytes | bytearray | memoryview
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_STAMP = struct.Struct(">q")
_EPOCH = struct.Struct(">i")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# --- varints (zigzag, as Kafka's ByteUtils) ---


def _put_varint(out: bytearray, value: int) -> None:
    n = (value << 1) ^ (value >> 63)
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _varint_size(value: int) -> int:
    """How many bytes `_put_varint` writes for `value`."""
    n = (value << 1) ^ (value >> 63)
    return max(1, (n.bit_length() + 6) // 7)


def _get_varint(buffer: Buffer, position: int) -> tuple[int, int]:
    shift = 0
    n = 0
    while True:
        if position >= len(buffer):
            raise CorruptMessage("record ends inside a varint")
        byte = buffer[position]
        position += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (n >> 1) ^ -(n & 1), position
        shift += 7
        if shift > 63:
            raise CorruptMessage("varint longer than 10 bytes")


def _put_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _put_varint(out, -1)
    else:
        _put_varint(out, len(value))
        out += value


def _get_bytes(buffer: Buffer, position: int) -> tuple[bytes | None, int]:
    length, position = _get_varint(buffer, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(buffer):
        raise CorruptMessage("record field runs past the end of the batch")
    return bytes(buffer[position:end]), end


# --- building (producers) ---


def _bytes_size(value: bytes | None) -> int:
    return _varint_size(-1) if value is None else _varint_size(len(value)) + len(value)


def record_size(key: bytes | None, value: bytes | None, offset_delta: int = 0) -> int:
    """The bytes one record built by `build_batch` takes, its length prefix included."""
    # attributes, timestamp delta 0, offset delta, key, value, no headers
    body = 1 + 1 + _varint_size(offset_delta) + _bytes_size(key) + _bytes_size(value) + 1
    return _varint_size(body) + body


def batch_size(records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """The bytes `build_batch(records)` makes, without building it: what a producer holds to
    its max.request.size before sending, and a broker to max.message.bytes."""
    return HEADER_SIZE + sum(record_size(key, value, delta) for delta, (key, value) in enumerate(records))


def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int,
    base_offset: int = 0,
    compression_codec: int = 0,
) -> bytes:
    """One batch of (key, value) records, all stamped `timestamp` (ms), its records section
    compressed with `compression_codec` (wire/compression.py; 0 none)."""
    body = bytearray()
    count = 0
    for delta, (key, value) in enumerate(records):
        record = bytearray(b"\x00")  # attributes
        _put_varint(record, 0)  # timestamp delta
        _put_varint(record, delta)
        _put_bytes(record, key)
        _put_bytes(record, value)
        _put_varint(record, 0)  # headers
        _put_varint(body, len(record))
        body += record
        count += 1
    if count == 0:
        raise ValueError("a batch needs at least one record")
    section = bytes(body) if compression_codec == 0 else compression.compress(compression_codec, bytes(body))
    header = struct.pack(">hiqqqhii", compression_codec, count - 1, timestamp, timestamp, -1, -1, -1, count)
    tail = header + section
    crc = checksum(tail)
    length = len(tail) + 4 + 1 + 4  # leader epoch, magic, crc
    return _PREFIX.pack(base_offset, length) + struct.pack(">ibI", -1, MAGIC, crc) + tail


# --- reading and checking ---


def checksum(data: Buffer) -> int:
    """A batch's CRC-32C over `data`, its bytes from `attributes` to its end."""
    return int(crc32c.crc32c(data))


def convert_legacy_crc(batch: bytearray | memoryview, position: int = 0) -> bool:
    """Give the whole batch at `position` a CRC-32C in place of the zlib CRC-32 that Keel
    wrote before it used Kafka's; whether it was one. A batch whose stored CRC is neither is
    left alone, for the log's own checks to find."""
    header = read_header(batch, position)
    covered = memoryview(batch)[position + _CRC_START : position + header.size]
    if checksum(covered) == header.crc or zlib.crc32(covered) != header.crc:
        return False
    struct.pack_into(">I", batch, position + _CRC_START - 4, checksum(covered))
    return True


def read_header(buffer: Buffer, position: int = 0) -> BatchHeader:
    if len(buffer) - position < HEADER_SIZE:
        raise CorruptMessage(f"a batch header needs {HEADER_SIZE} bytes, {len(buffer) - position} left")
    header = BatchHeader(*_HEADER.unpack_from(buffer, position))
    if header.magic != MAGIC:
        raise CorruptMessage(f"unsupported batch magic {header.magic}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptMessage(f"batch length {header.batch_length} is shorter than a header")
    # A compacted batch keeps its last offset delta with fewer records, or none at all (the
    # last batch of an idempotent producer, kept for its state): fewer records than offsets
    # is a batch's right, more is not.
    if header.records_count < 0 or header.last_offset_delta < header.records_count - 1:
        raise CorruptMessage(
            f"batch of {header.records_count} records with last offset delta {header.last_offset_delta}"
        )
    return header


def validate(buffer: Buffer, position: int = 0) -> BatchHeader:
    """The header of the whole, CRC-checked batch at `position`."""
    header = read_header(buffer, position)
    end = position + header.size
    if end > len(buffer):
        raise CorruptMessage(f"batch of {header.size} bytes, {len(buffer) - position} present")
    if computed_crc(buffer, position, header) != header.crc:
        raise CorruptMessage(f"batch at offset {header.base_offset} fails its CRC")
    return header


def computed_crc(buffer: Buffer, position: int, header: BatchHeader) -> int:
    """The CRC-32C of the whole batch at `position`, which its header's `crc` must equal."""
    return checksum(memoryview(buffer)[position + _CRC_START : position + header.size])


def batches(buffer: Buffer, *, check_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in `buffer`, which must hold whole batches."""
    position = 0
    while position < len(buffer):
        header = validate(buffer, position) if check_crc else read_header(buffer, position)
        if position + header.size > len(buffer):
            raise CorruptMessage("the last batch is cut short")
        yield position, header
        position += header.size


def record_bytes(buffer: Buffer, position: int, header: BatchHeader, limit: int) -> bytes:
    """The records section of the whole batch at `position`, decompressed if its attributes
    name a codec (at most `limit` bytes of it; wire/compression.py)."""
    body = memoryview(buffer)[position + HEADER_SIZE : position + header.size]
    codec = header.attributes & COMPRESSION_MASK
    return bytes(body) if codec == 0 else compression.decompress(codec, body, limit)


def check_record_bytes(  # noqa: PLR0915 - varints inline
    body: bytes, header: BatchHeader, *, require_keys: bool = False
) -> None:
    """That the records of a (whole, CRC-checked) batch, its uncompressed records section
    `body`, are what its header says, as Kafka's LogValidator checks a produce: each record
    framed within the batch, as
    many as `records_count`, their offset deltas 0, 1, 2, ... and the header's max timestamp
    their largest; with `require_keys` (a compacted topic), a key on every record. Raises
    InvalidRecord. The walk reads each record's framing and skips its key, value and
    headers: its work is bounded by the batch's bytes, not by the count its header claims."""
    end = len(body)
    cursor = 0
    count = 0
    largest = NO_TIMESTAMP - header.base_timestamp  # the largest timestamp delta
    # The varints are read inline (one and two bytes: every length below 8 KiB), as this
    # walks every record a leader is sent; longer ones go through _get_varint.
    get = _get_varint
    try:
        while cursor < end:
            byte = body[cursor]
            if byte < 0x80:
                length, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            elif body[cursor + 1] < 0x80:
                n = (byte & 0x7F) | (body[cursor + 1] << 7)
                length, cursor = (n >> 1) ^ -(n & 1), cursor + 2
            else:
                length, cursor = get(body, cursor)
            record_end = cursor + length
            if length < 0 or record_end > end:
                raise InvalidRecord(f"record {count} runs past the end of its batch")
            cursor += 1  # attributes
            byte = body[cursor]
            if byte < 0x80:
                timestamp_delta, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                timestamp_delta, cursor = get(body, cursor)
            byte = body[cursor]
            if byte < 0x80:
                offset_delta, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                offset_delta, cursor = get(body, cursor)
            if offset_delta != count:
                raise InvalidRecord(f"record {count} has offset delta {offset_delta}")
            largest = max(largest, timestamp_delta)
            for field_number in range(2):  # key, value
                byte = body[cursor]
                if byte < 0x80:
                    field, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
                elif body[cursor + 1] < 0x80:
                    n = (byte & 0x7F) | (body[cursor + 1] << 7)
                    field, cursor = (n >> 1) ^ -(n & 1), cursor + 2
                else:
                    field, cursor = get(body, cursor)
                if field > 0:
                    cursor += field
                elif field < -1:
                    raise InvalidRecord(f"record {count} has a field of length {field}")
                elif field == -1 and require_keys and field_number == 0:
                    raise InvalidRecord(f"record {count} has no key: a compacted topic needs one")
            if body[cursor] == 0:  # no headers
                cursor += 1
            else:
                cursor = _skip_headers(body, cursor, record_end, count, length)
            if cursor != record_end:
                raise InvalidRecord(f"record {count}'s length does not match its fields")
            count += 1
    except (CorruptMessage, IndexError):
        raise InvalidRecord(f"record {count} ends inside a field") from None
    if count != header.records_count:
        raise InvalidRecord(f"the batch holds {count} records, its header says {header.records_count}")
    largest += header.base_timestamp
    if header.max_timestamp != largest:
        raise InvalidRecord(
            f"the batch's max timestamp {header.max_timestamp} is not its records' largest, {largest}"
        )


def _skip_headers(body: bytes, cursor: int, record_end: int, record: int, length: int) -> int:
    """Past a record's headers (their count, then each one's name and value)."""
    header_count, cursor = _get_varint(body, cursor)
    if header_count < 0 or header_count > length:
        raise InvalidRecord(f"record {record} claims {header_count} headers")
    for _ in range(header_count):
        for _ in range(2):  # name, value
            field, cursor = _get_varint(body, cursor)
            if field < -1:
                raise InvalidRecord(f"record {record} has a field of length {field}")
            cursor += max(field, 0)
        if cursor > record_end:
            break
    return cursor


def record_at_or_after(
    batch: Buffer, header: BatchHeader, timestamp: int, *, first_offset: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the batch's first record stamped at or after `timestamp`, not
    below `first_offset` (a log's start inside the batch); None if it has none. With
    LogAppendTime every record has the batch's max timestamp (Kafka's rule)."""
    if header.attributes & TIMESTAMP_TYPE_BIT:
        if header.max_timestamp >= timestamp and header.last_offset >= first_offset:
            return max(header.base_offset, first_offset), header.max_timestamp
        return None
    for record in batch_records(batch, 0, header):
        if record.timestamp >= timestamp and record.offset >= first_offset:
            return record.offset, record.timestamp
    return None


def recompressed(header: BatchHeader, records_section: bytes, codec: int) -> bytes:
    """The batch of `header` with its (decompressed) `records_section` compressed with
    `codec` instead (0 none): every other field kept, the length and CRC made anew (a topic's
    `compression.type`, as Kafka's LogValidator recompresses)."""
    section = records_section if codec == 0 else compression.compress(codec, records_section)
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            header.last_offset_delta,
            header.base_timestamp,
            header.max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.records_count,
        )
        + section
    )
    length = len(tail) + 4 + 1 + 4  # leader epoch, magic, crc
    return (
        _PREFIX.pack(header.base_offset, length)
        + struct.pack(">ibI", header.partition_leader_epoch, MAGIC, checksum(tail))
        + tail
    )


def stamp(batch: bytearray | memoryview, position: int, base_offset: int, leader_epoch: int) -> None:
    """Write the offset and leader epoch the leader gives a batch (outside the CRC)."""
    _STAMP.pack_into(batch, position, base_offset)
    _EPOCH.pack_into(batch, position + LOG_OVERHEAD, leader_epoch)


def records(buffer: Buffer, *, limit: int = RECORDS_LIMIT) -> Iterator[Record]:
    """Every record of the whole batches in `buffer`, CRC-checked and decompressed (each
    batch's records to at most `limit` bytes) (consumers)."""
    view = memoryview(buffer)
    for position, header in batches(view):
        yield from batch_records(view, position, header, limit=limit)


def batch_records(
    buffer: Buffer, position: int, header: BatchHeader, *, limit: int = RECORDS_LIMIT
) -> Iterator[Record]:
    """The records of the whole batch at `position`, decompressed to at most `limit` bytes;
    its CRC is the caller's to check (`validate`). Raises CorruptMessage."""
    body = record_bytes(buffer, position, header, limit)
    cursor = 0
    end = len(body)
    for _ in range(header.records_count):
        length, cursor = _get_varint(body, cursor)
        record_end = cursor + length
        if length < 0 or record_end > end:
            raise CorruptMessage("record runs past the end of its batch")
        cursor += 1  # attributes
        timestamp_delta, cursor = _get_varint(body, cursor)
        offset_delta, cursor = _get_varint(body, cursor)
        key, cursor = _get_bytes(body, cursor)
        value, cursor = _get_bytes(body, cursor)
        header_count, cursor = _get_varint(body, cursor)
        headers = []
        for _ in range(max(header_count, 0)):
            name, cursor = _get_bytes(body, cursor)
            header_value, cursor = _get_bytes(body, cursor)
            headers.append(((name or b"").decode("utf-8", "replace"), header_value))
        if cursor != record_end:
            raise CorruptMessage("record length does not match its fields")
        yield Record(
            header.base_offset + offset_delta,
            header.base_timestamp + timestamp_delta,
            key,
            value,
            tuple(headers),
        )
    if cursor != end:
        raise CorruptMessage(f"{end - cursor} bytes after the batch's {header.records_count} records")


# --- rewriting (the log cleaner) ---


class RecordSpan(NamedTuple):
    """Where one record lies in an uncompressed records section, and what the log cleaner
    decides by: its key and whether it has a value (a tombstone has none)."""

    start: int  # its length prefix
    end: int
    timestamp_at: int  # its timestamp delta, after the attributes byte
    rest_at: int  # after the timestamp delta: offset delta, key, value, headers
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    has_value: bool


def record_spans(body: Buffer, count: int) -> Iterator[RecordSpan]:
    """The `count` records of the records section `body`, framing checked."""
    cursor = 0
    end = len(body)
    get = _get_varint
    try:
        for _ in range(count):
            start = cursor
            # The varints are read inline when they take one or two bytes (a record's length
            # and its key's, under 8 KiB), as check_record_bytes does: the cleaner walks every
            # record of a log; longer ones go through _get_varint.
            byte = body[cursor]
            if byte < 0x80:
                length, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            elif body[cursor + 1] < 0x80:
                n = (byte & 0x7F) | (body[cursor + 1] << 7)
                length, cursor = (n >> 1) ^ -(n & 1), cursor + 2
            else:
                length, cursor = get(body, cursor)
            record_end = cursor + length
            if length < 1 or record_end > end:
                raise CorruptMessage("record runs past the end of its batch")
            timestamp_at = cursor + 1  # past the attributes
            byte = body[timestamp_at]
            if byte < 0x80:
                timestamp_delta, rest_at = (byte >> 1) ^ -(byte & 1), timestamp_at + 1
            else:
                timestamp_delta, rest_at = get(body, timestamp_at)
            byte = body[rest_at]
            if byte < 0x80:
                offset_delta, cursor = (byte >> 1) ^ -(byte & 1), rest_at + 1
            else:
                offset_delta, cursor = get(body, rest_at)
            byte = body[cursor]
            if byte < 0x80:
                key_length, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                key_length, cursor = get(body, cursor)
            key = None
            if key_length >= 0:
                key = bytes(body[cursor : cursor + key_length])
                cursor += key_length
            if cursor >= record_end:
                raise CorruptMessage("record ends before its value")
            # The value's length: only its sign matters here (-1: a tombstone).
            has_value = body[cursor] != 1  # zigzag -1 is the single byte 0x01
            yield RecordSpan(
                start, record_end, timestamp_at, rest_at, timestamp_delta, offset_delta, key, has_value
            )
            cursor = record_end
    except IndexError:
        raise CorruptMessage("record ends inside a field") from None
    if cursor != end:
        raise CorruptMessage(f"{end - cursor} bytes after the batch's {count} records")


def rebased_record(body: Buffer, span: RecordSpan, timestamp_delta: int) -> bytes:
    """The record at `span` with another timestamp delta (its batch's base timestamp moved)."""
    inner = bytearray(body[span.timestamp_at - 1 : span.timestamp_at])  # attributes
    _put_varint(inner, timestamp_delta)
    inner += body[span.rest_at : span.end]
    out = bytearray()
    _put_varint(out, len(inner))
    return bytes(out + inner)


def build_raw_batch(
    header: BatchHeader,
    *,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    section: bytes,
) -> bytes:
    """A batch with `header`'s offsets, leader epoch and producer fields (its last offset
    delta kept whatever its records: Kafka's cleaner keeps a batch's last offset), and these
    attributes, timestamps and records section (compressed already, if its codec says so),
    its CRC-32C computed."""
    tail = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            header.last_offset_delta,
            base_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            records_count,
        )
        + section
    )
    length = len(tail) + 4 + 1 + 4  # leader epoch, magic, crc
    return (
        _PREFIX.pack(header.base_offset, length)
        + struct.pack(">ibI", header.partition_leader_epoch, MAGIC, checksum(tail))
        + tail
    )
