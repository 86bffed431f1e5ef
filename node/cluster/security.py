"""Security for a local cluster (`keel-cluster up --security tls|sasl`): a CA and certificates
under the cluster's directory, the brokers' (and the planner's) TLS, SASL and authorizer
properties, the SCRAM users, and the `client.properties` a client passes as `--command-config`.

    tls   every listener is SSL (inter-broker too) and asks for a client certificate; clients
          verify the brokers against the cluster's CA and present a certificate of their own
          (principal User:client). No authorizer: holding a certificate of the CA is the gate.
    sasl  every listener is SASL_SSL (inter-broker too, SCRAM-SHA-512): TLS as above, then
          SCRAM. The brokers are the user `broker`, a client the user `admin`; both are
          created in ZooKeeper (`/config/users`) before the brokers start, and are the super
          users of the authorizer, which is on: anyone else needs ACLs (`keel acl`).

The files live under `<dir>/security` (mode 600 where they hold a secret); what the brokers
and the planner need is kept in `<dir>/security/broker.properties`, so that a later command
starts them the same way, and `client.properties` is `<dir>/client.properties`.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from pathlib import Path

import javaproperties

from node.cluster.certificates import CertificateAuthority
from node.cluster.private_files import private
from node.security.jaas import SCRAM_LOGIN_MODULE, sasl_credentials
from node.security.settings import client_security_from_properties
from node.zk.client import ZooKeeperClient
from node.zk.config_store import ZkConfigStore
from node.zk.scram_users import ScramUsers, new_credential
from wire.credentials import SCRAM_MECHANISMS
from wire.security import ClientSecurity

SECURITY_MODES = ("tls", "sasl")
ADMIN_USER = "admin"
BROKER_USER = "broker"
MECHANISM = "SCRAM-SHA-512"
CLIENT_CONFIG = "client.properties"
_BROKER_CONFIG = "broker.properties"


@dataclasses.dataclass(frozen=True)
class ClusterSecurity:
    """What a secured local cluster needs: `protocol` for its listeners, `broker_settings`
    for every broker and the planner, and `client_properties` for a client (written to
    `client_config`)."""

    protocol: str
    broker_settings: dict[str, str]
    client_properties: dict[str, str]
    client_config: Path

    def listeners(self, port: int) -> dict[str, str]:
        """The one listener of a broker at `port`, also the inter-broker one."""
        return {
            "listeners": f"{self.protocol}://127.0.0.1:{port}",
            "security.inter.broker.protocol": self.protocol,
        }

    def planner_settings(self, port: int) -> dict[str, str]:
        """The planner's listener takes a broker's settings; it reaches the brokers as a
        client with the brokers' own identity (its `security.protocol` and `sasl.mechanism`)."""
        settings = {**self.broker_settings, "listeners": f"{self.protocol}://127.0.0.1:{port}"}
        settings["security.protocol"] = self.protocol
        mechanism = settings.pop("sasl.mechanism.inter.broker.protocol", None)
        if mechanism is not None:
            settings["sasl.mechanism"] = mechanism
        return settings

    def client(self) -> ClientSecurity:
        return client_security_from_properties(self.client_properties)

    @property
    def users(self) -> dict[str, str]:
        """The SCRAM users the cluster's own properties log in as, by name (their passwords)."""
        users = {}
        for props, mechanism_key in (
            (self.broker_settings, "sasl.mechanism.inter.broker.protocol"),
            (self.client_properties, "sasl.mechanism"),
        ):
            if "sasl.jaas.config" in props:
                identity = sasl_credentials(props[mechanism_key], props["sasl.jaas.config"])
                users[identity.username] = identity.password
        return users


def jaas_entry(username: str, password: str, *, module: str = SCRAM_LOGIN_MODULE, **users: str) -> str:
    """A `sasl.jaas.config` value in Kafka's syntax (values quoted and escaped); `users` are
    PlainLoginModule's `user_<name>` options."""
    options = {"username": username, "password": password, **{f"user_{k}": v for k, v in users.items()}}
    rendered = " ".join(f'{key}="{_escape(value)}"' for key, value in options.items())
    return f"{module} required {rendered};"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


async def create_scram_users(zk_connect: str, users: Mapping[str, str], *, timeout_s: float = 30.0) -> None:
    """Write each user's SCRAM credentials (every mechanism) to `/config/users`, as `keel user
    add` does; running brokers learn them from the change notification."""
    zk = ZooKeeperClient(zk_connect, session_timeout_s=timeout_s, connection_timeout_s=timeout_s)
    await zk.start()
    try:
        scram = ScramUsers(ZkConfigStore(zk))
        for user, password in users.items():
            await scram.upsert(user, {m: new_credential(m, password) for m in SCRAM_MECHANISMS})
    finally:
        await zk.close()


def make_cluster_security(
    directory: Path, mode: str, *, admin_password: str | None = None
) -> ClusterSecurity:
    """Create the CA, the brokers' and the client's certificates under `directory/security`,
    and (for sasl) the passwords of the admin and broker users; write the properties."""
    if mode not in SECURITY_MODES:
        raise ValueError(f"--security must be one of {', '.join(SECURITY_MODES)}, not {mode!r}")
    home = directory / "security"
    home.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create()
    truststore = ca.write_truststore(home / "ca.pem")
    key_password = secrets.token_urlsafe(12)
    broker_keystore = ca.write_keystore(home / "broker.pem", BROKER_USER, password=key_password)
    client_keystore = ca.write_keystore(home / "client.pem", "client")
    tls = {
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore),
    }
    broker_settings = {
        **tls,
        "ssl.keystore.location": str(broker_keystore),
        "ssl.key.password": key_password,
        "ssl.client.auth": "required" if mode == "tls" else "requested",
    }
    client_properties = {**tls, "ssl.keystore.location": str(client_keystore)}
    protocol = "SSL"
    if mode == "sasl":
        protocol = "SASL_SSL"
        broker_settings |= {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": jaas_entry(BROKER_USER, secrets.token_urlsafe(16)),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }
        client_properties |= {
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas_entry(ADMIN_USER, admin_password or secrets.token_urlsafe(16)),
        }
    client_properties["security.protocol"] = protocol
    security = ClusterSecurity(protocol, broker_settings, client_properties, directory / CLIENT_CONFIG)
    _write(home / _BROKER_CONFIG, broker_settings)
    _write(security.client_config, client_properties)
    return security


def load_cluster_security(directory: Path) -> ClusterSecurity | None:
    """What `make_cluster_security` wrote in `directory`; None if it wrote nothing there."""
    broker_config = directory / "security" / _BROKER_CONFIG
    client_config = directory / CLIENT_CONFIG
    if not broker_config.exists() or not client_config.exists():
        return None
    broker_settings, client_properties = _read(broker_config), _read(client_config)
    return ClusterSecurity(
        client_properties["security.protocol"], broker_settings, client_properties, client_config
    )


def _write(path: Path, properties: dict[str, str]) -> None:
    with private(path).open("w", encoding="utf-8") as f:
        javaproperties.dump(properties, f, timestamp=False)


def _read(path: Path) -> dict[str, str]:
    with path.open(encoding="utf-8") as f:
        properties: dict[str, str] = javaproperties.load(f)
    return properties
