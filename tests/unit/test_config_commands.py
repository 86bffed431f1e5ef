"""`keel configs`' pure parts: kafka-configs' --add-config syntax, the checks made before any
broker is asked, and Kafka's describe lines."""

from __future__ import annotations

import argparse

import pytest

from node.cli.config_commands import (
    BROKERS,
    TOPICS,
    Entity,
    checked_request,
    describe_lines,
    parse_add_config,
    parse_delete_config,
)
from node.command.entry import UsageError
from wire.api import DescribeConfigsResourceResult, DescribeConfigsResult
from wire.api.describe_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
)


def test_add_config_splits_on_commas_outside_brackets_and_drops_the_brackets() -> None:
    assert parse_add_config("k1=v1, k2 = [v2,v3] ,k3=v3") == {"k1": "v1", "k2": "v2,v3", "k3": "v3"}
    assert parse_add_config("a.b=[0:1,1:2],c=") == {"a.b": "0:1,1:2", "c": ""}
    assert parse_add_config("x=[k=v,l=w]") == {"x": "k=v,l=w"}


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("a=b=c", 'format "key=val"'),
        ("novalue", 'format "key=val"'),
        ("a=1,", 'format "key=val"'),
        ("bad key=1", "invalid character found for config key"),
        ("=1", "invalid character found for config key"),
    ],
)
def test_add_config_refuses_what_kafka_configs_refuses(text: str, phrase: str) -> None:
    with pytest.raises(UsageError, match=phrase):
        parse_add_config(text)


def test_delete_config_names_keys() -> None:
    assert parse_delete_config(" a, b ,") == ["a", "b"]
    with pytest.raises(UsageError):
        parse_delete_config(" , ")


def args(**given: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "describe": False,
        "alter": False,
        "entity_type": TOPICS,
        "entity_name": None,
        "entity_default": False,
        "add_config": None,
        "delete_config": None,
        "all": False,
    }
    return argparse.Namespace(**(base | given))


def test_the_request_is_checked_before_anything_is_sent() -> None:
    assert checked_request(args(describe=True)) == (None, {}, [])
    assert checked_request(args(alter=True, entity_name="t", add_config="a=1", delete_config="b")) == (
        Entity(TOPICS, "t"),
        {"a": "1"},
        ["b"],
    )
    assert checked_request(args(alter=True, entity_type=BROKERS, entity_default=True, add_config="a=1"))[
        0
    ] == (Entity(BROKERS, ""))
    for bad, phrase in (
        (args(describe=True, add_config="a=1"), "go with --alter"),
        (args(alter=True, entity_name="t", all=True, add_config="a=1"), "--all goes with --describe"),
        (args(alter=True, entity_name="t"), "needs --add-config or --delete-config"),
        (args(alter=True, add_config="a=1"), "needs --entity-name"),
        (args(describe=True, entity_default=True), "--entity-default is for brokers"),
        (args(describe=True, entity_type=BROKERS, entity_name="b1"), "valid integer broker id"),
        (args(alter=True, entity_name="t", add_config="a=1", delete_config="a"), "both added and deleted"),
    ):
        with pytest.raises(UsageError, match=phrase):
            checked_request(bad)


def entry(
    name: str, value: str | None, source: int, *, sensitive: bool = False
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(name=name, value=value, config_source=source, is_sensitive=sensitive)


def test_describe_lines_are_kafkas_with_their_synonyms() -> None:
    broker = DescribeConfigsResult(
        resource_type=4,
        resource_name="1",
        configs=[
            entry("x.rate", "5", DYNAMIC_BROKER_CONFIG),
            entry("y.rate", "7", DYNAMIC_DEFAULT_BROKER_CONFIG),
            entry("ssl.key.password", None, DYNAMIC_BROKER_CONFIG, sensitive=True),
        ],
    )
    defaults = {"x.rate": entry("x.rate", "9", DYNAMIC_DEFAULT_BROKER_CONFIG)}
    assert describe_lines(Entity(BROKERS, "1"), broker, defaults, describe_all=False) == [
        "Dynamic configs for broker 1 are:",
        "  ssl.key.password=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:ssl.key.password=null}",
        "  x.rate=5 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:x.rate=5,"
        " DYNAMIC_DEFAULT_BROKER_CONFIG:x.rate=9}",
    ]
    assert describe_lines(Entity(BROKERS, ""), broker, {}, describe_all=False) == [
        "Default configs for brokers in the cluster are:",
        "  y.rate=7 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:y.rate=7}",
    ]
    topic = DescribeConfigsResult(
        resource_type=2,
        resource_name="t",
        configs=[entry("retention.ms", "1", DYNAMIC_TOPIC_CONFIG), entry("flush.ms", "9", DEFAULT_CONFIG)],
    )
    assert describe_lines(Entity(TOPICS, "t"), topic, {}, describe_all=True) == [
        "All configs for topic t are:",
        "  flush.ms=9 sensitive=false synonyms={DEFAULT_CONFIG:flush.ms=9}",
        "  retention.ms=1 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1}",
    ]
