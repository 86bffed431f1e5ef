"""Kafka's connection limits, read from a broker's or the planner's properties into the
wire's `ConnectionLimits` (`wire/connection_quotas.py`, which says how each acts):
`max.connections`, `listener.name.<listener>.max.connections`, `max.connections.per.ip`,
`max.connections.per.ip.overrides` (`host:count,...`; a host name stands for every address
it resolves to at start-up, as Kafka resolves it once) and `connections.max.idle.ms`.
"""

from __future__ import annotations

import ipaddress
import resource
import socket
from collections.abc import Collection, Mapping

from node.security.settings import SettingError
from wire.connection_quotas import NO_LIMIT, ConnectionLimits

_INT_MAX = 2**31 - 1


def listener_key(listener: str) -> str:
    """Kafka's listener-prefixed name of a listener's own limit (the name in lower case)."""
    return f"listener.name.{listener.lower()}.max.connections"


def count(key: str, raw: str, *, minimum: int = 0) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingError(key, f"{raw!r} is not an integer") from None
    if not minimum <= value <= _INT_MAX:
        raise SettingError(key, f"{value} is outside {minimum}..{_INT_MAX}")
    return value


def listener_max_connections(props: Mapping[str, str], listeners: Collection[str]) -> dict[str, int]:
    """The listener-prefixed limits set in `props`, by their keys."""
    keys = (listener_key(listener) for listener in listeners)
    return {key: count(key, props[key]) for key in keys if key in props}


def per_ip_overrides(key: str, raw: str) -> dict[str, int]:
    """`host:count,...` as Kafka parses it, each host replaced by the addresses it has."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        host, sep, value = item.rpartition(":")
        if not sep or not host:
            raise SettingError(key, f"{item!r} is not host:count")
        limit = count(key, value)
        for address in _addresses(key, host.strip("[]")):
            overrides[address] = limit
    return overrides


def _addresses(key: str, host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as e:
        raise SettingError(key, f"cannot resolve {host!r}: {e.strerror or e}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _max_connections(configured: int) -> int:
    return default_max_connections() if configured == -1 else configured


def default_max_connections() -> int:
    """Half the process's soft open-file limit (which a broker raises to the hard one at
    start): every connection holds a descriptor, and so does each log segment (two) and
    checkpoint; connections alone never take them all, so a crowd of idle ones cannot
    leave a log unable to roll or a checkpoint unable to be written."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= 2 * NO_LIMIT:
        return NO_LIMIT
    return max(1, soft // 2)


def connection_limits(
    values: Mapping[str, object], listeners: Collection[str], protected_listener: str | None
) -> ConnectionLimits:
    """The limits of parsed properties (`listener_max_connections`'s keys among them)."""

    def number(key: str, default: int) -> int:
        value = values.get(key)
        return default if value is None else int(str(value))

    overrides = values.get("max.connections.per.ip.overrides")
    per_ip = number("max.connections.per.ip", NO_LIMIT)
    if per_ip == 0 and not overrides:
        # Kafka's rule: nobody could connect.
        raise SettingError(
            "max.connections.per.ip", "0 refuses every client; set max.connections.per.ip.overrides too"
        )
    return ConnectionLimits(
        max_connections=_max_connections(number("max.connections", -1)),
        listener_max_connections={
            listener: number(listener_key(listener), NO_LIMIT)
            for listener in listeners
            if values.get(listener_key(listener)) is not None
        },
        max_connections_per_ip=per_ip,
        max_connections_per_ip_overrides=dict(overrides) if isinstance(overrides, Mapping) else {},
        connections_max_idle_ms=number("connections.max.idle.ms", 600_000),
        queued_max_request_bytes=number("queued.max.request.bytes", -1),
        protected_listener=protected_listener,
    )
