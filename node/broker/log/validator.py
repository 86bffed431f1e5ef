"""What a log checks before it appends: Kafka's LogValidator.

A follower's fetched batches were checked by their leader: each must be whole, its CRC right
and within `max.message.bytes` (`validate_batches`). A leader appends what a client sent, and
the log's offsets, its index and every consumer trust what it appended, so it checks the
records too (`validate_as_leader`): that each batch holds as many records as its header says,
framed within it, their offset deltas 0, 1, 2, ... (the leader gives the batch as many offsets
as that), the header's max timestamp their largest (retention and ListOffsets go by it), and
nothing a client may not write: no control batch, no transactional one, no compression (Keel
has none yet). One failing batch refuses the whole append, and nothing of it is written.

The simulation's in-memory log makes the same checks (node/sim/log_store.py).
"""

from __future__ import annotations

from wire import records
from wire.errors import CorruptMessage, InvalidRecord, MessageTooLarge, UnsupportedCompressionType

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


def validate_as_leader(data: bytes | bytearray | memoryview, max_message_bytes: int) -> Batches:
    """`validate_batches`, then each batch's attributes and records as a client sent them.
    Raises CorruptMessage, MessageTooLarge, InvalidRecord or UnsupportedCompressionType."""
    headers = validate_batches(data, max_message_bytes)
    for position, header in headers:
        if header.attributes & records.COMPRESSION_MASK:
            raise UnsupportedCompressionType(
                f"batch compressed with codec {header.attributes & records.COMPRESSION_MASK}: "
                "no compression is supported"
            )
        if header.attributes & records.CONTROL_BIT:
            raise InvalidRecord("clients may not write control batches")
        if header.attributes & records.TRANSACTIONAL_BIT:
            raise InvalidRecord("transactional batches are not supported")
        records.check_records(data, position, header)
    return headers
