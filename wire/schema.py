"""Typed message bodies that validate themselves when built from untrusted input.

A message is a frozen dataclass deriving from `Struct`. Its annotations are its schema:
`int`, `bool`, `str`, `bytes`, `float`, `list[X]`, `dict[str, X]`, `X | None` and nested
`Struct`s. `from_wire` checks a decoded msgpack value against that schema and names the
offending field on failure; `to_wire` gives back plain maps and lists for msgpack.
Keys the schema does not know are ignored, as Kafka ignores unknown tagged fields, so a
newer peer can add fields without breaking an older one.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Self, cast

from wire.errors import InvalidRequest

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

Checker = Callable[[object, str], object]


def _fail(where: str, expected: str, value: object) -> InvalidRequest:
    return InvalidRequest(f"{where}: expected {expected}, got {type(value).__name__}")


def _check_int(value: object, where: str) -> object:
    # bool is an int subclass in Python but a distinct type on the wire.
    if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:
        raise _fail(where, "int64", value)
    return value


def _check_simple(kind: type) -> Checker:
    def check(value: object, where: str) -> object:
        if type(value) is not kind:
            raise _fail(where, kind.__name__, value)
        return value

    return check


def _check_float(value: object, where: str) -> object:
    if type(value) not in (int, float):
        raise _fail(where, "float", value)
    return float(cast(float, value))


def _checker_for(hint: Any) -> Checker:
    origin = typing.get_origin(hint)
    if hint is int:
        return _check_int
    if hint is float:
        return _check_float
    if hint in (bool, str, bytes):
        return _check_simple(hint)
    if isinstance(hint, type) and issubclass(hint, Struct):
        return hint._from_wire_at
    if origin is list:
        (item_hint,) = typing.get_args(hint)
        item = _checker_for(item_hint)

        def check_list(value: object, where: str) -> object:
            if type(value) is not list:
                raise _fail(where, "list", value)
            return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]

        return check_list
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        if key_hint is not str:
            raise TypeError(f"map keys must be str, not {key_hint}")
        item = _checker_for(value_hint)

        def check_map(value: object, where: str) -> object:
            if type(value) is not dict:
                raise _fail(where, "map", value)
            out = {}
            for k, v in value.items():
                if type(k) is not str:
                    raise _fail(f"{where} key", "str", k)
                out[k] = item(v, f"{where}[{k!r}]")
            return out

        return check_map
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {hint}")
        inner = _checker_for(args[0])

        def check_optional(value: object, where: str) -> object:
            return None if value is None else inner(value, where)

        return check_optional
    raise TypeError(f"unsupported schema type {hint!r}")


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    check: Checker
    required: bool


def _to_wire_value(value: object) -> object:
    if isinstance(value, Struct):
        return value.to_wire()
    if isinstance(value, list):
        return [_to_wire_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_wire_value(v) for k, v in value.items()}
    if isinstance(value, int) and type(value) not in (int, bool):
        return int(value)  # IntEnum members travel as plain numbers
    return value


class Struct:
    """Base of every message body and nested structure on the wire."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _schema: ClassVar[tuple[_Field, ...] | None] = None

    @classmethod
    def _fields(cls) -> tuple[_Field, ...]:
        schema = cls.__dict__.get("_schema")
        if schema is None:
            hints = typing.get_type_hints(cls)
            schema = tuple(
                _Field(
                    f.name,
                    _checker_for(hints[f.name]),
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cast(Any, cls))
            )
            cls._schema = schema
        return schema

    @classmethod
    def from_wire(cls, value: object) -> Self:
        """Build from a decoded msgpack value; raises InvalidRequest naming the bad field."""
        return cls._from_wire_at(value, cls.__name__)

    @classmethod
    def _from_wire_at(cls, value: object, where: str) -> Self:
        if type(value) is not dict:
            raise _fail(where, "map", value)
        kwargs: dict[str, object] = {}
        for field in cls._fields():
            if field.name in value:
                kwargs[field.name] = field.check(value[field.name], f"{where}.{field.name}")
            elif field.required:
                raise InvalidRequest(f"{where}.{field.name}: missing")
        return cls(**kwargs)

    def to_wire(self) -> dict[str, object]:
        return {f.name: _to_wire_value(getattr(self, f.name)) for f in self._fields()}
