"""Jute, ZooKeeper's wire encoding, for the codecs that lay requests and answers out
directly (node/zk/multi_codec.py, read_codec.py): big-endian ints and longs, strings and
buffers as a length then the bytes (-1 for none), a multi-op's header before each operation
and result, and a Stat as eleven fixed fields."""

from __future__ import annotations

import struct
from typing import Any

from aiozk.protocol.stat import Stat

INT = struct.Struct("!i")
# A multi-op's header before each operation and result: type, done, error.
HEADER = struct.Struct("!i?i")
STAT = struct.Struct("!qqqqiiiqiiq")
STAT_NAMES = tuple(name for name, _ in Stat.parts)
_NONE = INT.pack(-1)


def string(value: object) -> bytes:
    if value is None:
        return _NONE
    raw = str(value).encode("utf-8")
    return INT.pack(len(raw)) + raw


def buffer(value: bytes | str | None) -> bytes:
    if value is None:
        return _NONE
    raw = value.encode() if isinstance(value, str) else value
    return INT.pack(len(raw)) + raw


def acls(acls: list[Any] | None) -> bytes:
    parts = [INT.pack(len(acls or ()))]
    for acl in acls or ():
        parts += (INT.pack(acl.perms), string(acl.id.scheme), string(acl.id.id))
    return b"".join(parts)


def read_string(raw: bytes, offset: int) -> tuple[str | None, int]:
    (size,) = INT.unpack_from(raw, offset)
    offset += 4
    if size == -1:
        return None, offset
    return raw[offset : offset + size].decode("utf-8"), offset + size


class PackedStat(Stat):  # type: ignore[misc]
    """A Stat read off the wire: its eleven fields kept as the tuple they were unpacked to,
    and read by name through properties. Making one is a single attribute set, where a Stat
    built field by field is a dict of eleven: a bulk read of a million states makes a million."""

    __slots__ = ("fields",)

    fields: tuple[int, ...]


def _field(index: int, name: str) -> property:
    def read(stat: PackedStat) -> int:
        return stat.fields[index]

    return property(read, doc=f"the Stat's {name}")


for _index, _name in enumerate(STAT_NAMES):
    setattr(PackedStat, _name, _field(_index, _name))


def packed_stat(fields: tuple[int, ...]) -> Stat:
    stat: PackedStat = PackedStat.__new__(PackedStat)
    stat.fields = fields
    return stat


def read_stat(raw: bytes, offset: int) -> Stat:
    return packed_stat(STAT.unpack_from(raw, offset))


def made(cls: Any, **fields: object) -> Any:
    """An aiozk result with these fields, without its constructor's checks."""
    result = object.__new__(cls)
    result.__dict__.update(fields)
    return result
