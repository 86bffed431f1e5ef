"""What a log checks before it appends: Kafka's LogValidator.

A follower's fetched batches were checked by their leader: each must be whole, its CRC right
and within `max.message.bytes` (`validate_batches`). A leader appends what a client sent, and
the log's offsets, its index and every consumer trust what it appended, so it checks the
records too (`validate_as_leader`): that each batch holds as many records as its header says,
framed within it, their offset deltas 0, 1, 2, ... (the leader gives the batch as many offsets
as that), the header's max timestamp their largest (retention and ListOffsets go by it), and
nothing a client may not write: no control batch, no transactional one, no record without a
key in a compacted topic (Kafka's "Compacted topic cannot accept message without key"). A compressed batch
(gzip, snappy, lz4, zstd) is decompressed to check its records, as Kafka's LogValidator does,
and kept as the producer compressed it; it may decompress to at most 64 MiB (Kafka reads the
records as a stream instead). One failing batch refuses the whole append, and nothing of it
is written.

The simulation's in-memory log makes the same checks (node/sim/log_store.py).
"""

from __future__ import annotations

from wire import records
from wire.errors import CorruptMessage, InvalidRecord, MessageTooLarge

# What one compressed batch's records may decompress to: a bound on the memory a produce
# takes, whatever its compressed size (a decompression bomb is refused at this size).
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

Batches = list[tuple[int, records.BatchHeader]]


def validate_batches(data: bytes | bytearray | memoryview, max_message_bytes: int) -> Batches:
    """The batches of an append, each whole, its CRC right and within `max.message.bytes`."""
    if not data:
        raise CorruptMessage("no record batch")
    headers = list(records.batches(data))
    for _, header in headers:
        if header.size > max_message_bytes:
            raise MessageTooLarge(
                f"a batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
    return headers


def validate_as_leader(
    data: bytes | bytearray | memoryview, max_message_bytes: int, *, compacted: bool = False
) -> Batches:
    """`validate_batches`, then each batch's attributes and records as a client sent them;
    `compacted` when the topic's cleanup.policy includes compact.
    Raises CorruptMessage, MessageTooLarge, InvalidRecord or UnsupportedCompressionType."""
    headers = validate_batches(data, max_message_bytes)
    for position, header in headers:
        # A batch may hold fewer records than offsets once compacted, never as sent: the
        # leader gives it as many offsets as its last offset delta says.
        if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
            raise InvalidRecord(
                f"batch of {header.records_count} records with last offset delta {header.last_offset_delta}"
            )
        if header.attributes & records.CONTROL_BIT:
            raise InvalidRecord("clients may not write control batches")
        if header.attributes & records.TRANSACTIONAL_BIT:
            raise InvalidRecord("transactional batches are not supported")
        body = records.record_bytes(data, position, header, MAX_DECOMPRESSED_BYTES)
        records.check_record_bytes(body, header, require_keys=compacted)
    return headers
