"""What a connection's security is made of, on either end: Kafka's four security protocols,
a listener's settings (its TLS context, its SASL mechanisms and credential lookup) and a
client's (its TLS context, its SASL identity).

The one server (`wire/server.py`) and the one connection pool (`wire/pool.py`) read these;
which of them applies to a connection is the endpoint's security protocol, never the caller's
choice.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping

from wire.credentials import SCRAM_MECHANISMS
from wire.endpoint import Endpoint
from wire.sasl import CredentialLookup, SaslCredentials

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's connection.failed.authentication.delay.ms default.
FAILED_AUTHENTICATION_DELAY_MS = 100


def uses_tls(security_protocol: str) -> bool:
    return security_protocol in ("SSL", "SASL_SSL")


def uses_sasl(security_protocol: str) -> bool:
    return security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def no_credentials(username: str, mechanism: str) -> None:
    """The lookup of a SASL listener given none: nobody can authenticate."""
    return None


@dataclasses.dataclass(frozen=True)
class ListenerSecurity:
    """One listener's security: its name and protocol (which every request's context
    carries), the TLS context of SSL and SASL_SSL, and for SASL_* the enabled mechanisms,
    where SCRAM credentials are looked up, and the PLAIN users' passwords (Kafka's
    `user_<name>` options of the listener's PlainLoginModule entry)."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = SCRAM_MECHANISMS
    credentials: CredentialLookup = no_credentials
    plain_users: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)
    failed_authentication_delay_ms: int = FAILED_AUTHENTICATION_DELAY_MS

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.security_protocol!r}")
        if uses_tls(self.security_protocol) and self.ssl_context is None:
            raise ValueError(f"listener {self.listener_name} ({self.security_protocol}) needs a TLS context")


PLAINTEXT_LISTENER = ListenerSecurity()


@dataclasses.dataclass(frozen=True)
class ClientSecurity:
    """A client's security (Kafka's client `security.protocol`, `ssl.*`, `sasl.*`).

    `security_protocol` is what the client's bootstrap servers speak (`endpoint` stamps it on
    the addresses it learns); a connection uses TLS and SASL as its endpoint's protocol says.
    Without a TLS context, a TLS connection trusts the system's CAs."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.security_protocol!r}")

    def endpoint(self, host: str, port: int) -> Endpoint:
        """An address learnt from a broker (bootstrap, metadata), as this client dials it."""
        return Endpoint(self.security_protocol, self.security_protocol, host, port)

    def tls_context(self) -> ssl.SSLContext:
        if self.ssl_context is None:
            return ssl.create_default_context()
        return self.ssl_context


PLAINTEXT_CLIENT = ClientSecurity()
