"""A Keel process's properties: a Java properties file with Kafka's property names, plus
`--override key=value`s, each value parsed and checked by its `Definition` before anything
starts (a bad one raises ConfigError naming the key)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

import javaproperties

from node.security.settings import is_plain_jaas_key


class ConfigError(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


LONG_MAX = 2**63 - 1


def integer(minimum: int, maximum: int = 2**31 - 1) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, f"{raw!r} is not an integer") from None
        if not minimum <= value <= maximum:
            raise ConfigError(key, f"{value} is outside {minimum}..{maximum}")
        return value

    return parse


def fraction(key: str, raw: str) -> float:
    """A number from 0 to 1 (Kafka's DOUBLE configs that are ratios)."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, f"{raw!r} is not a number") from None
    if not 0 <= value <= 1:
        raise ConfigError(key, f"{value} is outside 0..1")
    return value


def boolean(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, f"{raw!r} is not true or false")
    return value == "true"


def string(key: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(key, "must not be empty")
    return raw.strip()


def choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(key, f"{raw!r} is not {' or '.join(choices)}")
        return value

    return parse


def text(key: str, raw: str) -> str:
    """A value checked later, with the others it goes with (security settings)."""
    return raw.strip()


@dataclasses.dataclass(frozen=True)
class Definition:
    parse: Callable[[str, str], object]
    default: str | None  # None: required


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file, read by a library that implements the whole format:
    continuation lines, escapes, `key value` and `key:value` separators, comments."""
    with path.open(encoding="utf-8") as f:
        props: dict[str, str] = javaproperties.load(f)
    return props


def parse_values(definitions: Mapping[str, Definition], props: Mapping[str, str]) -> dict[str, object]:
    """Each defined key's value, parsed and checked (a missing required key, a bad value:
    ConfigError naming the key); an empty value where the default is empty means unset."""
    values: dict[str, object] = {}
    for key, definition in definitions.items():
        raw = props.get(key, definition.default)
        if raw is None:
            raise ConfigError(key, "is required")
        values[key] = None if raw == "" and definition.default == "" else definition.parse(key, raw)
    # Kafka's listener-prefixed JAAS entries of PLAIN listeners, checked with the listeners.
    values.update({key: value for key, value in props.items() if is_plain_jaas_key(key)})
    return values


def read_properties_file(path: Path, overrides: list[str]) -> dict[str, str]:
    """A process's properties: the file, then its `--override key=value`s on top."""
    try:
        props = read_properties(path)
    except OSError as e:
        raise ConfigError("properties", f"cannot read {path}: {e.strerror}") from e
    props.update(parse_overrides(overrides))
    return props


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "an override must be key=value")
        overrides[key.strip()] = value.strip()
    return overrides
