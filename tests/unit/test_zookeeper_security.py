"""ZooKeeper security without a server: the JAAS file a Kafka operator has, Kafka's ACL for
each path, and the start-up errors of a configuration that cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.broker.config import load_config
from node.config.properties import ConfigError
from node.security.jaas import JaasConfigError, parse_jaas_config, parse_jaas_file
from node.zk.acls import (
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    DigestCredentials,
    ZkSecurityError,
    default_acls,
    read_credentials,
)

KAFKA_JAAS = """
// What a Kafka broker's jaas.conf holds, with the ZooKeeper client's section.
KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule required
    username="admin"
    password="admin-secret";
};
/* ZooKeeper: DigestLoginModule,
   as Kafka's docs show it */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="keel"
    password="p;w=\\"x\\"";
};
"""


def test_a_kafka_jaas_file_gives_every_section_with_its_options() -> None:
    sections = parse_jaas_file(KAFKA_JAAS)
    assert sorted(sections) == ["Client", "KafkaServer"]
    client = sections["Client"][0]
    assert client.login_module == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert client.control_flag == "required"
    assert client.options == {"username": "keel", "password": 'p;w="x"'}


def test_kafka_sasl_jaas_config_is_the_modules_of_one_section() -> None:
    (module,) = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
    )
    assert (module.control_flag, module.options) == ("required", {"username": "a", "password": "b"})


@pytest.mark.parametrize(
    "text",
    [
        "Client { DigestLoginModule required username=a }",  # no ';'
        "Client { DigestLoginModule mandatory username=a; };",  # not a flag
        "Client { DigestLoginModule required username; };",  # no value
        "Client DigestLoginModule required;",  # no brace
        "Client { DigestLoginModule required username=a;",  # not closed
    ],
)
def test_a_malformed_jaas_file_is_refused(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_file(text)


def test_credentials_come_from_the_client_section(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(KAFKA_JAAS)
    assert read_credentials(path) == DigestCredentials("keel", 'p;w="x"')
    assert "p;w" not in repr(read_credentials(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("KafkaServer { X required a=b; };", "no Client section"),
        (
            "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };",
            "only with org.apache.zookeeper.server.auth.DigestLoginModule",
        ),
        ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=a; };", "password"),
        ("Client {", "closing section Client"),
    ],
)
def test_unusable_credentials_say_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(ZkSecurityError, match=message):
        read_credentials(path)


def _acls(path: str, secure: bool) -> list[tuple[int, str, str]]:
    return [(a.perms, a.id.scheme, a.id.id) for a in default_acls(path, secure)]


def _as_tuples(*acls: object) -> list[tuple[int, str, str]]:
    return [(a.perms, a.id.scheme, a.id.id) for a in acls]  # type: ignore[attr-defined]


def test_default_acls_are_kafkas() -> None:
    creator_and_readers = _as_tuples(CREATOR_ALL_ACL, READ_ACL_UNSAFE)
    assert _acls("/brokers/topics/t/partitions/0/state", True) == creator_and_readers
    assert _acls("/controller", True) == creator_and_readers
    assert _acls("/", True) == creator_and_readers
    # Credentials and broker configs: nobody else reads them.
    assert _acls("/config/users", True) == _as_tuples(CREATOR_ALL_ACL)
    assert _acls("/config/users/alice", True) == _as_tuples(CREATOR_ALL_ACL)
    assert _acls("/config/brokers/1", True) == _as_tuples(CREATOR_ALL_ACL)
    assert _acls("/config/topics/t", True) == creator_and_readers
    # Old consumers write there, as Kafka leaves it.
    assert _acls("/consumers", True) == _as_tuples(OPEN_ACL_UNSAFE)
    assert _acls("/config/users/alice", False) == _as_tuples(OPEN_ACL_UNSAFE)
    assert CREATOR_ALL_ACL.perms == 31 and READ_ACL_UNSAFE.perms == 1


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path), **extra}


def test_set_acl_without_credentials_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"zookeeper.set.acl: is true, but no ZooKeeper credentials"):
        load_config(_props(tmp_path, **{"zookeeper.set.acl": "true"}))


def test_zookeeper_tls_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"zookeeper.ssl.client.enable: TLS to ZooKeeper is not supported"):
        load_config(_props(tmp_path, **{"zookeeper.ssl.client.enable": "true"}))


def test_a_broker_reads_its_zookeeper_identity_from_the_jaas_file(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(KAFKA_JAAS.replace("Client {", "ZkClient {"))
    props = _props(
        tmp_path,
        **{
            "zookeeper.set.acl": "true",
            "java.security.auth.login.config": str(jaas),
            "zookeeper.sasl.clientconfig": "ZkClient",
        },
    )
    security = load_config(props).zookeeper_security
    assert security.set_acl and security.credentials == DigestCredentials("keel", 'p;w="x"')
    with pytest.raises(ConfigError, match=r"java.security.auth.login.config: cannot read"):
        load_config({**props, "java.security.auth.login.config": str(tmp_path / "missing.conf")})
