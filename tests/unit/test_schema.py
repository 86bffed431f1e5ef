"""Message bodies validate untrusted input and name the offending field."""

from __future__ import annotations

import dataclasses

import pytest

from wire.errors import InvalidRequest
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inner(Struct):
    id: int
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outer(Struct):
    name: str
    flag: bool = False
    ratio: float = 0.0
    blob: bytes | None = None
    items: list[Inner] = dataclasses.field(default_factory=list)
    configs: dict[str, str] = dataclasses.field(default_factory=dict)


def test_round_trip() -> None:
    value = Outer(
        name="t", flag=True, ratio=0.5, blob=b"\x00", items=[Inner(id=1, tags=["a"])], configs={"k": "v"}
    )
    assert Outer.from_wire(value.to_wire()) == value


def test_defaults_fill_missing_optional_fields_and_unknown_keys_are_ignored() -> None:
    assert Outer.from_wire({"name": "t", "future_field": 1}) == Outer(name="t")


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ({}, r"Outer\.name: missing"),
        ({"name": 1}, r"Outer\.name: expected str, got int"),
        ({"name": "t", "flag": 1}, r"Outer\.flag: expected bool, got int"),
        ({"name": "t", "items": [{"id": True}]}, r"Outer\.items\[0\]\.id: expected int64, got bool"),
        ({"name": "t", "items": [{"id": 2**64}]}, r"Outer\.items\[0\]\.id: expected int64"),
        ({"name": "t", "items": {"id": 1}}, r"Outer\.items: expected list, got dict"),
        ({"name": "t", "configs": {"k": 1}}, r"Outer\.configs\['k'\]: expected str, got int"),
        ({"name": "t", "ratio": "x"}, r"Outer\.ratio: expected float, got str"),
        ({"name": "t", "blob": "text"}, r"Outer\.blob: expected bytes, got str"),
    ],
)
def test_wrong_types_name_the_field(wire: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        Outer.from_wire(wire)


def test_not_a_map_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="Outer: expected map, got list"):
        Outer.from_wire([])


def test_make_builds_the_same_value_as_the_constructor_without_checks() -> None:
    from wire.api import PartitionError

    made = PartitionError.make("t", 3, 74)
    assert made == PartitionError(topic="t", partition=3, error_code=74)
    assert made.to_wire() == {"topic": "t", "partition": 3, "error_code": 74}
