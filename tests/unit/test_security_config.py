"""Listener and security properties checked before a broker starts, each failure naming its
key; and the principal a verified client certificate gives a connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from node.broker.config import load_config
from node.cluster.security import ClusterSecurity, jaas_entry, load_cluster_security, make_cluster_security
from node.config.properties import ConfigError
from node.security.jaas import PLAIN_LOGIN_MODULE
from node.security.settings import (
    LISTENER_DEFAULTS,
    SettingError,
    client_security_from_properties,
    getter,
    listener_security,
)
from wire.api import ApiVersionsRequest, ApiVersionsResponse, Response
from wire.client import RpcClient
from wire.context import RequestContext
from wire.envelope import ParsedRequest
from wire.security import ListenerSecurity
from wire.server import RpcServer
from wire.tls import TlsFiles, server_context

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/keel"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClusterSecurity:
    return make_cluster_security(tmp_path_factory.mktemp("pki"), "sasl", admin_password="pw")


def test_named_listeners_and_the_inter_broker_listener(pki: ClusterSecurity) -> None:
    config = load_config(
        {
            **BASE,
            **pki.broker_settings,
            "listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert [(e.listener, e.security_protocol) for e in config.listeners] == [
        ("CLIENT", "SSL"),
        ("INTERNAL", "SASL_SSL"),
    ]
    assert config.inter_broker_listener == "INTERNAL"
    sasl = config.inter_broker_security.sasl
    assert sasl is not None and (sasl.mechanism, sasl.username) == ("SCRAM-SHA-512", "broker")
    assert config.inter_broker_principal == "User:broker"

    assert config.inter_broker_security.ssl_context is not None


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        (
            {
                "listeners": "PLAINTEXT://:1",
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "inter.broker.listener.name",
            "only one of",
        ),
        (
            {"listeners": "CLIENT://:1"},
            "listener.security.protocol.map",
            "no security protocol for listener CLIENT",
        ),
        ({"listeners": "SSL://:1"}, "security.inter.broker.protocol", "PLAINTEXT is not a listener"),
        ({"security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol", "not one of"),
        (
            {
                "listeners": "SASL_SSL://:1",
                "security.inter.broker.protocol": "SASL_SSL",
                "sasl.jaas.config": "",
            },
            "sasl.jaas.config",
            "needs the client's login module entry",
        ),
        (
            {
                "listeners": "SASL_SSL://:1",
                "security.inter.broker.protocol": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "GSSAPI",
            },
            "sasl.mechanism.inter.broker.protocol",
            "GSSAPI",
        ),
        (
            {"listeners": "PLAINTEXT://:1,SSL://:2", "ssl.keystore.location": "/nonexistent.pem"},
            "ssl.keystore.location",
            "no such file",
        ),
        (
            {"listeners": "PLAINTEXT://:1,SSL://:2", "ssl.keystore.type": "JKS"},
            "ssl.keystore.type",
            "only PEM",
        ),
        (
            {"listeners": "PLAINTEXT://:1,SSL://:2", "ssl.client.auth": "maybe"},
            "ssl.client.auth",
            "not one of",
        ),
        (
            {"listeners": "PLAINTEXT://:1,SSL://:2", "ssl.key.password": "wrong"},
            "ssl.keystore.location",
            "password",
        ),
        (
            {"listeners": "PLAINTEXT://:1,SASL_SSL://:2", "sasl.enabled.mechanisms": "GSSAPI"},
            "sasl.enabled.mechanisms",
            "GSSAPI",
        ),
        (
            {
                "listeners": "PLAINTEXT://:1,SASL_SSL://:2",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": f"{PLAIN_LOGIN_MODULE} required user_a=",
            },
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "a value for user_a",
        ),
    ],
)
def test_bad_security_settings_name_their_key(
    pki: ClusterSecurity, props: dict[str, str], key: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_config({**BASE, **pki.broker_settings, **props})
    assert caught.value.key == key


def test_client_properties(pki: ClusterSecurity) -> None:
    security = client_security_from_properties(pki.client_properties)
    assert security.security_protocol == "SASL_SSL" and security.ssl_context is not None
    assert security.sasl is not None and security.sasl.username == "admin"
    assert client_security_from_properties({}).security_protocol == "PLAINTEXT"
    with pytest.raises(SettingError, match=r"sasl\.mechanism"):
        client_security_from_properties(
            {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas_entry("a", "b")}
        )
    with pytest.raises(SettingError, match=r"security\.protocol"):
        client_security_from_properties({"security.protocol": "TLS"})


@pytest.fixture
async def mutual_tls(pki: ClusterSecurity) -> AsyncIterator[tuple[RpcServer, list[RequestContext]]]:
    seen: list[RequestContext] = []

    async def handler(request: ParsedRequest) -> Response:
        seen.append(request.context)
        return ApiVersionsResponse()

    settings = pki.broker_settings
    context = server_context(
        TlsFiles(
            settings["ssl.keystore.location"],
            settings["ssl.key.password"],
            settings["ssl.truststore.location"],
            client_auth="requested",
        )
    )
    server = RpcServer(handler, "127.0.0.1", 0, security=ListenerSecurity("CLIENT", "SSL", context))
    await server.start()
    yield server, seen
    await server.close()


async def test_a_client_certificate_names_the_principal(
    pki: ClusterSecurity, mutual_tls: tuple[RpcServer, list[RequestContext]]
) -> None:
    server, seen = mutual_tls
    with_certificate = client_security_from_properties({**pki.client_properties, "security.protocol": "SSL"})
    props = {k: v for k, v in pki.client_properties.items() if k != "ssl.keystore.location"}
    without = client_security_from_properties({**props, "security.protocol": "SSL"})
    for security in (with_certificate, without):
        client = await RpcClient.connect("127.0.0.1", server.port, security_protocol="SSL", security=security)
        await client.send(ApiVersionsRequest())
        await client.close()
    assert [(c.principal, c.listener_name, c.security_protocol) for c in seen] == [
        ("User:client", "CLIENT", "SSL"),
        ("User:ANONYMOUS", "CLIENT", "SSL"),
    ]


def test_client_properties_file_is_written(pki: ClusterSecurity) -> None:
    text = Path(pki.client_config).read_text()
    assert "security.protocol=SASL_SSL" in text and "sasl.mechanism=SCRAM-SHA-512" in text
    assert Path(pki.client_config).stat().st_mode & 0o077 == 0, "it holds a password"
    assert load_cluster_security(Path(pki.client_config).parent) == pki
    # The users to create in /config/users: the brokers' own and the client's.
    assert set(pki.users) == {"admin", "broker"} and pki.users["admin"] == "pw"
    assert pki.broker_settings["super.users"] == "User:admin;User:broker"


def test_plain_users_are_the_listeners_plain_login_module_entry(pki: ClusterSecurity) -> None:
    settings = {
        **BASE,
        **pki.broker_settings,
        "listeners": "INTERNAL://127.0.0.1:1,EXTERNAL://127.0.0.1:2",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.external.plain.sasl.jaas.config": (
            f'{PLAIN_LOGIN_MODULE} required username="b" password="b" user_carol="c";'
        ),
    }
    config = load_config(settings)
    assert config.unknown == (), "Kafka's listener-prefixed key is known"
    get = getter(config.values, LISTENER_DEFAULTS)
    internal, external = config.listeners
    assert listener_security(external, get, lambda u, m: None).plain_users == {"carol": "c"}
    # The internal listener has none: sasl.jaas.config is a ScramLoginModule entry.
    assert listener_security(internal, get, lambda u, m: None).plain_users == {}


@pytest.mark.parametrize(
    ("props", "principal"),
    [
        ({"listeners": "SSL://:1", "security.inter.broker.protocol": "SSL"}, "User:ANONYMOUS"),
        (
            {"listeners": "SSL://:1", "security.inter.broker.protocol": "SSL", "ssl.client.auth": "required"},
            "User:broker",
        ),
        ({"listeners": "PLAINTEXT://:1"}, "User:ANONYMOUS"),
    ],
)
def test_the_inter_broker_principal(pki: ClusterSecurity, props: dict[str, str], principal: str) -> None:
    """Whom the other brokers see: the SASL user, else the certificate's CN when the listeners
    ask for one, else ANONYMOUS; the broker's in-process requests carry the same."""
    settings = {**pki.broker_settings, "ssl.client.auth": "none", **props}
    assert load_config({**BASE, **settings}).inter_broker_principal == principal


def test_the_planner_of_a_secured_local_cluster_takes_the_brokers_settings(pki: ClusterSecurity) -> None:
    from node.planner.config import load_config as load_planner_config

    config = load_planner_config({"zookeeper.connect": "127.0.0.1:2181", **pki.planner_settings(9999)})
    assert config.unknown == ()
    assert (config.listener.security_protocol, config.listener.port) == ("SASL_SSL", 9999)
    sasl = config.client_security.sasl
    assert sasl is not None and (sasl.mechanism, sasl.username) == ("SCRAM-SHA-512", "broker")
