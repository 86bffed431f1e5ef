"""ZooKeeper's reads that move bulk state, encoded and decoded in a few struct calls each:
multiRead (opcode 22) of unwatched getData's, a single getData's answer, and setData.

A controller taking over reads every partition's state: at 1M partitions a thousand
multiReads of a thousand getData's, each answer a thousand (data, Stat) results. aiozk
renders a request and parses an answer field by field through its generic `Part` tree, some
30 µs per read, on the event loop that also carries the session's heartbeats. Here each read
is laid out from its path, and each result decoded to `(data, Stat)` directly; the bytes are
those aiozk would send and read (jute: big-endian ints and longs, strings and buffers as a
length then the bytes, -1 for none), which the contract tests check against aiozk's own.

As for the multi-op (node/zk/multi_codec.py), aiozk finds the class that decodes an answer by
its opcode in one registry: `FastMultiReadResponse`, `FastGetDataResponse` and
`FastSetDataResponse` take opcodes 22, 4 and 5 there for the whole process.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiozk import exc, protocol
from aiozk.protocol.request import Request
from aiozk.protocol.stat import Stat

from node.zk.jute import HEADER, INT, STAT, PackedStat, buffer, made, read_stat, string

_GET_DATA = protocol.GetDataRequest.opcode
_SET_DATA = protocol.SetDataRequest.opcode
# An unwatched getData's header in a multiRead: type 4, not done, no error.
_GET_DATA_HEADER = HEADER.pack(_GET_DATA, False, -1)
_FOOTER = HEADER.pack(-1, True, -1)
_UNWATCHED = b"\x00"

Read = tuple[bytes | None, Stat]


class FastMultiRead(Request):  # type: ignore[misc]
    """A multiRead of unwatched getData's of `paths` (absolute, chroot applied)."""

    opcode = 22

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [INT.pack(xid)]
        parts.append(INT.pack(self.opcode))
        length = INT.pack
        for path in self.paths:
            raw = path.encode()
            parts += (_GET_DATA_HEADER, length(len(raw)), raw, _UNWATCHED)
        parts.append(_FOOTER)
        return b"".join(parts)


def _read_data(raw: bytes, offset: int) -> tuple[Read, int]:
    """A getData result: its data (None for none) and Stat, and the offset after them."""
    (size,) = INT.unpack_from(raw, offset)
    offset += 4
    if size == -1:
        data = None
    else:
        data = raw[offset : offset + size]
        offset += size
    return (data, read_stat(raw, offset)), offset + STAT.size


class FastMultiReadResponse(protocol.TransactionResponse):  # type: ignore[misc]
    """A multiRead's answer: `responses` holds, per read, `(data, Stat)` or the error that
    read met (NoNode for a znode that does not exist), in the order of the reads; `failed`
    counts the errors."""

    failed = 0

    opcode = 22

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> FastMultiReadResponse:
        instance = cls()
        responses: list[Read | Exception] = instance.responses
        append, header, length = responses.append, HEADER.unpack_from, INT.unpack_from
        stat_fields, stat_size, new_stat = STAT.unpack_from, STAT.size, PackedStat.__new__
        kind, done, _ = header(raw_bytes, 0)
        offset = HEADER.size
        while not done:
            if kind == _GET_DATA:
                # `_read_data` written out: a bulk read decodes a million of these.
                (size,) = length(raw_bytes, offset)
                offset += 4
                if size == -1:
                    data = None
                else:
                    data = raw_bytes[offset : offset + size]
                    offset += size
                stat = new_stat(PackedStat)
                stat.fields = stat_fields(raw_bytes, offset)
                offset += stat_size
                append((data, stat))
            elif kind == -1:
                (code,) = length(raw_bytes, offset)
                offset += 4
                append(exc.get_response_error(code))
                instance.failed += 1
            else:
                # Keel's multiReads hold getData's only; anything else is aiozk's to parse.
                response, offset = protocol.response_xref[kind].parse(raw_bytes, offset)
                append(response)
                instance.failed += 1
            kind, done, _ = header(raw_bytes, offset)
            offset += HEADER.size
        return instance


class FastGetDataResponse(protocol.GetDataResponse):  # type: ignore[misc]
    """A single getData's answer, decoded here (a multi-op's results still parse through
    aiozk's `parse`, which this class inherits)."""

    opcode = _GET_DATA

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> FastGetDataResponse:
        (data, stat), _ = _read_data(raw_bytes, 0)
        instance: FastGetDataResponse = made(cls, data=data, stat=stat)
        return instance


class FastSetData(protocol.SetDataRequest):  # type: ignore[misc]
    """A single setData, encoded here."""

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [INT.pack(xid)]
        parts += (INT.pack(_SET_DATA), string(self.path), buffer(self.data), INT.pack(self.version))
        return b"".join(parts)


class FastSetDataResponse(protocol.SetDataResponse):  # type: ignore[misc]
    """A single setData's answer, decoded here (as `FastGetDataResponse`)."""

    opcode = _SET_DATA

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> FastSetDataResponse:
        instance: FastSetDataResponse = made(cls, stat=read_stat(raw_bytes, 0))
        return instance


class FastGetData(protocol.GetDataRequest):  # type: ignore[misc]
    """A single getData, encoded here."""

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [INT.pack(xid)]
        parts += (INT.pack(_GET_DATA), string(self.path), b"\x01" if self.watch else _UNWATCHED)
        return b"".join(parts)
