"""Broker configuration: a properties file with Kafka's property names, plus overrides.

Every value is checked before anything starts; a bad one raises ConfigError naming the key.
Unknown keys are kept and logged once, as Kafka warns about configs it does not know.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

import javaproperties

from actors.acl import AclError
from actors.authorizer import parse_super_users
from actors.partition_limits import JUTE_MAX_BUFFER, ZNODE_REQUEST_OVERHEAD
from node.broker.log.config import SEGMENT_BYTES_MIN
from node.metrics.listener import MetricsListenerError, parse_listener
from node.security.connection_limits import (
    connection_limits,
    listener_max_connections,
    per_ip_overrides,
)
from node.security.settings import (
    LISTENER_DEFAULTS,
    SettingError,
    check_listener_security,
    client_security,
    getter,
    inter_broker_principal,
    is_plain_jaas_key,
    security_protocol,
)
from node.zk.acls import DEFAULT_JAAS_SECTION, ZkSecurity, ZkSecurityError, read_credentials
from wire.connection_quotas import CONNECTIONS_MAX_IDLE_MS, NO_LIMIT, ConnectionLimits
from wire.context import ANONYMOUS
from wire.endpoint import Endpoint
from wire.security import PLAINTEXT_CLIENT, SECURITY_PROTOCOLS, ClientSecurity


class ConfigError(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


_LONG_MAX = 2**63 - 1


def _int(minimum: int, maximum: int = 2**31 - 1) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, f"{raw!r} is not an integer") from None
        if not minimum <= value <= maximum:
            raise ConfigError(key, f"{value} is outside {minimum}..{maximum}")
        return value

    return parse


def _bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, f"{raw!r} is not true or false")
    return value == "true"


def _str(key: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(key, "must not be empty")
    return raw.strip()


def _choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(key, f"{raw!r} is not {' or '.join(choices)}")
        return value

    return parse


def _text(key: str, raw: str) -> str:
    """A value checked later, with the others it goes with (security settings)."""
    return raw.strip()


# Kafka's default map: each security protocol is also a listener name of its own.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


@dataclasses.dataclass(frozen=True)
class _Def:
    parse: Callable[[str, str], object]
    default: str | None  # None: required


# How a process reaches ZooKeeper securely; brokers and the planner share them (docs/OPERATIONS.md,
# "Security"). Kafka reads the JAAS file from the JVM's `java.security.auth.login.config` system
# property (its `Client` section, or the one `zookeeper.sasl.clientconfig` names); Keel has no
# JVM, so it takes those names as properties, and the file an operator has works unchanged.
ZOOKEEPER_SECURITY_DEFINITIONS: dict[str, _Def] = {
    "zookeeper.set.acl": _Def(_bool, "false"),
    "java.security.auth.login.config": _Def(_str, ""),
    "zookeeper.sasl.clientconfig": _Def(_str, DEFAULT_JAAS_SECTION),
    "zookeeper.ssl.client.enable": _Def(_bool, "false"),
}


# Kafka's names for its ACL authorizer; Keel's is the same authorizer under its own name.
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "keel.security.AclAuthorizer",
)


def _authorizer_class(key: str, raw: str) -> str:
    name = raw.strip()
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(key, f"unknown authorizer {name!r} (Keel has {', '.join(AUTHORIZER_CLASS_NAMES)})")
    return name


def _super_users(key: str, raw: str) -> frozenset[str]:
    try:
        return parse_super_users(raw)
    except AclError as e:
        raise ConfigError(key, str(e)) from None


# The authorizer's properties (Kafka's AclAuthorizer), the same for brokers and the planner.
AUTHORIZER_DEFINITIONS: dict[str, _Def] = {
    "authorizer.class.name": _Def(_authorizer_class, ""),
    "super.users": _Def(_super_users, ""),
    "allow.everyone.if.no.acl.found": _Def(_bool, "false"),
}


def _per_ip_overrides(key: str, raw: str) -> dict[str, int]:
    try:
        return per_ip_overrides(key, raw)
    except SettingError as e:
        raise ConfigError(e.key, e.message) from None


# Kafka's limits on clients' connections, for the brokers and the planner; how each acts:
# wire/connection_quotas.py. `listener.name.<l>.max.connections` is read with the listeners.
CONNECTION_DEFINITIONS = {
    # -1: half the process's open-file limit (node/security/connection_limits.py).
    "max.connections": _Def(_int(-1), "-1"),
    "max.connections.per.ip": _Def(_int(0), str(NO_LIMIT)),
    "max.connections.per.ip.overrides": _Def(_per_ip_overrides, ""),
    "connections.max.idle.ms": _Def(_int(1, _LONG_MAX), str(CONNECTIONS_MAX_IDLE_MS)),
    # Kafka's: bytes of requests read and not yet answered, all connections together (-1: no limit).
    "queued.max.request.bytes": _Def(_int(-1, _LONG_MAX), "-1"),
}


def _metrics_listener(key: str, raw: str) -> tuple[str, int]:
    try:
        return parse_listener(raw)
    except MetricsListenerError as e:
        raise ConfigError(key, str(e)) from None


# Where a broker or the planner serves /metrics, /healthz and /readyz (node/metrics/http.py);
# unset: nowhere. The JMX exporter's agent takes its `host:port` the same way.
METRICS_DEFINITIONS = {"metrics.http.listener": _Def(_metrics_listener, "")}

# A broker's and the planner's ZooKeeper session, how long start-up waits for the first one
# (unset: the session timeout), and how many requests of a bulk read or write may be
# unanswered at a time (node/zk/in_flight.py).
ZOOKEEPER_TIMEOUT_DEFINITIONS = {
    "zookeeper.session.timeout.ms": _Def(_int(1), "18000"),
    "zookeeper.connection.timeout.ms": _Def(_int(1), ""),
    "zookeeper.max.in.flight.requests": _Def(_int(1), "10"),
}


# Kafka's names and defaults (spec §11) for what Keel uses.
DEFINITIONS: dict[str, _Def] = {
    **ZOOKEEPER_SECURITY_DEFINITIONS,
    **CONNECTION_DEFINITIONS,
    **METRICS_DEFINITIONS,
    "broker.id": _Def(_int(0), None),
    "listeners": _Def(_str, "PLAINTEXT://:9092"),
    "advertised.listeners": _Def(_str, ""),
    "listener.security.protocol.map": _Def(_str, DEFAULT_PROTOCOL_MAP),
    # Which listener the controller's channel and the replica fetchers use: one or the other
    # (Kafka's rule), else the listener named PLAINTEXT.
    "inter.broker.listener.name": _Def(_str, ""),
    "security.inter.broker.protocol": _Def(_str, ""),
    # The broker's identity on a SASL inter-broker listener, in Kafka's JAAS syntax.
    "sasl.mechanism.inter.broker.protocol": _Def(_str, "SCRAM-SHA-512"),
    "sasl.jaas.config": _Def(_text, ""),
    # TLS (PEM files) and SASL of the listeners (node/security/settings.py).
    **{key: _Def(_text, default) for key, default in LISTENER_DEFAULTS.items()},
    "zookeeper.connect": _Def(_str, None),
    **ZOOKEEPER_TIMEOUT_DEFINITIONS,
    "log.dirs": _Def(_str, "/tmp/kafka-logs"),
    "broker.rack": _Def(_str, ""),
    "socket.request.max.bytes": _Def(_int(1), "104857600"),
    "request.timeout.ms": _Def(_int(1), "30000"),
    "controller.socket.timeout.ms": _Def(_int(1), "30000"),
    "unclean.leader.election.enable": _Def(_bool, "false"),
    "auto.leader.rebalance.enable": _Def(_bool, "true"),
    "leader.imbalance.check.interval.seconds": _Def(_int(1, _LONG_MAX), "300"),
    "leader.imbalance.per.broker.percentage": _Def(_int(0, 100), "10"),
    "delete.topic.enable": _Def(_bool, "true"),
    "shutdown.timeout.ms": _Def(_int(1), "15000"),
    "controlled.shutdown.enable": _Def(_bool, "true"),
    "controlled.shutdown.max.retries": _Def(_int(0), "3"),
    "controlled.shutdown.retry.backoff.ms": _Def(_int(0, _LONG_MAX), "5000"),
    # Partition limits (KIP-578), in partition replicas, and the largest request ZooKeeper
    # takes (its jute.maxbuffer); why these defaults: docs/OPERATIONS.md, "Limits".
    "max.partitions": _Def(_int(1), "300000"),
    "max.broker.partitions": _Def(_int(1), "9000"),
    "zookeeper.jute.maxbuffer": _Def(_int(ZNODE_REQUEST_OVERHEAD + 1), str(JUTE_MAX_BUFFER)),
    "num.partitions": _Def(_int(1), "1"),
    "default.replication.factor": _Def(_int(1), "1"),
    # The replicated log: broker-wide defaults of the topic configs, and replication.
    "log.segment.bytes": _Def(_int(SEGMENT_BYTES_MIN), "1073741824"),
    # Keel's own, for tests: every segment rolls at this size (0: segment.bytes decides).
    "log.internal.segment.bytes": _Def(_int(0), "0"),
    "log.index.interval.bytes": _Def(_int(0), "4096"),
    "log.retention.ms": _Def(_int(-1, _LONG_MAX), "604800000"),
    "log.retention.bytes": _Def(_int(-1, _LONG_MAX), "-1"),
    "log.retention.check.interval.ms": _Def(_int(1, _LONG_MAX), "300000"),
    "log.flush.interval.messages": _Def(_int(1, _LONG_MAX), str(_LONG_MAX)),
    "log.flush.interval.ms": _Def(_int(0, _LONG_MAX), str(_LONG_MAX)),
    "log.flush.scheduler.interval.ms": _Def(_int(1, _LONG_MAX), "1000"),
    "log.flush.offset.checkpoint.interval.ms": _Def(_int(1, _LONG_MAX), "60000"),
    # Keel's own: how often, and how many bytes at a time, the hosted logs' batches have
    # their CRC checked, so that a bit flipped on a follower's disk is found and fetched
    # again (Kafka has no such scrub; docs/OPERATIONS.md, "Storage faults").
    "log.scrub.interval.ms": _Def(_int(1, _LONG_MAX), "30000"),
    "log.scrub.bytes": _Def(_int(0), "8388608"),
    "message.max.bytes": _Def(_int(0), "1048588"),
    "fetch.max.bytes": _Def(_int(1024), "57671680"),
    "min.insync.replicas": _Def(_int(1), "1"),
    "replica.lag.time.max.ms": _Def(_int(1, _LONG_MAX), "30000"),
    "replica.high.watermark.checkpoint.interval.ms": _Def(_int(1, _LONG_MAX), "5000"),
    "replica.fetch.max.bytes": _Def(_int(0), "1048576"),
    "replica.fetch.response.max.bytes": _Def(_int(0), "10485760"),
    "replica.fetch.wait.max.ms": _Def(_int(0), "500"),
    "replica.fetch.min.bytes": _Def(_int(1), "1"),
    "replica.fetch.backoff.ms": _Def(_int(0), "1000"),
    **AUTHORIZER_DEFINITIONS,
    # Keel's own: the broker's server.log, controller.log and state-change.log in the first of
    # log.dirs (node/broker/logs.py), where Kafka sets these in log4j.properties instead.
    "log.format": _Def(_choice("text", "json"), "text"),
    "log.file.max.bytes": _Def(_int(1024, _LONG_MAX), "104857600"),
    "log.file.backup.count": _Def(_int(0, 1000), "10"),
}


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    values: Mapping[str, object]
    unknown: tuple[str, ...]
    # What the broker binds (an empty host: every interface) and what it registers instead.
    listeners: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    security_protocols: Mapping[str, str]
    zookeeper_security: ZkSecurity
    # The listener of the controller's channel and the fetchers, and the broker's TLS and
    # SASL settings as a client of it.
    inter_broker_listener: str = "PLAINTEXT"
    inter_broker_security: ClientSecurity = PLAINTEXT_CLIENT
    # Whom the other brokers see on those connections (node/security/settings.py).
    inter_broker_principal: str = ANONYMOUS
    connection_limits: ConnectionLimits = dataclasses.field(default_factory=ConnectionLimits)

    def get_int(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int), key
        return value

    def get_str(self, key: str) -> str | None:
        value = self.values[key]
        return None if value is None else str(value)

    def get_bool(self, key: str) -> bool:
        return self.values[key] is True

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """metrics.http.listener's host and port; None when unset."""
        return metrics_listener(self.values)

    @property
    def broker_id(self) -> int:
        return self.get_int("broker.id")

    @property
    def session_timeout_s(self) -> float:
        return zookeeper_timeouts_s(self.values)[0]

    @property
    def connection_timeout_s(self) -> float:
        return zookeeper_timeouts_s(self.values)[1]

    @property
    def rack(self) -> str | None:
        return self.get_str("broker.rack")

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d.strip()) for d in str(self.get_str("log.dirs")).split(",") if d.strip()]

    def endpoint(self, listener: Endpoint, bound_port: int) -> Endpoint:
        """The advertised endpoint of a listener, once its real port is known."""
        advertised = next((a for a in self.advertised if a.listener == listener.listener), listener)
        host = advertised.host or socket.getfqdn()
        port = bound_port if advertised is listener else advertised.port
        return Endpoint(listener.listener, listener.security_protocol, host, port)


def zookeeper_timeouts_s(values: Mapping[str, object]) -> tuple[float, float]:
    """The session timeout and start-up's wait for the first session, in seconds."""
    session = values["zookeeper.session.timeout.ms"]
    connection = values["zookeeper.connection.timeout.ms"]
    assert isinstance(session, int) and isinstance(connection, int | None)
    return session / 1000, (session if connection is None else connection) / 1000


def metrics_listener(values: Mapping[str, object]) -> tuple[str, int] | None:
    value = values["metrics.http.listener"]
    if value is None:
        return None
    assert isinstance(value, tuple)
    return (str(value[0]), int(value[1]))


def zookeeper_security(values: Mapping[str, object]) -> ZkSecurity:
    """The ZooKeeper credentials and ACL choice of parsed `ZOOKEEPER_SECURITY_DEFINITIONS`."""
    if values["zookeeper.ssl.client.enable"] is True:
        raise ConfigError(
            "zookeeper.ssl.client.enable",
            "TLS to ZooKeeper is not supported (Keel's ZooKeeper client, aiozk, has no TLS); "
            "reach ZooKeeper over a trusted network or a TLS tunnel",
        )
    location = values["java.security.auth.login.config"]
    credentials = None
    if location is not None:
        try:
            credentials = read_credentials(Path(str(location)), str(values["zookeeper.sasl.clientconfig"]))
        except ZkSecurityError as e:
            raise ConfigError("java.security.auth.login.config", str(e)) from None
    if values["zookeeper.set.acl"] is True and credentials is None:
        # Kafka refuses to start likewise: the ACLs would name no identity.
        raise ConfigError(
            "zookeeper.set.acl",
            "is true, but no ZooKeeper credentials are configured (java.security.auth.login.config)",
        )
    return ZkSecurity(set_acl=values["zookeeper.set.acl"] is True, credentials=credentials)


def prepare_log_dirs(config: BrokerConfig) -> None:
    """Create each of `log.dirs` that does not exist yet, and check that the broker can write
    in each, before anything else starts: a path that is a file, or that cannot be created,
    is a configuration error naming it rather than a failure half-way through start-up."""
    for directory in config.log_dirs:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError("log.dirs", f"{directory} is a file, not a directory") from None
        except OSError as e:
            raise ConfigError("log.dirs", f"cannot create {directory}: {e.strerror or e}") from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ConfigError("log.dirs", f"cannot write in {directory}: permission denied")


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file, read by a library that implements the whole format:
    continuation lines, escapes, `key value` and `key:value` separators, comments."""
    with path.open(encoding="utf-8") as f:
        props: dict[str, str] = javaproperties.load(f)
    return props


def _parse_listeners(key: str, raw: str, protocols: dict[str, str]) -> tuple[Endpoint, ...]:
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


def _parse_protocol_map(key: str, raw: str) -> dict[str, str]:
    mapping = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name or not protocol:
            raise ConfigError(key, f"{item!r} is not LISTENER:PROTOCOL")
        mapping[name.upper()] = protocol.upper()
    return mapping


def parse_values(definitions: Mapping[str, _Def], props: Mapping[str, str]) -> dict[str, object]:
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


def load_config(props: Mapping[str, str]) -> BrokerConfig:
    values = parse_values(DEFINITIONS, props)
    protocols = _parse_protocol_map(
        "listener.security.protocol.map", str(values["listener.security.protocol.map"])
    )
    listeners = _parse_listeners("listeners", str(values["listeners"]), protocols)
    if not listeners:
        raise ConfigError("listeners", "needs at least one listener")
    advertised_raw = values["advertised.listeners"]
    advertised = (
        _parse_listeners("advertised.listeners", str(advertised_raw), protocols) if advertised_raw else ()
    )
    for listener in listeners:
        if listener.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map",
                f"no security protocol for listener {listener.listener}"
                f" (one of {', '.join(SECURITY_PROTOCOLS)})",
            )
        protocols[listener.listener] = listener.security_protocol
    for listener in advertised:
        if listener.listener not in {item.listener for item in listeners}:
            raise ConfigError("advertised.listeners", f"{listener.listener} is not in listeners")
        if not listener.host:
            raise ConfigError("advertised.listeners", f"{listener.listener} needs a host")
    inter_broker = _inter_broker_listener(values, listeners)
    get = getter(values, LISTENER_DEFAULTS)
    try:
        for listener in listeners:
            check_listener_security(listener, get)
        inter_broker_security = client_security(
            inter_broker.security_protocol,
            get("sasl.mechanism.inter.broker.protocol"),
            get,
            mechanism_key="sasl.mechanism.inter.broker.protocol",
        )
        principal = inter_broker_principal(inter_broker_security, get)
        limits = listener_connection_limits(values, props, listeners, inter_broker.listener)
    except SettingError as e:
        raise ConfigError(e.key, e.message) from None
    unknown = tuple(sorted(key for key in props if key not in values))
    return BrokerConfig(
        values,
        unknown,
        listeners,
        advertised,
        protocols,
        zookeeper_security(values),
        inter_broker.listener,
        inter_broker_security,
        principal,
        limits,
    )


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


def _inter_broker_listener(values: Mapping[str, object], listeners: tuple[Endpoint, ...]) -> Endpoint:
    """Kafka's rule: `inter.broker.listener.name`, or the listener named as
    `security.inter.broker.protocol` (default PLAINTEXT), never both; it must be a listener."""
    name = values["inter.broker.listener.name"]
    protocol = values["security.inter.broker.protocol"]
    if name is not None and protocol is not None:
        raise ConfigError(
            "inter.broker.listener.name",
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set",
        )
    key = "inter.broker.listener.name"
    if name is None:
        key = "security.inter.broker.protocol"
        try:
            name = security_protocol(key, str(protocol or "PLAINTEXT"))
        except SettingError as e:
            raise ConfigError(e.key, e.message) from None
    listener = next((item for item in listeners if item.listener == str(name).upper()), None)
    if listener is None:
        names = ", ".join(item.listener for item in listeners)
        raise ConfigError(key, f"{name} is not a listener (listeners: {names})")
    return listener


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(item, "an override must be key=value")
        overrides[key.strip()] = value.strip()
    return overrides
