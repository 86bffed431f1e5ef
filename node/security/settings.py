"""Kafka's security properties, read into the wire's TLS and SASL settings.

The same names serve every process: a broker's and the planner's listeners
(`ssl.keystore.*`, `ssl.truststore.*`, `ssl.client.auth`, `sasl.enabled.mechanisms`,
`connection.failed.authentication.delay.ms`, the PLAIN users of
`listener.name.<listener>.plain.sasl.jaas.config`), a broker's own identity towards the other
brokers (`sasl.mechanism.inter.broker.protocol`, `sasl.jaas.config`, the same `ssl.*`), and a
client's properties file (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.*`:
the `--command-config` of Kafka's tools). A bad value raises SettingError naming the key.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from node.security.jaas import JaasConfigError, plain_users, sasl_credentials
from wire.context import ANONYMOUS
from wire.endpoint import Endpoint
from wire.sasl import PLAIN, SASL_MECHANISMS, CredentialLookup
from wire.security import SECURITY_PROTOCOLS, ClientSecurity, ListenerSecurity, uses_sasl, uses_tls
from wire.tls import CLIENT_AUTH, TlsConfigError, TlsFiles, client_context, server_context

# Kafka's names, with Keel's defaults where Kafka's name GSSAPI (which Keel does not speak).
TLS_DEFAULTS = {
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "",
    "ssl.client.auth": "none",
    "ssl.endpoint.identification.algorithm": "https",
}
LISTENER_DEFAULTS = {
    **TLS_DEFAULTS,
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "connection.failed.authentication.delay.ms": "100",
}
# The keys of Kafka's client properties that Keel's clients read.
CLIENT_KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", *TLS_DEFAULTS)

Get = Callable[[str], str]

# Kafka's listener-prefixed JAAS entry of a SASL/PLAIN listener (the listener's name in lower
# case), whose PlainLoginModule `user_<name>` options are the users PLAIN accepts there.
_PLAIN_JAAS_KEY = re.compile(r"listener\.name\.[^.]+\.plain\.sasl\.jaas\.config")


def is_plain_jaas_key(key: str) -> bool:
    return _PLAIN_JAAS_KEY.fullmatch(key) is not None


def plain_jaas_key(listener: Endpoint) -> str:
    return f"listener.name.{listener.listener.lower()}.plain.sasl.jaas.config"


class SettingError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


def getter(values: Mapping[str, object], defaults: Mapping[str, str]) -> Get:
    """Look a key up in parsed or raw properties, falling back to its default; unset is ""."""

    def get(key: str) -> str:
        value = values.get(key)
        return defaults.get(key, "") if value is None else str(value).strip()

    return get


def security_protocol(key: str, raw: str) -> str:
    protocol = raw.strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SettingError(key, f"{raw!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    return protocol


def sasl_mechanisms(key: str, raw: str) -> tuple[str, ...]:
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unsupported or not mechanisms:
        raise SettingError(
            key,
            f"{raw!r}: Keel supports {', '.join(SASL_MECHANISMS)} (not {', '.join(unsupported) or 'none'})",
        )
    return mechanisms


def tls_files(get: Get) -> TlsFiles:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(key).upper() != "PEM":
            raise SettingError(key, f"{get(key)!r}: only PEM files are supported")
    client_auth = get("ssl.client.auth").lower()
    if client_auth not in CLIENT_AUTH:
        raise SettingError("ssl.client.auth", f"{client_auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    return TlsFiles(
        keystore_location=get("ssl.keystore.location") or None,
        key_password=get("ssl.key.password") or None,
        truststore_location=get("ssl.truststore.location") or None,
        client_auth=client_auth,
        endpoint_identification=get("ssl.endpoint.identification.algorithm"),
    )


def _tls(build: Callable[[TlsFiles], ssl.SSLContext], files: TlsFiles) -> ssl.SSLContext:
    try:
        return build(files)
    except TlsConfigError as e:
        raise SettingError(e.key, e.message) from None


def listener_security(listener: Endpoint, get: Get, credentials: CredentialLookup) -> ListenerSecurity:
    """A listener's server side, from the process's properties; `credentials` is where its
    SCRAM users are looked up (the cache of `/config/users`)."""
    context = _tls(server_context, tls_files(get)) if uses_tls(listener.security_protocol) else None
    delay = get("connection.failed.authentication.delay.ms")
    if not delay.isdigit():
        raise SettingError("connection.failed.authentication.delay.ms", f"{delay!r} is not a whole number")
    mechanisms = sasl_mechanisms("sasl.enabled.mechanisms", get("sasl.enabled.mechanisms"))
    return ListenerSecurity(
        listener_name=listener.listener,
        security_protocol=listener.security_protocol,
        ssl_context=context,
        sasl_mechanisms=mechanisms,
        credentials=credentials,
        plain_users=listener_plain_users(listener, get) if PLAIN in mechanisms else {},
        failed_authentication_delay_ms=int(delay),
    )


def listener_plain_users(listener: Endpoint, get: Get) -> dict[str, str]:
    """The users SASL/PLAIN accepts on `listener`, as Kafka's PlainServerCallbackHandler
    finds them: the `user_<name>="<password>"` options of the PlainLoginModule entry of
    `listener.name.<listener>.plain.sasl.jaas.config`, else of `sasl.jaas.config`."""
    key = plain_jaas_key(listener)
    jaas = get(key)
    if not jaas:
        key, jaas = "sasl.jaas.config", get("sasl.jaas.config")
    if not jaas or not uses_sasl(listener.security_protocol):
        return {}
    try:
        return plain_users(jaas)
    except JaasConfigError as e:
        raise SettingError(key, str(e)) from None


def check_listener_security(listener: Endpoint, get: Get) -> None:
    """What `listener_security` would refuse, found while the configuration is read."""
    files = tls_files(get)
    if uses_tls(listener.security_protocol):
        _tls(server_context, files)
    if uses_sasl(listener.security_protocol):
        sasl_mechanisms("sasl.enabled.mechanisms", get("sasl.enabled.mechanisms"))
        listener_plain_users(listener, get)


def client_security(protocol: str, mechanism: str, get: Get, *, mechanism_key: str) -> ClientSecurity:
    """A client's side: TLS from the ssl.* keys when `protocol` uses it, the SASL identity of
    `sasl.jaas.config` for `mechanism` when it uses SASL."""
    context = _tls(client_context, tls_files(get)) if uses_tls(protocol) else None
    credentials = None
    if uses_sasl(protocol):
        if not mechanism or mechanism.upper() not in SASL_MECHANISMS:
            raise SettingError(
                mechanism_key, f"{mechanism or 'unset'}: set one of {', '.join(SASL_MECHANISMS)}"
            )
        jaas = get("sasl.jaas.config")
        if not jaas:
            raise SettingError("sasl.jaas.config", f"{protocol} needs the client's login module entry")
        try:
            credentials = sasl_credentials(mechanism.upper(), jaas)
        except JaasConfigError as e:
            raise SettingError("sasl.jaas.config", str(e).removeprefix("sasl.jaas.config: ")) from None
    return ClientSecurity(security_protocol=protocol, ssl_context=context, sasl=credentials)


def client_security_from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """Kafka's client properties (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
    `ssl.*`), as `--command-config` gives them."""
    get = getter(props, TLS_DEFAULTS)
    protocol = security_protocol("security.protocol", get("security.protocol") or "PLAINTEXT")
    return client_security(protocol, get("sasl.mechanism"), get, mechanism_key="sasl.mechanism")


def inter_broker_principal(security: ClientSecurity, get: Get) -> str:
    """Whom the other brokers see on this broker's inter-broker connections, and so the
    identity of the requests it hands itself: the SASL user of `sasl.jaas.config`; on SSL,
    when the listeners ask for client certificates, `User:<CN>` of its own certificate (as
    wire/tls.py names a client's); else User:ANONYMOUS."""
    if security.sasl is not None:
        return f"User:{security.sasl.username}"
    keystore = get("ssl.keystore.location")
    if security.security_protocol == "SSL" and keystore and get("ssl.client.auth").lower() != "none":
        try:
            certificate = x509.load_pem_x509_certificate(Path(keystore).read_bytes())
        except (OSError, ValueError) as e:
            raise SettingError("ssl.keystore.location", f"{keystore}: no PEM certificate: {e}") from None
        names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if names:
            return f"User:{names[0].value!s}"
    return ANONYMOUS
