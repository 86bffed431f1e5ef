"""How many elements a Kafka request's arrays hold, counted from its bytes before it is read.

Reading a request makes a Python object of every element of its arrays, at some hundreds of
bytes each where the frame spends a few: 4 MiB of one-letter topic names would take hundreds
of MiB once read. The listener counts first, walking the request's schema over the bytes
without building anything, and refuses a request of more than `MAX_ELEMENTS` elements (as
the msgpack listener refuses a frame holding more elements than its size allows), so that
what one request can cost stays bounded whatever its size.

The count is only a guard: bytes that do not follow the schema as this walk reads it give
None, and the reader proper then decides (it refuses what it cannot read).
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from typing import Any, Final

# Far above what a client's request holds (a Fetch of 100,000 partitions); a request's
# objects stay within some tens of MiB.
MAX_ELEMENTS: Final = 100_000

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Unsure(Exception):
    """The bytes do not follow the schema as walked here."""


class _OverBudget(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Field:
    kafka_type: str | None
    entity: type[Any] | None
    is_array: bool


_FIELDS: dict[type[Any], tuple[_Field, ...]] = {}


def _fields(schema: type[Any]) -> tuple[_Field, ...]:
    """The fields read in order (tagged fields are skipped with the tagged section)."""
    known = _FIELDS.get(schema)
    if known is not None:
        return known
    hints = typing.get_type_hints(schema)
    out = []
    for field in dataclasses.fields(schema):
        if "tag" in field.metadata:
            continue
        kind = hints[field.name]
        if typing.get_origin(kind) in (typing.Union, typing.get_origin(int | None)):
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        is_array = typing.get_origin(kind) is tuple
        item = typing.get_args(kind)[0] if is_array else kind
        entity = item if isinstance(item, type) and dataclasses.is_dataclass(item) else None
        out.append(_Field(field.metadata.get("kafka_type"), entity, is_array))
    _FIELDS[schema] = tuple(out)
    return _FIELDS[schema]


class _Walk:
    def __init__(self, data: bytes, at: int) -> None:
        self.data = data
        self.at = at
        self.elements = 0

    def _skip(self, n: int) -> None:
        if n < 0 or self.at + n > len(self.data):
            raise _Unsure
        self.at += n

    def _uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.at >= len(self.data) or shift > 28:
                raise _Unsure
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def _length(self, flexible: bool, wide: bool) -> int:
        """A string's, bytes' or array's length; -1 for null."""
        if flexible:
            return self._uvarint() - 1
        layout = _I32 if wide else _I16
        if self.at + layout.size > len(self.data):
            raise _Unsure
        (value,) = layout.unpack_from(self.data, self.at)
        self.at += layout.size
        return int(value)

    def _count(self, n: int) -> None:
        self.elements += n
        if self.elements > MAX_ELEMENTS:
            raise _OverBudget

    def entity(self, schema: type[Any]) -> None:
        flexible = bool(schema.__flexible__)
        for field in _fields(schema):
            if field.is_array:
                n = self._length(flexible, wide=True)
                if n < 0:
                    continue
                if n > len(self.data) - self.at:
                    raise _Unsure  # more elements than bytes left: the reader refuses it
                self._count(n)
                for _ in range(n):
                    self._one(field, flexible)
            else:
                self._one(field, flexible)
        if flexible:
            self._tagged()

    def _one(self, field: _Field, flexible: bool) -> None:
        if field.entity is not None:
            self.entity(field.entity)
            return
        kind = field.kafka_type
        if kind in _FIXED:
            self._skip(_FIXED[kind])
        elif kind == "string":
            self._skip(max(self._length(flexible, wide=False), 0))
        elif kind in ("bytes", "records"):
            self._skip(max(self._length(flexible, wide=True), 0))
        else:
            raise _Unsure

    def _tagged(self) -> None:
        n = self._uvarint()
        self._count(n)
        for _ in range(n):
            self._uvarint()
            self._skip(self._uvarint())


def over_budget(schema: type[Any], frame: bytes, body_at: int) -> bool:
    """Whether the body of `schema` at `body_at` in `frame` holds more than MAX_ELEMENTS
    array elements (False too when the bytes cannot be walked: the reader decides then)."""
    if len(frame) - body_at <= MAX_ELEMENTS:
        return False  # every element takes a byte at least
    walk = _Walk(frame, body_at)
    try:
        walk.entity(schema)
    except _OverBudget:
        return True
    except (_Unsure, RecursionError):
        return False
    return False
