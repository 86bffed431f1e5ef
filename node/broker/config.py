"""Broker configuration: a properties file with Kafka's property names, plus overrides.

Every value is checked before anything starts; a bad one raises ConfigError naming the key.
Unknown keys are kept and logged once, as Kafka warns about configs it does not know.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from actors.admin.partition_limits import JUTE_MAX_BUFFER, ZNODE_REQUEST_OVERHEAD
from node.broker.log.config import SEGMENT_BYTES_MIN
from node.config.authorizer import AUTHORIZER_DEFINITIONS
from node.config.listeners import (
    CONNECTION_DEFINITIONS,
    DEFAULT_PROTOCOL_MAP,
    METRICS_DEFINITIONS,
    listener_connection_limits,
    metrics_listener,
    parse_listeners,
    parse_protocol_map,
)
from node.config.properties import (
    LONG_MAX,
    ConfigError,
    Definition,
    boolean,
    choice,
    fraction,
    integer,
    parse_values,
    string,
    text,
)
from node.config.zookeeper import (
    ZOOKEEPER_SECURITY_DEFINITIONS,
    ZOOKEEPER_TIMEOUT_DEFINITIONS,
    zookeeper_security,
    zookeeper_timeouts_s,
)
from node.security.settings import (
    LISTENER_DEFAULTS,
    SettingError,
    check_listener_security,
    client_security,
    getter,
    inter_broker_principal,
    security_protocol,
)
from node.zk.acls import ZkSecurity
from wire.api.describe_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from wire.connection_quotas import ConnectionLimits
from wire.context import ANONYMOUS
from wire.endpoint import Endpoint
from wire.security import PLAINTEXT_CLIENT, SECURITY_PROTOCOLS, ClientSecurity

# Kafka's names and defaults (spec §11) for what Keel uses.
DEFINITIONS: dict[str, Definition] = {
    **ZOOKEEPER_SECURITY_DEFINITIONS,
    **CONNECTION_DEFINITIONS,
    **METRICS_DEFINITIONS,
    "broker.id": Definition(integer(0), None),
    "listeners": Definition(string, "PLAINTEXT://:9092"),
    "advertised.listeners": Definition(string, ""),
    # Listeners that speak Kafka's binary protocol (wire/kafka), in the same syntax; each is
    # registered as KAFKA_<name>, beside Keel's own listeners of the same name.
    "kafka.listeners": Definition(string, ""),
    "kafka.advertised.listeners": Definition(string, ""),
    "listener.security.protocol.map": Definition(string, DEFAULT_PROTOCOL_MAP),
    # Which listener the controller's channel and the replica fetchers use: one or the other
    # (Kafka's rule), else the listener named PLAINTEXT.
    "inter.broker.listener.name": Definition(string, ""),
    "security.inter.broker.protocol": Definition(string, ""),
    # The broker's identity on a SASL inter-broker listener, in Kafka's JAAS syntax.
    "sasl.mechanism.inter.broker.protocol": Definition(string, "SCRAM-SHA-512"),
    "sasl.jaas.config": Definition(text, ""),
    # TLS (PEM files) and SASL of the listeners (node/security/settings.py).
    **{key: Definition(text, default) for key, default in LISTENER_DEFAULTS.items()},
    "zookeeper.connect": Definition(string, None),
    **ZOOKEEPER_TIMEOUT_DEFINITIONS,
    "log.dirs": Definition(string, "/tmp/kafka-logs"),
    "broker.rack": Definition(string, ""),
    "socket.request.max.bytes": Definition(integer(1), "104857600"),
    "request.timeout.ms": Definition(integer(1), "30000"),
    "controller.socket.timeout.ms": Definition(integer(1), "30000"),
    "unclean.leader.election.enable": Definition(boolean, "false"),
    "auto.leader.rebalance.enable": Definition(boolean, "true"),
    "leader.imbalance.check.interval.seconds": Definition(integer(1, LONG_MAX), "300"),
    "leader.imbalance.per.broker.percentage": Definition(integer(0, 100), "10"),
    "delete.topic.enable": Definition(boolean, "true"),
    # The warm-standby controller (docs/STANDBY.md): being built; the same on every broker.
    "controller.standby.enable": Definition(boolean, "false"),
    "shutdown.timeout.ms": Definition(integer(1), "15000"),
    "controlled.shutdown.enable": Definition(boolean, "true"),
    "controlled.shutdown.max.retries": Definition(integer(0), "3"),
    "controlled.shutdown.retry.backoff.ms": Definition(integer(0, LONG_MAX), "5000"),
    # Partition limits (KIP-578), in partition replicas, and the largest request ZooKeeper
    # takes (its jute.maxbuffer); why these defaults: docs/OPERATIONS.md, "Limits".
    "max.partitions": Definition(integer(1), "300000"),
    "max.broker.partitions": Definition(integer(1), "9000"),
    "zookeeper.jute.maxbuffer": Definition(integer(ZNODE_REQUEST_OVERHEAD + 1), str(JUTE_MAX_BUFFER)),
    "num.partitions": Definition(integer(1), "1"),
    "default.replication.factor": Definition(integer(1), "1"),
    # Kafka's: a Metadata request that asks for it (Kafka's clients' do) creates the topics it
    # names that do not exist, with num.partitions and default.replication.factor.
    "auto.create.topics.enable": Definition(boolean, "true"),
    # The group coordinator (Kafka's): `__consumer_offsets`, made when a group is first looked
    # for, and the bounds of the members' timeouts.
    "offsets.topic.num.partitions": Definition(integer(1), "50"),
    "offsets.topic.replication.factor": Definition(integer(1, 32767), "3"),
    "offset.metadata.max.bytes": Definition(integer(0), "4096"),
    "group.min.session.timeout.ms": Definition(integer(0), "6000"),
    "group.max.session.timeout.ms": Definition(integer(0), "1800000"),
    "group.initial.rebalance.delay.ms": Definition(integer(0), "3000"),
    "group.max.size": Definition(integer(1), str(2**31 - 1)),
    # Committed offsets expire this long after a group empties (or after their commit, for a
    # topic no member of a stable group subscribes to), checked every interval (KIP-211).
    "offsets.retention.minutes": Definition(integer(1), "10080"),
    "offsets.retention.check.interval.ms": Definition(integer(1), "600000"),
    # The replicated log: broker-wide defaults of the topic configs, and replication.
    "log.segment.bytes": Definition(integer(SEGMENT_BYTES_MIN), "1073741824"),
    # Kafka's: the codec a leader stores batches in (producer: as they were sent).
    "compression.type": Definition(
        choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), "producer"
    ),
    # Keel's own, for tests: every segment rolls at this size (0: segment.bytes decides).
    "log.internal.segment.bytes": Definition(integer(0), "0"),
    "log.index.interval.bytes": Definition(integer(0), "4096"),
    "log.retention.ms": Definition(integer(-1, LONG_MAX), "604800000"),
    "log.retention.bytes": Definition(integer(-1, LONG_MAX), "-1"),
    "log.retention.check.interval.ms": Definition(integer(1, LONG_MAX), "300000"),
    "log.flush.interval.messages": Definition(integer(1, LONG_MAX), str(LONG_MAX)),
    "log.flush.interval.ms": Definition(integer(0, LONG_MAX), str(LONG_MAX)),
    "log.flush.scheduler.interval.ms": Definition(integer(1, LONG_MAX), "1000"),
    "log.flush.offset.checkpoint.interval.ms": Definition(integer(1, LONG_MAX), "60000"),
    # Log compaction (node/broker/log/cleaner.py): the default cleanup.policy and the
    # cleaner's settings, Kafka's names and defaults.
    "log.cleanup.policy": Definition(
        choice("delete", "compact", "compact,delete", "delete,compact"), "delete"
    ),
    "log.cleaner.enable": Definition(boolean, "true"),
    "log.cleaner.backoff.ms": Definition(integer(0, LONG_MAX), "15000"),
    "log.cleaner.delete.retention.ms": Definition(integer(0, LONG_MAX), "86400000"),
    "log.cleaner.min.cleanable.ratio": Definition(fraction, "0.5"),
    "log.cleaner.min.compaction.lag.ms": Definition(integer(0, LONG_MAX), "0"),
    # Keel's own: how often, and how many bytes at a time, the hosted logs' batches have
    # their CRC checked, so that a bit flipped on a follower's disk is found and fetched
    # again (Kafka has no such scrub; docs/OPERATIONS.md, "Storage faults").
    "log.scrub.interval.ms": Definition(integer(1, LONG_MAX), "30000"),
    "log.scrub.bytes": Definition(integer(0), "8388608"),
    "message.max.bytes": Definition(integer(0), "1048588"),
    "fetch.max.bytes": Definition(integer(1024), "57671680"),
    "min.insync.replicas": Definition(integer(1), "1"),
    "replica.lag.time.max.ms": Definition(integer(1, LONG_MAX), "30000"),
    "replica.high.watermark.checkpoint.interval.ms": Definition(integer(1, LONG_MAX), "5000"),
    "replica.fetch.max.bytes": Definition(integer(0), "1048576"),
    "replica.fetch.response.max.bytes": Definition(integer(0), "10485760"),
    "replica.fetch.wait.max.ms": Definition(integer(0), "500"),
    "replica.fetch.min.bytes": Definition(integer(1), "1"),
    "replica.fetch.backoff.ms": Definition(integer(0), "1000"),
    **AUTHORIZER_DEFINITIONS,
    # Keel's own: the broker's server.log, controller.log and state-change.log in the first of
    # log.dirs (node/broker/logs.py), where Kafka sets these in log4j.properties instead.
    "log.format": Definition(choice("text", "json"), "text"),
    "log.file.max.bytes": Definition(integer(1024, LONG_MAX), "104857600"),
    "log.file.backup.count": Definition(integer(0, 1000), "10"),
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
    # Kafka's binary protocol: what the broker binds and registers, named KAFKA_<name>.
    kafka_listeners: tuple[Endpoint, ...] = ()
    kafka_advertised: tuple[Endpoint, ...] = ()
    # The keys server.properties set (the others hold their defaults).
    explicit: frozenset[str] = frozenset()

    def described(self) -> dict[str, tuple[str | None, int]]:
        """Every setting Keel knows, as DescribeConfigs shows it: its value, and whether it
        comes from server.properties or is the default."""
        return {
            key: (_shown(value), STATIC_BROKER_CONFIG if key in self.explicit else DEFAULT_CONFIG)
            for key, value in self.values.items()
        }

    def topic_config_defaults(self) -> dict[str, tuple[str | None, int]]:
        """What each topic config falls back to when a topic does not set it: the broker
        setting Kafka names its synonym, else Kafka's default."""
        described = self.described()
        defaults: dict[str, tuple[str | None, int]] = dict(_TOPIC_CONFIG_DEFAULTS)
        for topic_key, broker_key in _TOPIC_CONFIG_SYNONYMS.items():
            defaults[topic_key] = described[broker_key]
        return defaults

    def get_int(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int), key
        return value

    def get_str(self, key: str) -> str | None:
        value = self.values[key]
        return None if value is None else str(value)

    def get_float(self, key: str) -> float:
        value = self.values[key]
        assert isinstance(value, float), key
        return value

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
        every = (*self.advertised, *self.kafka_advertised)
        advertised = next((a for a in every if a.listener == listener.listener), listener)
        host = advertised.host or socket.getfqdn()
        port = bound_port if advertised is listener else advertised.port
        return Endpoint(listener.listener, listener.security_protocol, host, port)


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


def load_config(props: Mapping[str, str]) -> BrokerConfig:
    values = parse_values(DEFINITIONS, props)
    protocols = parse_protocol_map(
        "listener.security.protocol.map", str(values["listener.security.protocol.map"])
    )
    listeners = parse_listeners("listeners", str(values["listeners"]), protocols)
    if not listeners:
        raise ConfigError("listeners", "needs at least one listener")
    advertised_raw = values["advertised.listeners"]
    advertised = (
        parse_listeners("advertised.listeners", str(advertised_raw), protocols) if advertised_raw else ()
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
    kafka_listeners, kafka_advertised = _kafka_listeners(values, protocols)
    get = getter(values, LISTENER_DEFAULTS)
    try:
        for listener in (*listeners, *kafka_listeners):
            check_listener_security(listener, get)
        inter_broker_security = client_security(
            inter_broker.security_protocol,
            get("sasl.mechanism.inter.broker.protocol"),
            get,
            mechanism_key="sasl.mechanism.inter.broker.protocol",
        )
        principal = inter_broker_principal(inter_broker_security, get)
        limits = listener_connection_limits(
            values, props, (*listeners, *kafka_listeners), inter_broker.listener
        )
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
        kafka_listeners,
        kafka_advertised,
        frozenset(props),
    )


KAFKA_LISTENER_PREFIX = "KAFKA_"

# Each topic config's broker-wide setting (Kafka's synonyms), and Kafka's default for those
# that have none here.
_TOPIC_CONFIG_SYNONYMS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "max.message.bytes": "message.max.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "compression.type": "compression.type",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
}
_TOPIC_CONFIG_DEFAULTS: dict[str, tuple[str | None, int]] = {
    "leader.replication.throttled.replicas": ("", DEFAULT_CONFIG),
    "follower.replication.throttled.replicas": ("", DEFAULT_CONFIG),
}


def _shown(value: object) -> str | None:
    """A parsed setting as Kafka's tools print it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _kafka_listeners(
    values: Mapping[str, object], protocols: Mapping[str, str]
) -> tuple[tuple[Endpoint, ...], tuple[Endpoint, ...]]:
    """`kafka.listeners` and `kafka.advertised.listeners`, each renamed KAFKA_<name>."""
    listeners = parse_listeners("kafka.listeners", str(values["kafka.listeners"] or ""), dict(protocols))
    advertised_raw = values["kafka.advertised.listeners"]
    advertised = (
        parse_listeners("kafka.advertised.listeners", str(advertised_raw), dict(protocols))
        if advertised_raw
        else ()
    )
    for listener in listeners:
        if listener.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("kafka.listeners", f"no security protocol for listener {listener.listener}")
    for listener in advertised:
        if listener.listener not in {item.listener for item in listeners}:
            raise ConfigError("kafka.advertised.listeners", f"{listener.listener} is not in kafka.listeners")
        if not listener.host:
            raise ConfigError("kafka.advertised.listeners", f"{listener.listener} needs a host")
    return tuple(_renamed(e) for e in listeners), tuple(_renamed(e) for e in advertised)


def _renamed(endpoint: Endpoint) -> Endpoint:
    return dataclasses.replace(endpoint, listener=KAFKA_LISTENER_PREFIX + endpoint.listener)


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
