"""Kafka's binary protocol inside one frame, through kio's codec of Kafka's message specs.

A request is a header (v1: api key, api version, correlation id, client id; v2 adds tagged
fields, for the flexible versions of KIP-482) then the body of that API and version; a
response is a header (v0: the correlation id; v1 adds tagged fields) then its body. The
ApiVersions response always has header v0, whatever its version, so that a client can read
it before it knows which versions the broker speaks.

Bodies are kio's frozen dataclasses; `build` makes one of any API and version from a mapping
of its fields by name, leaving out what that version lacks and taking the spec's default for
what the mapping leaves out, so that one translation serves every version of an API.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from wire.api.keys import ApiKey
from wire.errors import InvalidRequest
from wire.kafka.element_budget import MAX_ELEMENTS, over_budget
from wire.kafka.tolerant_reader import read_entity

_PREFIX = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_NO_TAGGED_FIELDS = b"\x00"


@dataclasses.dataclass(frozen=True)
class KafkaHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int] | None:
    """(api key, api version, correlation id) of a request frame, read without its schema;
    None for a frame too short to hold them."""
    if len(frame) < _PREFIX.size:
        return None
    return _PREFIX.unpack_from(frame)


@functools.cache
def request_schema(api_key: int, version: int) -> type[Any] | None:
    """kio's class for the request body of that API and version; None for one kio (Kafka
    3.9's specs) does not know."""
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        return None


@functools.cache
def response_schema(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


def read_request(frame: bytes) -> tuple[KafkaHeader, Any]:
    """The header and body of a whole request frame. Raises InvalidRequest for an API or
    version kio does not know, or bytes that are not that request. Bytes after the body are
    ignored, as Kafka's broker ignores them (librdkafka's Metadata v9 ends in one)."""
    prefix = peek_header(frame)
    if prefix is None:
        raise InvalidRequest(f"a request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, _ = prefix
    schema = request_schema(api_key, api_version)
    if schema is None:
        raise InvalidRequest(f"unknown API key {api_key} or version {api_version}")
    header_schema = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    try:
        header, offset = _reader(header_schema)(frame, 0)
    except Exception:
        try:  # a header with tagged fields kio's native reader does not know
            header, offset = read_entity(header_schema, frame, 0)
        except Exception as e:
            raise InvalidRequest(f"not a {schema.__name__} v{api_version} header: {e}") from None
    if over_budget(schema, frame, offset):
        raise InvalidRequest(
            f"{schema.__name__} v{api_version} ({len(frame)} bytes) holds over {MAX_ELEMENTS} elements"
        )
    try:
        body, _ = _reader(schema)(frame, offset)
    except Exception:  # kio's native reader: its own errors, ValueError on bad bytes
        # It also refuses tagged fields its spec does not name, which Kafka ignores.
        try:
            body, _ = read_entity(schema, frame, offset)
        except Exception as e:
            raise InvalidRequest(f"not a {schema.__name__} v{api_version}: {e}") from None
    return KafkaHeader(api_key, api_version, header.correlation_id, header.client_id), body


def write_response(header: KafkaHeader, body: Any) -> bytes:
    """A response frame's payload: the header the request's version calls for, then `body`."""
    buffer = io.BytesIO()
    buffer.write(_CORRELATION.pack(header.correlation_id))
    if type(body).__flexible__ and header.api_key != ApiKey.API_VERSIONS:
        buffer.write(_NO_TAGGED_FIELDS)
    _writer(type(body))(buffer, body)
    return buffer.getvalue()


def build(schema: type[Any], values: Mapping[str, object]) -> Any:
    """An instance of kio's `schema` from `values` by field name: fields the schema lacks are
    ignored, fields `values` lacks take their defaults (null or empty where the spec has
    none), lists of mappings become tuples of the nested entity the field holds, and a
    duration `x` is read from `x_ms` in ms."""
    kwargs = {}
    for field, kind in _fields(schema):
        name = field.name
        if name not in values and _is_timedelta(kind) and f"{name}_ms" in values:
            name = f"{name}_ms"  # Keel names Kafka's durations by their unit
        if name not in values:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                kwargs[field.name] = _empty(kind)
            continue
        value = values[name]
        nested = _nested_entity(kind)
        if nested is not None and value is not None:
            value = tuple(build(nested, item) for item in value)  # type: ignore[attr-defined]
        elif isinstance(value, list):
            value = tuple(value)
        elif _is_timedelta(kind) and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        elif kind is ErrorCode:
            value = _error_code(value)  # type: ignore[arg-type]
        kwargs[field.name] = value
    return schema(**kwargs)


_FIELDS: dict[type[Any], tuple[tuple[dataclasses.Field[Any], object], ...]] = {}
_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _fields(schema: type[Any]) -> tuple[tuple[dataclasses.Field[Any], object], ...]:
    """Each field of a kio entity with its type (resolved once per class)."""
    fields = _FIELDS.get(schema)
    if fields is None:
        hints = typing.get_type_hints(schema)
        fields = _FIELDS[schema] = tuple((field, hints[field.name]) for field in dataclasses.fields(schema))
    return fields


def _empty(kind: object) -> object:
    """What a field kio requires takes when Keel has nothing for it: null where the field
    allows it, else an empty array (Kafka's own defaults for both)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind):
        return None
    if typing.get_origin(kind) is tuple:
        return ()
    raise TypeError(f"no value for a field of type {kind}")


def _nested_entity(kind: object) -> type[Any] | None:
    """The nested entity class of a field typed `tuple[Entity, ...]` (or that or None)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(kind) if k is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else kind
    if typing.get_origin(kind) is not tuple:
        return None
    item = typing.get_args(kind)[0]
    return item if isinstance(item, type) and dataclasses.is_dataclass(item) else None


def plain(value: object) -> object:
    """A kio value as Keel's structs read one (`Struct.from_wire`): entities as mappings by
    field name, tuples as lists, a duration `x` as `x_ms` in ms, enums and ids as plain
    values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields: dict[str, object] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if isinstance(item, datetime.timedelta):
                fields[f"{field.name}_ms"] = int(item.total_seconds() * 1000)
            else:
                fields[field.name] = plain(item)
        return fields
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool) or value is None:
        return value
    # Keel's structs check exact types; kio's are subclasses (enums, phantom ints and strings).
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    return value


def _error_code(value: int) -> ErrorCode:
    """Kafka's error of that number; UNKNOWN_SERVER_ERROR for a number Kafka 3.9 lacks."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.unknown_server_error


def _is_timedelta(kind: object) -> bool:
    return isinstance(kind, type) and issubclass(kind, datetime.timedelta)


def _reader(schema: type[Any]) -> Any:
    reader = _READERS.get(schema)
    if reader is None:
        reader = _READERS[schema] = entity_reader(schema)
    return reader


def _writer(schema: type[Any]) -> Any:
    writer = _WRITERS.get(schema)
    if writer is None:
        writer = _WRITERS[schema] = entity_writer(schema)
    return writer
