"""What the `keel` commands that go to ZooKeeper itself share (`reassign snapshot`, `user`,
`zookeeper secure`), as Kafka's ZooKeeper-mode tools do: `--zookeeper host:port[/chroot]`
(default KEEL_ZOOKEEPER, else the local cluster's), ZooKeeper credentials from the JAAS file
that `--command-config` names in `java.security.auth.login.config` (Kafka's tools take it
from that JVM system property), and one session opened within a few seconds or a one-line
error.

With credentials, what a command creates gets Kafka's ACLs, as Kafka's tools decide by
whether a JAAS file is set (JaasUtils.isZkSaslEnabled): the brokers must be able to read it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from node.cli.arguments import read_command_config
from node.command.entry import CommandError, UsageError
from node.config.properties import ConfigError, parse_values
from node.config.zookeeper import ZOOKEEPER_SECURITY_DEFINITIONS as SECURITY_DEFINITIONS
from node.config.zookeeper import zookeeper_security
from node.zk.acls import ZkSecurity
from node.zk.client import NO_AUTH_HINT, NoAuth, ZooKeeperClient, ZooKeeperUnavailable

# Seconds to open a ZooKeeper session, at most: a server that answers opens one in
# milliseconds, and one that does not would otherwise be retried for the whole --timeout.
ZK_CONNECT_S = 5.0
JAAS_KEYS = ("java.security.auth.login.config", "zookeeper.sasl.clientconfig")


def add_zookeeper_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zookeeper",
        "--zookeeper-connect",
        dest="zookeeper",
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help="ZooKeeper (default: KEEL_ZOOKEEPER, else the local cluster's)",
    )


def default_zookeeper() -> str | None:
    if env := os.environ.get("KEEL_ZOOKEEPER"):
        return env
    from node.cluster.state import ClusterState

    state = ClusterState.load(Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    if state is not None and state.zookeeper_ports:
        return ",".join(f"127.0.0.1:{p}" for p in state.zookeeper_ports[::3])
    return None


def zookeeper_connect(args: argparse.Namespace) -> str:
    connect: str | None = args.zookeeper or default_zookeeper()
    if connect is None:
        raise UsageError("no ZooKeeper given: pass --zookeeper host:port[/chroot]")
    return connect


def command_security(args: argparse.Namespace) -> ZkSecurity:
    """ZooKeeper credentials from the `--command-config` file, if it names a JAAS file; ACLs
    on what is created whenever there are credentials."""
    props = {} if args.command_config is None else read_command_config(args.command_config)
    jaas = {key: props[key] for key in JAAS_KEYS if key in props}
    try:
        security = zookeeper_security(parse_values(SECURITY_DEFINITIONS, jaas))
    except ConfigError as e:
        raise UsageError(f"--command-config {args.command_config}: {e}") from None
    return ZkSecurity(set_acl=security.credentials is not None, credentials=security.credentials)


@contextlib.asynccontextmanager
async def zookeeper_session(
    connect: str, timeout: float, security: ZkSecurity
) -> AsyncIterator[ZooKeeperClient]:
    deadline = min(timeout, ZK_CONNECT_S)
    zk = ZooKeeperClient(connect, session_timeout_s=timeout, connection_timeout_s=deadline, security=security)
    try:
        await zk.start()
    except ZooKeeperUnavailable:
        raise CommandError(
            f"cannot reach ZooKeeper at {connect}: no session within {deadline:g} s; "
            "check that it runs there, or pass --zookeeper host:port[/chroot]"
        ) from None
    try:
        yield zk
    except NoAuth as e:
        raise CommandError(NO_AUTH_HINT) from e
    finally:
        await zk.close()
