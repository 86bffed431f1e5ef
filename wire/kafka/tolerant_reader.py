"""A reader of Kafka messages that skips tagged fields it does not know, as Kafka does.

kio's native reader refuses a flexible message carrying a tagged field its spec does not name
("Unknown tagged field tag: 0"), but KIP-482 says a reader ignores such fields, and Kafka's
own brokers do (librdkafka sends one in Metadata). This reader walks an entity as kio's own
writer lays it out (its fields in order, then on flexible versions the tagged fields: a
count, then each tag, its size and its bytes), reads each primitive field with kio's native
field reader, recurses into nested entities, and steps over the bytes of unknown tags.
`codec.read_request` falls back to it only when the native reader refuses a request.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio._kio_native import get_field_reader, read_int8, read_int32, read_unsigned_varint
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, is_optional

_NULL_ENTITY = -1


def read_entity(schema: type[Any], buffer: bytes, offset: int) -> tuple[Any, int]:
    """An instance of kio's `schema` read from `buffer` at `offset`; the bytes it took."""
    start = offset
    header = schema.__name__ == "RequestHeader"
    values: dict[str, object] = {}
    tagged: dict[int, dataclasses.Field[Any]] = {}
    for field in dataclasses.fields(schema):
        tag = get_field_tag(field)
        if tag is not None:
            tagged[int(tag)] = field
            continue
        values[field.name], size = _read_field(schema, field, buffer, offset, header)
        offset += size
    if schema.__flexible__:
        count, size = read_unsigned_varint(buffer, offset)
        offset += size
        for _ in range(count):
            tag, size = read_unsigned_varint(buffer, offset)
            offset += size
            length, size = read_unsigned_varint(buffer, offset)
            offset += size
            known = tagged.get(int(tag))
            if known is not None:
                values[known.name], _ = get_field_reader(schema, known, header, True)(buffer, offset)
            offset += length
    for field in tagged.values():
        if field.name not in values and field.default is dataclasses.MISSING:
            values[field.name] = get_tagged_field_default(field)
    return schema(**values), offset - start


def _read_field(
    schema: type[Any], field: dataclasses.Field[Any], buffer: bytes, offset: int, header: bool
) -> tuple[object, int]:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        if is_optional(field):  # KIP-893: a nullable struct starts with a marker byte
            marker, size = read_int8(buffer, offset)
            if marker == _NULL_ENTITY:
                return None, size
            value, taken = read_entity(kind.type_, buffer, offset + size)
            return value, size + taken
        return read_entity(kind.type_, buffer, offset)
    if isinstance(kind, EntityTupleField):
        if schema.__flexible__:
            stored, size = read_unsigned_varint(buffer, offset)
            length = int(stored) - 1  # compact arrays store length + 1, 0 for null
        else:
            signed, size = read_int32(buffer, offset)
            length = int(signed)
        if length < 0:
            return None, size
        if length > len(buffer) - offset:  # each item takes a byte at least
            raise ValueError(f"an array of {length} items in {len(buffer) - offset} bytes")
        items = []
        taken = size
        for _ in range(length):
            item, size = read_entity(kind.type_, buffer, offset + taken)
            items.append(item)
            taken += size
        return tuple(items), taken
    value, size = get_field_reader(schema, field, header, False)(buffer, offset)
    return value, size
