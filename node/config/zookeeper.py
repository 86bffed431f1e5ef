"""How a broker or the planner reaches ZooKeeper: its session and timeouts, and its security
(credentials from a JAAS file, ACLs on what it creates)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from node.config.properties import ConfigError, Definition, boolean, integer, string
from node.zk.acls import DEFAULT_JAAS_SECTION, ZkSecurity, ZkSecurityError, read_credentials

# How a process reaches ZooKeeper securely; brokers and the planner share them (docs/OPERATIONS.md,
# "Security"). Kafka reads the JAAS file from the JVM's `java.security.auth.login.config` system
# property (its `Client` section, or the one `zookeeper.sasl.clientconfig` names); Keel has no
# JVM, so it takes those names as properties, and the file an operator has works unchanged.
ZOOKEEPER_SECURITY_DEFINITIONS: dict[str, Definition] = {
    "zookeeper.set.acl": Definition(boolean, "false"),
    "java.security.auth.login.config": Definition(string, ""),
    "zookeeper.sasl.clientconfig": Definition(string, DEFAULT_JAAS_SECTION),
    "zookeeper.ssl.client.enable": Definition(boolean, "false"),
}


# A broker's and the planner's ZooKeeper session, how long start-up waits for the first one
# (unset: the session timeout), and how many requests of a bulk read or write may be
# unanswered at a time (node/zk/in_flight.py).
ZOOKEEPER_TIMEOUT_DEFINITIONS = {
    "zookeeper.session.timeout.ms": Definition(integer(1), "18000"),
    "zookeeper.connection.timeout.ms": Definition(integer(1), ""),
    "zookeeper.max.in.flight.requests": Definition(integer(1), "10"),
}


def zookeeper_timeouts_s(values: Mapping[str, object]) -> tuple[float, float]:
    """The session timeout and start-up's wait for the first session, in seconds."""
    session = values["zookeeper.session.timeout.ms"]
    connection = values["zookeeper.connection.timeout.ms"]
    assert isinstance(session, int) and isinstance(connection, int | None)
    return session / 1000, (session if connection is None else connection) / 1000


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
