"""The element count of a Kafka request, walked over its bytes, agrees with kio's own encoding
of every request the listener serves, and refuses what would hold too many."""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.serial import entity_writer

from wire.api.keys import ApiKey
from wire.errors import InvalidRequest
from wire.kafka import element_budget
from wire.kafka.codec import read_request, request_schema
from wire.kafka.versions import ADVERTISED, MIN_PRODUCE_SERVED

_VALUES: dict[str, object] = {
    "bool": True,
    "int8": 1,
    "int16": 2,
    "uint16": 3,
    "error_code": 0,
    "int32": 4,
    "int64": 5,
    "float64": 1.5,
    "string": "ab",
    "bytes": b"xy",
    "records": b"",
    "uuid": uuid.UUID(int=7),
}


def sample(schema: type[Any]) -> tuple[Any, int]:
    """An instance of kio's `schema` with two elements in every array, and how many array
    elements it holds in all."""
    hints = typing.get_type_hints(schema)
    values: dict[str, object] = {}
    count = 0
    for field in dataclasses.fields(schema):
        if "tag" in field.metadata:
            continue
        kind = hints[field.name]
        if typing.get_origin(kind) in (typing.Union, type(int | None)):
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        is_array = typing.get_origin(kind) is tuple
        item = typing.get_args(kind)[0] if is_array else kind
        if dataclasses.is_dataclass(item):
            made = [sample(item) for _ in range(2 if is_array else 1)]  # type: ignore[arg-type]
            count += sum(n for _, n in made)
            value: object = tuple(m for m, _ in made) if is_array else made[0][0]
        else:
            one = _scalar(field.metadata["kafka_type"], item)
            value = (one, one) if is_array else one
        if is_array:
            count += 2
        values[field.name] = value
    return schema(**values), count


def _scalar(kafka_type: str, kind: object) -> object:
    import datetime

    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(milliseconds=9)
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(1, tz=datetime.UTC)
    value = _VALUES[kafka_type]
    return kind(value) if isinstance(kind, type) and not isinstance(value, uuid.UUID | bytes) else value  # type: ignore[call-arg]


def frame_of(schema: type[Any], body: Any) -> tuple[bytes, int]:
    """A request frame of `body` (header v1 or v2) and where its body starts."""
    header = struct.pack(">hhih", int(schema.__api_key__), int(schema.__version__), 1, 1) + b"c"
    if schema.__flexible__:
        header += b"\x00"
    out = io.BytesIO()
    entity_writer(schema)(out, body)
    return header + out.getvalue(), len(header)


# Produce before v3 is listed but refused (and kio has no schema for it).
SERVED = [
    (key, version)
    for key, (low, high) in sorted(ADVERTISED.items())
    for version in range(low, high + 1)
    if key != ApiKey.PRODUCE or version >= MIN_PRODUCE_SERVED
]


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_the_walk_reads_every_served_request_as_kio_writes_it(api_key: int, version: int) -> None:
    schema = request_schema(api_key, version)
    assert schema is not None
    body, expected = sample(schema)
    frame, at = frame_of(schema, body)
    walk = element_budget._Walk(frame, at)
    walk.entity(schema)
    assert (walk.elements, walk.at) == (expected, len(frame))


def test_a_request_of_more_elements_than_the_budget_is_refused_before_it_is_read() -> None:
    schema = request_schema(9, 1)  # OffsetFetch v1: a group, then topics of (name, partitions)
    assert schema is not None
    count = element_budget.MAX_ELEMENTS + 1
    body = (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", count)
        + (struct.pack(">h", 1) + b"a" + b"\x00" * 4) * count
    )
    frame = struct.pack(">hhih", 9, 1, 1, 1) + b"c" + body
    with pytest.raises(InvalidRequest, match="holds over"):
        read_request(frame)
    fewer = element_budget.MAX_ELEMENTS // 2
    body = (
        struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", fewer)
        + (struct.pack(">h", 1) + b"a" + b"\x00" * 4) * fewer
    )
    _, read = read_request(struct.pack(">hhih", 9, 1, 1, 1) + b"c" + body)
    assert len(read.topics) == fewer, "a large request within the budget is read"
