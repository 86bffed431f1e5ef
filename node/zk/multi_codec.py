"""ZooKeeper's multi-op (opcode 14), encoded and decoded in a few struct calls per operation.

aiozk renders a request and parses an answer field by field through a generic `Part` tree.
For the controller's multi-ops of a thousand creates or sets (two creates per new partition,
a set per changed one) that is a third of its processor at 200k partitions, spent on the same
event loop as everything else. The operations Keel puts in a multi (create, set, version
check, delete) and their results are laid out here directly, byte for byte as aiozk lays them
out (jute: big-endian ints and longs, strings and buffers as a length then the bytes, -1 for
none); any other operation, or result, goes through aiozk's own code.

aiozk finds the class that decodes an answer by its opcode, in one registry: `FastMultiResponse`,
defined here, takes the multi-op's place there for the whole process (every multi-op of a
Keel process is Keel's).
"""

from __future__ import annotations

import struct
from typing import Any

from aiozk import exc, protocol
from aiozk.protocol.stat import Stat

_INT = struct.Struct("!i")
# A multi-op's header before each operation and result: type, done, error.
_HEADER = struct.Struct("!i?i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_STAT_NAMES = tuple(name for name, _ in Stat.parts)
_NONE = _INT.pack(-1)


def _string(value: object) -> bytes:
    if value is None:
        return _NONE
    raw = str(value).encode("utf-8")
    return _INT.pack(len(raw)) + raw


def _buffer(value: bytes | str | None) -> bytes:
    if value is None:
        return _NONE
    raw = value.encode() if isinstance(value, str) else value
    return _INT.pack(len(raw)) + raw


def _acls(acls: list[Any] | None) -> bytes:
    parts = [_INT.pack(len(acls or ()))]
    for acl in acls or ():
        parts += (_INT.pack(acl.perms), _string(acl.id.scheme), _string(acl.id.id))
    return b"".join(parts)


def _operation(request: protocol.Request) -> bytes | None:
    """One operation's body as aiozk renders it; None for one this module does not lay out."""
    kind = type(request)
    if kind is protocol.Create2Request or kind is protocol.CreateRequest:
        return b"".join(
            (_string(request.path), _buffer(request.data), _acls(request.acl), _INT.pack(request.flags or 0))
        )
    if kind is protocol.SetDataRequest:
        return _string(request.path) + _buffer(request.data) + _INT.pack(request.version)
    if kind is protocol.CheckVersionRequest or kind is protocol.DeleteRequest:
        return _string(request.path) + _INT.pack(request.version)
    return None


class FastMulti(protocol.TransactionRequest):  # type: ignore[misc]
    """A multi-op (aiozk's TransactionRequest), encoded here when every operation can be."""

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [_INT.pack(xid)]
        parts.append(_INT.pack(self.opcode))
        for request in self.requests:
            body = _operation(request)
            if body is None:
                serialized: bytes = super().serialize(xid)
                return serialized
            parts += (_HEADER.pack(request.opcode, False, -1), body)
        parts.append(_HEADER.pack(-1, True, -1))
        return b"".join(parts)


def _read_string(raw: bytes, offset: int) -> tuple[str | None, int]:
    (size,) = _INT.unpack_from(raw, offset)
    offset += 4
    if size == -1:
        return None, offset
    return raw[offset : offset + size].decode("utf-8"), offset + size


def _read_stat(raw: bytes, offset: int) -> Stat:
    stat: Stat = Stat.__new__(Stat)
    stat.__dict__.update(zip(_STAT_NAMES, _STAT.unpack_from(raw, offset), strict=True))
    return stat


def _made(cls: Any, **fields: object) -> Any:
    """An aiozk result with these fields, without its constructor's checks."""
    result = object.__new__(cls)
    result.__dict__.update(fields)
    return result


class FastMultiResponse(protocol.TransactionResponse):  # type: ignore[misc]
    """A multi-op's answer (aiozk's TransactionResponse), decoded here result by result."""

    opcode = 14

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> FastMultiResponse:
        instance = cls()
        responses = instance.responses
        kind, done, _ = _HEADER.unpack_from(raw_bytes, 0)
        offset = _HEADER.size
        while not done:
            if kind == -1:
                (code,) = _INT.unpack_from(raw_bytes, offset)
                offset += 4
                responses.append(exc.get_response_error(code))
            elif kind == protocol.Create2Response.opcode:
                path, offset = _read_string(raw_bytes, offset)
                responses.append(
                    _made(protocol.Create2Response, path=path, stat=_read_stat(raw_bytes, offset))
                )
                offset += _STAT.size
            elif kind == protocol.SetDataResponse.opcode:
                responses.append(_made(protocol.SetDataResponse, stat=_read_stat(raw_bytes, offset)))
                offset += _STAT.size
            elif kind == protocol.CheckVersionResponse.opcode:
                responses.append(_made(protocol.CheckVersionResponse))
            elif kind == protocol.DeleteResponse.opcode:
                responses.append(_made(protocol.DeleteResponse))
            else:
                response, offset = protocol.response_xref[kind].parse(raw_bytes, offset)
                responses.append(response)
            kind, done, _ = _HEADER.unpack_from(raw_bytes, offset)
            offset += _HEADER.size
        return instance
