"""Dynamic config decisions: resource names, set and delete, validation (a negative rate or a
malformed throttled-replicas list is INVALID_CONFIG and nothing applies), and what
DescribeConfigs shows for a broker."""

from __future__ import annotations

import pytest

from actors.admin.config_admin import (
    ConfigError,
    apply_operations,
    effective_broker_configs,
    entity_for,
    throttle_rates,
)
from wire.api import AlterableConfig
from wire.errors import ErrorCode

SET, DELETE = 0, 1


def op(name: str, value: str | None = None, operation: int = SET) -> AlterableConfig:
    return AlterableConfig(name=name, config_operation=operation, value=value)


def test_resources_name_their_znodes() -> None:
    assert entity_for(2, "t") == ("topics", "t")
    assert entity_for(4, "") == ("brokers", "<default>")
    assert entity_for(4, "<default>") == ("brokers", "<default>")
    assert entity_for(4, "7") == ("brokers", "7")
    for resource_type, name in ((4, "x"), (4, "-1"), (3, "c"), (2, "")):
        with pytest.raises(ConfigError) as e:
            entity_for(resource_type, name)
        assert e.value.code == ErrorCode.INVALID_REQUEST


def test_set_and_delete() -> None:
    current = {"leader.replication.throttled.rate": "100", "follower.replication.throttled.rate": "5"}
    assert apply_operations(
        "brokers",
        current,
        [
            op("leader.replication.throttled.rate", "2000"),
            op("follower.replication.throttled.rate", None, DELETE),
        ],
    ) == {"leader.replication.throttled.rate": "2000"}
    assert current["follower.replication.throttled.rate"] == "5", "the input is not changed"
    topic = apply_operations("topics", {}, [op("leader.replication.throttled.replicas", "0:1,1:2")])
    assert topic == {"leader.replication.throttled.replicas": "0:1,1:2"}
    assert apply_operations("topics", topic, [op("follower.replication.throttled.replicas", "*")]) == {
        "leader.replication.throttled.replicas": "0:1,1:2",
        "follower.replication.throttled.replicas": "*",
    }


@pytest.mark.parametrize(
    ("entity_type", "operations", "code"),
    [
        ("brokers", [op("leader.replication.throttled.rate", "-1")], ErrorCode.INVALID_CONFIG),
        ("brokers", [op("leader.replication.throttled.rate", "fast")], ErrorCode.INVALID_CONFIG),
        ("brokers", [op("log.dirs", "/tmp")], ErrorCode.INVALID_CONFIG),
        ("brokers", [op("leader.replication.throttled.rate")], ErrorCode.INVALID_CONFIG),
        ("topics", [op("leader.replication.throttled.replicas", "0-1")], ErrorCode.INVALID_CONFIG),
        ("topics", [op("follower.replication.throttled.replicas", "*,0:1")], ErrorCode.INVALID_CONFIG),
        ("topics", [op("no.such.config", "1")], ErrorCode.INVALID_CONFIG),
        ("topics", [op("retention.ms", "1"), op("retention.ms", "2")], ErrorCode.INVALID_REQUEST),
        ("topics", [op("retention.ms", "1", 7)], ErrorCode.INVALID_REQUEST),
        ("topics", [op("retention.ms", "1", 2)], ErrorCode.INVALID_CONFIG),  # APPEND to a number
        ("topics", [op("cleanup.policy", "never", 2)], ErrorCode.INVALID_CONFIG),
    ],
)
def test_bad_values_are_refused(entity_type: str, operations: list[AlterableConfig], code: ErrorCode) -> None:
    with pytest.raises(ConfigError) as e:
        apply_operations(entity_type, {}, operations)
    assert e.value.code == code and e.value.message


def test_a_broker_shows_its_own_values_over_the_cluster_defaults() -> None:
    own = {"leader.replication.throttled.rate": "10"}
    defaults = {"leader.replication.throttled.rate": "20", "follower.replication.throttled.rate": "30"}
    assert effective_broker_configs(own, defaults) == {
        "leader.replication.throttled.rate": ("10", 2),
        "follower.replication.throttled.rate": ("30", 3),
    }
    assert throttle_rates(own, defaults) == (10, 30)
    assert throttle_rates({}, {}) == (None, None)


def test_describe_shows_every_setting_with_its_source_and_hides_secrets() -> None:
    from node.broker.config import load_config
    from node.broker.config_admin import is_sensitive

    config = load_config(
        {
            "broker.id": "1",
            "zookeeper.connect": "127.0.0.1:2181",
            "log.retention.ms": "1000",
            "listeners": "PLAINTEXT://127.0.0.1:9092",
        }
    )
    described = config.described()
    assert described["log.retention.ms"] == ("1000", 4)  # STATIC_BROKER_CONFIG
    assert described["log.retention.bytes"] == ("-1", 5)  # DEFAULT_CONFIG
    assert described["auto.create.topics.enable"] == ("true", 5)
    topic = config.topic_config_defaults()
    assert topic["retention.ms"] == ("1000", 4), "a topic falls back to the broker's setting"
    assert topic["max.message.bytes"] == ("1048588", 5)
    assert topic["cleanup.policy"] == ("delete", 5)
    assert {
        "ssl.keystore.password",
        "sasl.jaas.config",
        "listener.name.x.scram-sha-256.sasl.jaas.config",
    } == {
        key
        for key in (
            "ssl.keystore.password",
            "sasl.jaas.config",
            "listener.name.x.scram-sha-256.sasl.jaas.config",
            "ssl.keystore.location",
        )
        if is_sensitive(key)
    }


def test_append_and_subtract_change_list_configs_from_their_value_or_default() -> None:
    """KIP-339: APPEND (2) adds items not there yet, SUBTRACT (3) removes them; an unset list
    config starts from its default (cleanup.policy: delete), and the list may end empty."""
    assert apply_operations("topics", {}, [op("cleanup.policy", "compact", 2)]) == {
        "cleanup.policy": "delete,compact"
    }
    assert apply_operations(
        "topics", {"cleanup.policy": "delete,compact"}, [op("cleanup.policy", "delete", 3)]
    ) == {"cleanup.policy": "compact"}
    assert apply_operations("topics", {}, [op("cleanup.policy", "delete", 3)]) == {"cleanup.policy": ""}
    assert apply_operations(
        "topics",
        {"leader.replication.throttled.replicas": "0:1"},
        [op("leader.replication.throttled.replicas", "0:1,1:2", 2)],
    ) == {"leader.replication.throttled.replicas": "0:1,1:2"}
