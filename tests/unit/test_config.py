"""Broker configuration: Kafka's names, checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.broker.config import load_config
from node.config.properties import ConfigError, parse_overrides, read_properties

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/keel"}


def test_defaults_are_kafkas() -> None:
    config = load_config(BASE)
    assert config.broker_id == 1
    assert config.session_timeout_s == 18.0
    assert config.connection_timeout_s == 18.0, "unset connection timeout follows the session timeout"
    assert config.get_int("socket.request.max.bytes") == 104857600
    assert config.get_bool("unclean.leader.election.enable") is False
    assert [(listener.listener, listener.host, listener.port) for listener in config.listeners] == [
        ("PLAINTEXT", "", 9092)
    ]
    assert config.rack is None


def test_properties_file_syntax(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# comment\n! also a comment\n\nbroker.id = 4\nzookeeper.connect:127.0.0.1:2181\n"
        "listeners=PLAINTEXT://127.0.0.1:0,\\\n  INTERNAL://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\nbroker.rack=r2\n"
    )
    config = load_config(read_properties(path))
    assert config.broker_id == 4
    assert [listener.listener for listener in config.listeners] == ["PLAINTEXT", "INTERNAL"]
    assert config.rack == "r2"


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        ({"zookeeper.connect": "x:1"}, "broker.id", "is required"),
        ({"broker.id": "1"}, "zookeeper.connect", "is required"),
        ({**BASE, "broker.id": "one"}, "broker.id", "not an integer"),
        ({**BASE, "broker.id": "-3"}, "broker.id", "outside"),
        ({**BASE, "zookeeper.session.timeout.ms": "0"}, "zookeeper.session.timeout.ms", "outside"),
        (
            {**BASE, "unclean.leader.election.enable": "yes"},
            "unclean.leader.election.enable",
            "true or false",
        ),
        ({**BASE, "listeners": "127.0.0.1:9092"}, "listeners", "NAME://host:port"),
        ({**BASE, "listeners": "PLAINTEXT://h:99999"}, "listeners", "outside 0..65535"),
        (
            {**BASE, "listeners": "SSL://h:1", "security.inter.broker.protocol": "SSL"},
            "ssl.keystore.location",
            "required on a TLS listener",
        ),
        ({**BASE, "advertised.listeners": "OTHER://h:1"}, "advertised.listeners", "not in listeners"),
    ],
)
def test_bad_values_name_their_key(props: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(props)
    assert caught.value.key == key


def test_overrides_and_unknown_keys() -> None:
    props = {**BASE, "made.up.key": "1"}
    props.update(parse_overrides(["broker.id=7", "broker.rack = east"]))
    config = load_config(props)
    assert (config.broker_id, config.rack, config.unknown) == (7, "east", ("made.up.key",))
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["broker.id"])


def test_advertised_endpoint_uses_the_bound_port_unless_advertised() -> None:
    config = load_config({**BASE, "listeners": "PLAINTEXT://127.0.0.1:0"})
    endpoint = config.endpoint(config.listeners[0], 41234)
    assert (endpoint.host, endpoint.port, str(endpoint)) == (
        "127.0.0.1",
        41234,
        "PLAINTEXT://127.0.0.1:41234",
    )
    config = load_config(
        {**BASE, "listeners": "PLAINTEXT://:0", "advertised.listeners": "PLAINTEXT://kafka1:9092"}
    )
    assert str(config.endpoint(config.listeners[0], 41234)) == "PLAINTEXT://kafka1:9092"


def test_properties_comments_do_not_continue_and_escapes_are_read(tmp_path: Path) -> None:
    # A comment ending in a backslash is still only a comment: the next line is a property.
    path = tmp_path / "server.properties"
    path.write_text(
        "# log.dirs=/old \\\nbroker.id=3\nzookeeper.connect 127.0.0.1:2181\nbroker.rack=r\\u0031\\:a\n"
    )
    props = read_properties(path)
    assert props == {"broker.id": "3", "zookeeper.connect": "127.0.0.1:2181", "broker.rack": "r1:a"}


def test_leader_rebalance_keys_default_to_kafkas_and_are_checked() -> None:
    config = load_config(BASE)
    assert config.get_bool("auto.leader.rebalance.enable") is True
    assert config.get_int("leader.imbalance.check.interval.seconds") == 300
    assert config.get_int("leader.imbalance.per.broker.percentage") == 10
    for key, bad in (
        ("auto.leader.rebalance.enable", "yes"),
        ("leader.imbalance.check.interval.seconds", "0"),
        ("leader.imbalance.per.broker.percentage", "101"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config({**BASE, key: bad})
