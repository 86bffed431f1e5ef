"""Kafka's consumer protocol: the bytes a consumer group's members put inside JoinGroup
(ConsumerProtocolSubscription) and the leader hands out in SyncGroup
(ConsumerProtocolAssignment), opaque to the coordinator and read back by tools.

Both start with an int16 version and keep, in every version, the fields of version 0 first:

    ConsumerProtocolSubscription  version, topics: [string], user data: bytes, ...
    ConsumerProtocolAssignment    version, assigned partitions: [(topic: string, [int32])],
                                  user data: bytes

Strings are an int16 length and UTF-8, arrays an int32 count, bytes an int32 length (-1 for
null), all big-endian: Kafka's classic (non-flexible) encoding. Later versions only add
fields after these, so a reader of version 0's fields reads every version. Pure functions of
bytes; a malformed value raises ConsumerProtocolError.
"""

from __future__ import annotations

import dataclasses
import struct


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer protocol value; the message says where they stop making sense."""


@dataclasses.dataclass(frozen=True)
class ConsumerAssignment:
    version: int
    # (topic, partition) pairs in the order the assignor listed them.
    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _unpack(self, fmt: str, what: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self._data, self._at)
        except struct.error:
            raise ConsumerProtocolError(f"{what} at byte {self._at}: only {self.left} bytes left") from None
        self._at += struct.calcsize(fmt)
        return int(value)

    @property
    def left(self) -> int:
        return len(self._data) - self._at

    def int16(self, what: str) -> int:
        return self._unpack(">h", what)

    def int32(self, what: str) -> int:
        return self._unpack(">i", what)

    def count(self, what: str) -> int:
        """An array's length; -1 (a null array) reads as empty."""
        n = self.int32(what)
        if n > self.left:
            raise ConsumerProtocolError(f"{what} of {n} at byte {self._at - 4}: only {self.left} bytes left")
        return max(n, 0)

    def string(self, what: str) -> str:
        n = self.int16(what)
        raw = self._take(max(n, 0), what)
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise ConsumerProtocolError(f"{what} is not UTF-8: {e.reason}") from None

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self.int32(what)
        return None if n < 0 else self._take(n, what)

    def _take(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise ConsumerProtocolError(f"{what} of {n} bytes at byte {self._at}: only {self.left} left")
        raw = self._data[self._at : self._at + n]
        self._at += n
        return raw


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """A ConsumerProtocolAssignment of any version. Empty bytes (a member not yet given its
    share, or a group between rebalances) are an empty assignment; the user data may be
    absent, as older clients leave it."""
    if not data:
        return ConsumerAssignment(version=0, partitions=())
    reader = _Reader(data)
    version = reader.int16("version")
    partitions = []
    for _ in range(reader.count("topic count")):
        topic = reader.string("topic")
        for _ in range(reader.count(f"partition count of {topic}")):
            partitions.append((topic, reader.int32(f"partition of {topic}")))
    user_data = reader.nullable_bytes("user data") if reader.left else None
    return ConsumerAssignment(version=version, partitions=tuple(partitions), user_data=user_data)


def subscription_topics(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription of any version."""
    reader = _Reader(data)
    reader.int16("version")
    return [reader.string("topic") for _ in range(reader.count("topic count"))]
