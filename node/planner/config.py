"""Planner configuration: a properties file, plus `--override key=value`, checked like a
broker's (a bad value raises ConfigError naming the key; unknown keys are kept and logged).

Every `spark.*` property goes to the SparkSession unchanged; `spark.master` (default
`local[*]`) says where the planner's Spark jobs run.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping

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
    CLIENT_KEYS,
    LISTENER_DEFAULTS,
    SettingError,
    check_listener_security,
    client_security_from_properties,
    getter,
)
from node.zk.acls import ZkSecurity
from wire.connection_quotas import ConnectionLimits
from wire.endpoint import Endpoint
from wire.security import SECURITY_PROTOCOLS, ClientSecurity

DEFINITIONS: dict[str, Definition] = {
    **ZOOKEEPER_SECURITY_DEFINITIONS,
    # A broker's limits on its clients' connections, on the planner's listener.
    **CONNECTION_DEFINITIONS,
    **METRICS_DEFINITIONS,
    "zookeeper.connect": Definition(string, None),
    **ZOOKEEPER_TIMEOUT_DEFINITIONS,
    # Loopback only unless told: the planner changes the cluster for whoever reaches it.
    "listeners": Definition(string, "PLAINTEXT://127.0.0.1:9099"),
    "advertised.host.name": Definition(string, ""),
    "listener.security.protocol.map": Definition(string, DEFAULT_PROTOCOL_MAP),
    # The listener's TLS and SASL, with a broker's names (node/security/settings.py).
    **{key: Definition(text, default) for key, default in LISTENER_DEFAULTS.items()},
    # The planner as a client of the brokers: Kafka's client properties.
    "security.protocol": Definition(string, "PLAINTEXT"),
    "sasl.mechanism": Definition(text, ""),
    "sasl.jaas.config": Definition(text, ""),
    "socket.request.max.bytes": Definition(integer(1), "104857600"),
    "request.timeout.ms": Definition(integer(1), "30000"),
    "spark.master": Definition(string, "local[*]"),
    "planner.snapshot.dir": Definition(string, "/tmp/keel-planner/snapshots"),
    # 0: no periodic snapshots (each plan still takes one).
    "planner.snapshot.interval.ms": Definition(integer(0, LONG_MAX), "300000"),
    # Snapshots kept under planner.snapshot.dir, the newest (0: all); a week at the interval.
    "planner.snapshot.retention.count": Definition(integer(0), "2016"),
    "planner.state.dir": Definition(string, "/tmp/keel-planner/state"),
    "planner.max.concurrent.moves.per.broker": Definition(integer(1), "5"),
    # The replication throttle a plan is executed with, bytes/s per broker; -1: none.
    "planner.execution.throttle.bytes.per.second": Definition(integer(-1, LONG_MAX), "52428800"),
    # Run the plan jobs once at start-up on a tiny made-up cluster (the first plan is then warm).
    "planner.warm.up.enable": Definition(boolean, "true"),
    "planner.self.healing.enable": Definition(boolean, "false"),
    "planner.self.healing.broker.failure.threshold.ms": Definition(integer(0, LONG_MAX), "1800000"),
    # Who may execute plans (Cluster Alter) and read their status (Cluster Describe).
    **AUTHORIZER_DEFINITIONS,
}


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    values: Mapping[str, object]
    unknown: tuple[str, ...]
    listener: Endpoint
    # Every spark.* property but spark.master, for the SparkSession.
    spark_conf: Mapping[str, str]
    zookeeper_security: ZkSecurity
    # How the planner reaches the brokers (its security.protocol, sasl.*, ssl.*).
    client_security: ClientSecurity = dataclasses.field(default_factory=ClientSecurity)
    connection_limits: ConnectionLimits = dataclasses.field(default_factory=ConnectionLimits)

    def get_int(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int), key
        return value

    def get_str(self, key: str) -> str:
        return str(self.values[key])

    def get_bool(self, key: str) -> bool:
        return self.values[key] is True

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """metrics.http.listener's host and port; None when unset."""
        return metrics_listener(self.values)

    @property
    def spark_master(self) -> str:
        return self.get_str("spark.master")

    @property
    def session_timeout_s(self) -> float:
        return zookeeper_timeouts_s(self.values)[0]

    @property
    def connection_timeout_s(self) -> float:
        return zookeeper_timeouts_s(self.values)[1]

    def advertised(self, bound_port: int) -> Endpoint:
        """What `/keel/planner` names: the listener's host (else advertised.host.name, else
        this machine's name) and the port it is bound to."""
        host = self.values["advertised.host.name"] or self.listener.host or socket.getfqdn()
        return Endpoint(self.listener.listener, self.listener.security_protocol, str(host), bound_port)


def _check_credentials_guarded(
    listener_protocol: str, client_security: ClientSecurity, values: Mapping[str, object]
) -> None:
    """A planner that reaches the brokers with a password (a SASL client: usually a super user,
    as it moves partitions) acts on the cluster for whoever its own listener lets in: that
    listener must authenticate (SASL) and authorize (`authorizer.class.name`), or the planner
    does not start."""
    if not client_security.security_protocol.startswith("SASL_"):
        return
    if not listener_protocol.startswith("SASL_"):
        raise ConfigError(
            "listeners",
            f"the planner reaches the brokers as a {client_security.security_protocol} user but its "
            f"own listener is {listener_protocol}: whoever reaches it could act as that user "
            "(use a SASL listener and authorizer.class.name)",
        )
    if not values.get("authorizer.class.name"):
        raise ConfigError(
            "authorizer.class.name",
            "the planner reaches the brokers as a SASL user but authorizes nobody on its own "
            "listener: every authenticated user could act as that user",
        )


def load_config(props: Mapping[str, str]) -> PlannerConfig:
    values = parse_values(DEFINITIONS, props)
    protocols = parse_protocol_map(
        "listener.security.protocol.map", str(values["listener.security.protocol.map"])
    )
    listeners = parse_listeners("listeners", str(values["listeners"]), protocols)
    if len(listeners) != 1:
        raise ConfigError("listeners", "the planner takes exactly one listener")
    if listeners[0].security_protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(
            "listener.security.protocol.map", f"no security protocol for listener {listeners[0].listener}"
        )
    get = getter(values, LISTENER_DEFAULTS)
    try:
        check_listener_security(listeners[0], get)
        client_props = {key: get(key) for key in CLIENT_KEYS if get(key)}
        client_security = client_security_from_properties(client_props)
        limits = listener_connection_limits(values, props, listeners, None)
    except SettingError as e:
        raise ConfigError(e.key, e.message) from None
    _check_credentials_guarded(listeners[0].security_protocol, client_security, values)
    spark_conf = {k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"}
    for key, value in spark_conf.items():
        if not value.strip():
            raise ConfigError(key, "must not be empty")
    unknown = tuple(sorted(k for k in props if k not in values and not k.startswith("spark.")))
    return PlannerConfig(
        values, unknown, listeners[0], spark_conf, zookeeper_security(values), client_security, limits
    )
