"""What Kafka's broker requires of a request's record batches by the request's version.

- Produce v3 and later (Kafka's `ProduceRequest.validateRecords`): a partition's records are
  exactly one batch, of magic 2 (INVALID_RECORD otherwise), and before v7 not zstd
  (UNSUPPORTED_COMPRESSION_TYPE, KIP-110). A partition refused so is answered with its error
  and never reaches the log; the request's other partitions are served. The rules look at
  the request's own bytes only, so they are checked before authorization, where Kafka checks
  them after: the answer tells the client nothing about the topic.
- Fetch before v10: a partition whose answer holds a zstd batch is answered
  UNSUPPORTED_COMPRESSION_TYPE without records, since a client that asks at an older version
  cannot decompress it. Kafka decides by the topic's `compression.type`; this decides by the
  batches themselves, so a zstd batch a producer sent to a `producer` topic is covered too.
"""

from __future__ import annotations

import itertools
from typing import Final

from wire import compression, records
from wire.errors import CorruptMessage, ErrorCode

ZSTD_PRODUCE_FROM: Final = 7
ZSTD_FETCH_FROM: Final = 10
_MAGIC_AT: Final = 16  # base offset (8), batch length (4), partition leader epoch (4)


def produce_refusal(data: bytes | memoryview, version: int) -> tuple[ErrorCode, str] | None:
    """The error and message refusing a partition's `data` at Produce `version`, or None."""
    if len(data) > _MAGIC_AT and data[_MAGIC_AT] != records.MAGIC:
        magic = data[_MAGIC_AT]
        return ErrorCode.INVALID_RECORD, f"Produce v{version} carries magic 2 batches only, not magic {magic}"
    try:
        # Two are enough to know: a request of a million tiny batches is not walked here.
        found = [header for _, header in itertools.islice(records.batches(data, check_crc=False), 2)]
    except CorruptMessage:
        return None  # the leader's validation refuses it, CORRUPT_MESSAGE as in Kafka
    if len(found) != 1:
        count = "more" if found else "none"
        return (
            ErrorCode.INVALID_RECORD,
            f"Produce v{version} carries exactly one record batch per partition, not {count}",
        )
    if version < ZSTD_PRODUCE_FROM and found[0].attributes & records.COMPRESSION_MASK == compression.ZSTD:
        return (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"zstd batches need Produce v{ZSTD_PRODUCE_FROM} or later, not v{version}",
        )
    return None


def fetch_refusal(data: bytes | memoryview, version: int) -> ErrorCode | None:
    """UNSUPPORTED_COMPRESSION_TYPE when Fetch `version` cannot carry the batches of `data`
    (whole batches, as the leader reads them; a short tail is not looked at), else None."""
    if version >= ZSTD_FETCH_FROM:
        return None
    position = 0
    while position + records.HEADER_SIZE <= len(data):
        header = records.read_header(data, position)
        if header.attributes & records.COMPRESSION_MASK == compression.ZSTD:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        position += header.size
    return None
