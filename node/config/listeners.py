"""A process's listeners as Kafka names them (`NAME://host:port` and the protocol map), the
limits on its clients' connections, and where it serves its metrics."""

from __future__ import annotations

from collections.abc import Mapping

from node.config.properties import LONG_MAX, ConfigError, Definition, integer
from node.metrics.listener import MetricsListenerError, parse_listener
from node.security.connection_limits import connection_limits, listener_max_connections, per_ip_overrides
from node.security.settings import SettingError
from wire.connection_quotas import CONNECTIONS_MAX_IDLE_MS, NO_LIMIT, ConnectionLimits
from wire.endpoint import Endpoint
from wire.security import SECURITY_PROTOCOLS

# Kafka's default map: each security protocol is also a listener name of its own.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


def parse_protocol_map(key: str, raw: str) -> dict[str, str]:
    mapping = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name or not protocol:
            raise ConfigError(key, f"{item!r} is not LISTENER:PROTOCOL")
        mapping[name.upper()] = protocol.upper()
    return mapping


def parse_listeners(key: str, raw: str, protocols: dict[str, str]) -> tuple[Endpoint, ...]:
    listeners = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        try:
            listeners.append(Endpoint.parse_listener(item, protocols))
        except ValueError as e:
            raise ConfigError(key, str(e)) from None
    names = [listener.listener for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(key, "each listener name may appear once")
    return tuple(listeners)


def _per_ip_overrides(key: str, raw: str) -> dict[str, int]:
    try:
        return per_ip_overrides(key, raw)
    except SettingError as e:
        raise ConfigError(e.key, e.message) from None


# Kafka's limits on clients' connections, for the brokers and the planner; how each acts:
# wire/connection_quotas.py. `listener.name.<l>.max.connections` is read with the listeners.
CONNECTION_DEFINITIONS = {
    # -1: half the process's open-file limit (node/security/connection_limits.py).
    "max.connections": Definition(integer(-1), "-1"),
    "max.connections.per.ip": Definition(integer(0), str(NO_LIMIT)),
    "max.connections.per.ip.overrides": Definition(_per_ip_overrides, ""),
    "connections.max.idle.ms": Definition(integer(1, LONG_MAX), str(CONNECTIONS_MAX_IDLE_MS)),
    # Kafka's: bytes of requests read and not yet answered, all connections together (-1: no limit).
    "queued.max.request.bytes": Definition(integer(-1, LONG_MAX), "-1"),
}


def listener_connection_limits(
    values: dict[str, object],
    props: Mapping[str, str],
    listeners: tuple[Endpoint, ...],
    protected_listener: str | None,
) -> ConnectionLimits:
    """The connection limits, once the listeners are known: their own
    `listener.name.<l>.max.connections` join the parsed values (so they are not unknown)."""
    names = [listener.listener for listener in listeners]
    values.update(listener_max_connections(props, names))
    return connection_limits(values, names, protected_listener if len(names) > 1 else None)


def _metrics_listener(key: str, raw: str) -> tuple[str, int]:
    try:
        return parse_listener(raw)
    except MetricsListenerError as e:
        raise ConfigError(key, str(e)) from None


# Where a broker or the planner serves /metrics, /healthz and /readyz (node/metrics/http.py);
# unset: nowhere. The JMX exporter's agent takes its `host:port` the same way.
METRICS_DEFINITIONS = {"metrics.http.listener": Definition(_metrics_listener, "")}


def metrics_listener(values: Mapping[str, object]) -> tuple[str, int] | None:
    value = values["metrics.http.listener"]
    if value is None:
        return None
    assert isinstance(value, tuple)
    return (str(value[0]), int(value[1]))
