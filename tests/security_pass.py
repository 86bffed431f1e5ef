"""The secured pass: with `KEEL_TEST_SECURITY=sasl_ssl` the integration suite runs on clusters
whose every listener is SASL_SSL, with the ACL authorizer on, unchanged tests and all.

What the harness does in that pass (tests/integration/conftest.py applies it):

- One CA for the session (`node/cluster/certificates.py`); every broker and planner gets a
  certificate from it, and every client trusts it.
- Two SCRAM-SHA-512 users written to each test's ZooKeeper chroot before a broker starts, the
  way `keel user add` writes them (their change notifications then removed, as no broker
  needs them): `broker` (the identity of the brokers' controller channel and
  fetchers, `sasl.mechanism.inter.broker.protocol`) and `admin` (every client of the tests).
  Both are `super.users`, so the authorizer lets through what the plain pass does, and a
  request refused there is a refusal Keel must not make to an administrator.
- Every broker and planner a test's `brokers` fixture makes listens on
  `SASL_SSL://127.0.0.1:<port>` (`security.inter.broker.protocol=SASL_SSL`).
- Every client a test makes without naming its security authenticates as `admin`: the default
  of the `security` argument of Keel's Python clients (and of `RpcClient.connect`'s protocol)
  is this pass's, and `tests.support.run_command` gives `keel` a `--command-config`.

A test that cannot follow the switch (it sets up listeners and principals of its own, or runs
a cluster the fixtures do not make) says so with `pytest.mark.plain_pass_only(reason)`; the
secured pass skips it, and the reason shows in the report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
from pathlib import Path

import javaproperties

from node.cluster.certificates import CertificateAuthority
from node.security.jaas import SCRAM_LOGIN_MODULE
from node.security.settings import client_security_from_properties
from wire.security import ClientSecurity

# Why a `keel-cluster up` test without `--security` runs in the plain pass only.
OWN_PLAINTEXT_CLUSTER = (
    "keel-cluster up without --security starts a PLAINTEXT cluster of its own: the plain pass's run again"
)

# The switch, and the one value it takes.
SWITCH = "KEEL_TEST_SECURITY"
SASL_SSL = "sasl_ssl"
PROTOCOL = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"
ADMIN_USER = "admin"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def requested() -> bool:
    """Whether this run is the secured pass; an unknown value is an error, not a plain pass."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if value not in ("", SASL_SSL):
        raise ValueError(f"{SWITCH}={value!r}: the secured pass is {SWITCH}={SASL_SSL} (or unset: plain)")
    return value == SASL_SSL


def jaas(username: str, password: str) -> str:
    """A `sasl.jaas.config` value in Kafka's ScramLoginModule syntax (no `user_` options:
    credentials live in ZooKeeper)."""
    return f'{SCRAM_LOGIN_MODULE} required username="{username}" password="{password}";'


@dataclasses.dataclass(frozen=True)
class SecuredPass:
    """The session's CA files and passwords, and what they make of each process's properties."""

    home: Path
    truststore: Path
    server_keystore: Path
    key_password: str
    broker_password: str
    admin_password: str
    client_config: Path
    client_properties: dict[str, str]

    @classmethod
    def create(cls, home: Path) -> SecuredPass:
        home.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority.create("keel-test-ca")
        key_password = secrets.token_urlsafe(12)
        truststore = ca.write_truststore(home / "ca.pem")
        server_keystore = ca.write_keystore(home / "server.pem", "keel-server", password=key_password)
        client_keystore = ca.write_keystore(home / "client.pem", "keel-client")
        admin_password = secrets.token_urlsafe(12)
        client_properties = {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas(ADMIN_USER, admin_password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(client_keystore),
        }
        client_config = home / "client.properties"
        with client_config.open("w", encoding="utf-8") as f:
            javaproperties.dump(client_properties, f, timestamp=False)
        return cls(
            home,
            truststore,
            server_keystore,
            key_password,
            secrets.token_urlsafe(12),
            admin_password,
            client_config,
            client_properties,
        )

    @property
    def client_security(self) -> ClientSecurity:
        return client_security_from_properties(self.client_properties)

    def _listener(self, port: int) -> dict[str, str]:
        """A SASL_SSL listener at `port` with the authorizer, as a broker's and the planner's."""
        return {
            "listeners": f"{PROTOCOL}://127.0.0.1:{port}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.server_keystore),
            "ssl.key.password": self.key_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            "ssl.client.auth": "requested",
            "sasl.enabled.mechanisms": MECHANISM,
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        }

    def broker_settings(self, port: int) -> dict[str, str]:
        return {
            **self._listener(port),
            "security.inter.broker.protocol": PROTOCOL,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": jaas(BROKER_USER, self.broker_password),
        }

    def planner_settings(self, port: int) -> dict[str, str]:
        """The planner's listener, and the planner as a client of the brokers (as `admin`)."""
        return {
            **self._listener(port),
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas(ADMIN_USER, self.admin_password),
        }

    def create_users(self, zk_connect: str) -> None:
        """`broker` and `admin` in `/config/users` of `zk_connect`, as `keel user add` writes them."""
        asyncio.run(self._create_users(zk_connect))

    async def _create_users(self, zk_connect: str) -> None:
        from node.zk import paths
        from node.zk.client import ZooKeeperClient
        from node.zk.config_store import ZkConfigStore
        from node.zk.scram_users import ScramUsers, new_credential

        zk = ZooKeeperClient(zk_connect, session_timeout_s=10, connection_timeout_s=10)
        await zk.start()
        try:
            users = ScramUsers(ZkConfigStore(zk))
            for user, password in ((BROKER_USER, self.broker_password), (ADMIN_USER, self.admin_password)):
                await users.upsert(user, {MECHANISM: new_credential(MECHANISM, password)})
            # No broker runs yet: each reads /config/users whole when it starts. Without the
            # change notifications, /config/changes holds only what a test's own actions wrote.
            for name in await zk.children(paths.CONFIG_CHANGES):
                await zk.delete(paths.config_change(name))
        finally:
            await zk.close()


# The session's secured pass once the integration fixtures have made it; empty in a plain run.
_active: list[SecuredPass] = []


def activate(secured: SecuredPass | None) -> None:
    _active[:] = [] if secured is None else [secured]


def active() -> SecuredPass | None:
    return _active[0] if _active else None


def client_defaults(security: ClientSecurity) -> list[tuple[dict[str, object], str, object]]:
    """Where the secured pass sets the clients' defaults: (a function's keyword defaults, the
    name, the value) for the `security` argument of each of Keel's clients and of the
    connection pool, and the protocol that `RpcClient.connect` dials unless told."""
    from node.clients.admin import KeelAdminClient
    from node.clients.consumer import KeelConsumer
    from node.clients.metadata import ClusterClient
    from node.clients.planner import PlannerClient, find_planner
    from node.clients.producer import KeelProducer
    from node.clients.replica_sizes import ReplicaSizeReader
    from node.cluster.local import BrokerProcess, describe
    from wire.client import RpcClient
    from wire.pool import ConnectionPool
    from wire.security import PLAINTEXT_CLIENT

    functions = [
        KeelAdminClient.__init__,
        KeelProducer.__init__,
        KeelConsumer.__init__,
        ClusterClient.__init__,
        PlannerClient.__init__,
        PlannerClient.at.__func__,
        find_planner,
        ReplicaSizeReader.__init__,
        describe,
        BrokerProcess.describe,
        ConnectionPool.__init__,
        RpcClient.connect.__func__,
    ]
    found: list[tuple[dict[str, object], str, object]] = []
    for function in functions:
        defaults = function.__kwdefaults__
        # A client whose argument changed must be looked at again, not silently left plain.
        assert defaults is not None and defaults.get("security") is PLAINTEXT_CLIENT, function
        found.append((defaults, "security", security))
    found.append((RpcClient.connect.__func__.__kwdefaults__, "security_protocol", security.security_protocol))
    return found
