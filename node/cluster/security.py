"""Security for a local cluster (`keel-cluster up --security tls|sasl`): a CA and certificates
under the cluster's directory, the brokers' TLS and SASL properties, an admin user, and the
`client.properties` a client passes as `--command-config`.

    tls   every broker listens on SSL (inter-broker too); clients verify the brokers against
          the cluster's CA and present a certificate of their own (principal User:client).
    sasl  SASL_SSL: TLS as above, and SCRAM-SHA-512 as the admin user.

The admin user is created through `create_user`, the one place that decides where credentials
live: for now the `user_<name>` options of the brokers' `sasl.jaas.config`, which each broker
reads into its in-memory credential table; the ZooKeeper store (`/config/users/<name>`) will
take its place there.
"""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

import javaproperties

from node.cluster.certificates import CertificateAuthority
from node.security.jaas import SCRAM_LOGIN_MODULE

SECURITY_MODES = ("tls", "sasl")
ADMIN_USER = "admin"
MECHANISM = "SCRAM-SHA-512"


@dataclasses.dataclass(frozen=True)
class ClusterSecurity:
    """What a secured local cluster needs: `protocol` for its listeners, `broker_settings`
    for every broker, and `client_properties` for a client (written to `client_config`)."""

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


def jaas_entry(username: str, password: str, *, module: str = SCRAM_LOGIN_MODULE, **users: str) -> str:
    """A `sasl.jaas.config` value in Kafka's syntax (values quoted and escaped)."""
    options = {"username": username, "password": password, **{f"user_{k}": v for k, v in users.items()}}
    rendered = " ".join(f'{key}="{_escape(value)}"' for key, value in options.items())
    return f"{module} required {rendered};"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def create_user(broker_settings: dict[str, str], username: str, password: str) -> None:
    """Give the cluster a SCRAM user. The seam where credentials are stored: today the
    brokers' in-memory tables, filled from their `sasl.jaas.config`'s `user_<name>` options."""
    entry = broker_settings["sasl.jaas.config"].rstrip().removesuffix(";")
    broker_settings["sasl.jaas.config"] = f'{entry} user_{username}="{_escape(password)}";'


def make_cluster_security(
    directory: Path, mode: str, *, admin_password: str | None = None
) -> ClusterSecurity:
    """Create the CA, the brokers' and the client's certificates under `directory/security`,
    and (for sasl) the admin user; write `client.properties` there."""
    if mode not in SECURITY_MODES:
        raise ValueError(f"--security must be one of {', '.join(SECURITY_MODES)}, not {mode!r}")
    home = directory / "security"
    home.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create()
    truststore = ca.write_truststore(home / "ca.pem")
    key_password = secrets.token_urlsafe(12)
    broker_keystore = ca.write_keystore(home / "broker.pem", "broker", password=key_password)
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
        password = admin_password or secrets.token_urlsafe(16)
        broker_settings |= {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": jaas_entry(ADMIN_USER, password),
        }
        create_user(broker_settings, ADMIN_USER, password)
        client_properties |= {
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas_entry(ADMIN_USER, password),
        }
    client_properties["security.protocol"] = protocol
    client_config = home / "client.properties"
    with client_config.open("w", encoding="utf-8") as f:
        javaproperties.dump(client_properties, f, timestamp=False)
    client_config.chmod(0o600)
    return ClusterSecurity(protocol, broker_settings, client_properties, client_config)
