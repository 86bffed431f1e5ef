"""Typed message bodies that validate themselves when built from untrusted input.

A message is a frozen dataclass deriving from `Struct`. Its annotations are its schema:
`int`, `bool`, `str`, `bytes`, `float`, `list[X]`, `dict[str, X]`, `X | None` and nested
`Struct`s. `from_wire` checks a decoded msgpack value against that schema and names the
offending field on failure; `to_wire` gives back plain maps and lists for msgpack.
Keys the schema does not know are ignored, as Kafka ignores unknown tagged fields, so a
newer peer can add fields without breaking an older one.

Requests can hold 100k partition states, so each class's two conversions are generated
once, as straight-line Python, rather than interpreted field by field: the checks are the
same, the cost per field is a few bytecodes. For the same reason each class also gets `make`,
a positional constructor that skips the frozen dataclass's per-field `__setattr__`, for code
that builds thousands of values it already knows to be right.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Self

from wire.errors import InvalidRequest

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MISSING = object()


class _Fail(Exception):
    """A validation failure on its way out; each level prepends its part of the path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _type_name(value: object) -> str:
    return type(value).__name__


class _Gen:
    """Builds the source of one class's from_wire and to_wire functions."""

    def __init__(self) -> None:
        self.names: dict[str, object] = {
            "_Fail": _Fail,
            "_tn": _type_name,
            "_MIN": _INT64_MIN,
            "_MAX": _INT64_MAX,
            "_MISSING": _MISSING,
        }
        self.counter = 0

    def name(self, value: object) -> str:
        self.counter += 1
        key = f"_n{self.counter}"
        self.names[key] = value
        return key

    def check(self, hint: Any, var: str, path: str, indent: str) -> tuple[list[str], str]:
        """Lines that validate `var` against `hint` (raising _Fail with `path`), and the
        expression for the converted value."""
        origin = typing.get_origin(hint)
        if hint is int:
            return [
                f"{indent}if type({var}) is not int or not _MIN <= {var} <= _MAX:",
                f"{indent}    raise _Fail({path}, 'expected int64, got ' + _tn({var}))",
            ], var
        if hint is float:
            return [
                f"{indent}if type({var}) is not float:",
                f"{indent}    if type({var}) is not int:",
                f"{indent}        raise _Fail({path}, 'expected float, got ' + _tn({var}))",
                f"{indent}    {var} = float({var})",
            ], var
        if hint in (bool, str, bytes):
            return [
                f"{indent}if type({var}) is not {hint.__name__}:",
                f"{indent}    raise _Fail({path}, 'expected {hint.__name__}, got ' + _tn({var}))",
            ], var
        if isinstance(hint, type) and issubclass(hint, Struct):
            if not hint.__dict__.get("_compiled_schema"):
                _compile(hint)
            fn = self.name(hint._from_wire_fn)
            return [
                f"{indent}try:",
                f"{indent}    {var} = {fn}({var})",
                f"{indent}except _Fail as e:",
                f"{indent}    raise _Fail({path} + e.path, e.message) from None",
            ], var
        if origin is list:
            (item_hint,) = typing.get_args(hint)
            item = f"{var}_i"
            inner, expr = self.check(item_hint, item, f"{path} + '[' + str(_k) + ']'", indent + "    ")
            lines = [
                f"{indent}if type({var}) is not list:",
                f"{indent}    raise _Fail({path}, 'expected list, got ' + _tn({var}))",
            ]
            if inner:
                lines += [f"{indent}_out = []", f"{indent}for _k, {item} in enumerate({var}):", *inner]
                lines += [f"{indent}    _out.append({expr})", f"{indent}{var} = _out"]
            return lines, var
        if origin is dict:
            key_hint, value_hint = typing.get_args(hint)
            if key_hint is not str:
                raise TypeError(f"map keys must be str, not {key_hint}")
            item = f"{var}_v"
            inner, expr = self.check(value_hint, item, f"{path} + '[' + repr(_k) + ']'", indent + "    ")
            lines = [
                f"{indent}if type({var}) is not dict:",
                f"{indent}    raise _Fail({path}, 'expected map, got ' + _tn({var}))",
                f"{indent}_out = {{}}",
                f"{indent}for _k, {item} in {var}.items():",
                f"{indent}    if type(_k) is not str:",
                f"{indent}        raise _Fail({path} + ' key', 'expected str, got ' + _tn(_k))",
                *inner,
                f"{indent}    _out[_k] = {expr}",
                f"{indent}{var} = _out",
            ]
            return lines, var
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"unsupported union {hint}")
            inner, expr = self.check(args[0], var, path, indent + "    ")
            return [f"{indent}if {var} is not None:", *inner], var
        raise TypeError(f"unsupported schema type {hint!r}")

    def to_wire_expr(self, hint: Any, expr: str) -> str:
        origin = typing.get_origin(hint)
        if isinstance(hint, type) and issubclass(hint, Struct):
            return f"{expr}.to_wire()"
        if origin is list:
            (item_hint,) = typing.get_args(hint)
            inner = self.to_wire_expr(item_hint, "_x")
            return expr if inner == "_x" else f"[{inner} for _x in {expr}]"
        if origin is dict:
            inner = self.to_wire_expr(typing.get_args(hint)[1], "_x")
            return expr if inner == "_x" else f"{{_k: {inner} for _k, _x in {expr}.items()}}"
        if origin in (typing.Union, types.UnionType):
            (arg,) = [a for a in typing.get_args(hint) if a is not type(None)]
            inner = self.to_wire_expr(arg, expr)
            return expr if inner == expr else f"(None if {expr} is None else {inner})"
        return expr  # scalars; msgpack packs int subclasses (IntEnum) as plain ints


def _compile(cls: type[Struct]) -> None:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    gen = _Gen()
    new = gen.name(object.__new__)
    lines = [
        "def from_wire(value):",
        "    if type(value) is not dict:",
        "        raise _Fail('', 'expected map, got ' + _tn(value))",
        f"    obj = {new}(_cls)",
        "    d = obj.__dict__",
    ]
    gen.names["_cls"] = cls
    for i, field in enumerate(fields):
        var = f"v{i}"
        lines.append(f"    {var} = value.get({field.name!r}, _MISSING)")
        lines.append(f"    if {var} is _MISSING:")
        if field.default is not dataclasses.MISSING:
            lines.append(f"        {var} = {gen.name(field.default)}")
        elif field.default_factory is not dataclasses.MISSING:
            lines.append(f"        {var} = {gen.name(field.default_factory)}()")
        else:
            lines.append(f"        raise _Fail('.{field.name}', 'missing')")
        lines.append("    else:")
        check, expr = gen.check(hints[field.name], var, repr("." + field.name), "        ")
        lines += check or ["        pass"]
        lines.append(f"    d[{field.name!r}] = {expr}")
    lines.append("    return obj")
    names = [f.name for f in fields]
    lines.append(f"def make({', '.join(names)}):")
    lines.append(f"    obj = {new}(_cls)")
    lines.append("    d = obj.__dict__")
    lines += [f"    d[{n!r}] = {n}" for n in names]
    lines.append("    return obj")
    lines.append("def to_wire(self):")
    items = ", ".join(f"{f.name!r}: {gen.to_wire_expr(hints[f.name], 'self.' + f.name)}" for f in fields)
    lines.append(f"    return {{{items}}}")
    namespace = dict(gen.names)
    exec("\n".join(lines), namespace)
    cls._from_wire_fn = typing.cast(Callable[[object], Any], namespace["from_wire"])
    cls._to_wire_fn = typing.cast(Callable[[Any], dict[str, object]], namespace["to_wire"])
    cls._make_fn = typing.cast(Callable[..., Any], namespace["make"])
    cls._compiled_schema = True


class Struct:
    """Base of every message body and nested structure on the wire."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _from_wire_fn: ClassVar[Callable[[object], Any]]
    _to_wire_fn: ClassVar[Callable[[Any], dict[str, object]]]
    _make_fn: ClassVar[Callable[..., Any]]
    _compiled_schema: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Compiled lazily: the dataclass decorator runs after __init_subclass__.
        cls._from_wire_fn = _lazy_from_wire(cls)
        cls._to_wire_fn = _lazy_to_wire(cls)
        cls._make_fn = _lazy_make(cls)

    @classmethod
    def from_wire(cls, value: object) -> Self:
        """Build from a decoded msgpack value; raises InvalidRequest naming the bad field."""
        try:
            return cls._from_wire_fn(value)  # type: ignore[no-any-return]
        except _Fail as e:
            raise InvalidRequest(f"{cls.__name__}{e.path}: {e.message}") from None

    def to_wire(self) -> dict[str, object]:
        return type(self)._to_wire_fn(self)

    @classmethod
    def make(cls, *values: object) -> Self:
        """Build from values already known to be right, every field in declaration order,
        skipping the dataclass constructor: for code that builds thousands of them (a
        response entry per partition). Nothing is checked."""
        return cls._make_fn(*values)  # type: ignore[no-any-return]


def _lazy_from_wire(cls: type[Struct]) -> Callable[[object], Any]:
    def first_call(value: object) -> Any:
        _compile(cls)
        return cls._from_wire_fn(value)

    return first_call


def _lazy_to_wire(cls: type[Struct]) -> Callable[[Any], dict[str, object]]:
    def first_call(self: Any) -> dict[str, object]:
        _compile(cls)
        return cls._to_wire_fn(self)

    return first_call


def _lazy_make(cls: type[Struct]) -> Callable[..., Any]:
    def first_call(*values: object) -> Any:
        _compile(cls)
        return cls._make_fn(*values)

    return first_call
