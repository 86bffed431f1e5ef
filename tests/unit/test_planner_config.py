"""The planner's properties and the plan requests it refuses before any Spark job."""

from __future__ import annotations

import pytest

from node.config.properties import ConfigError
from node.planner.config import load_config
from node.planner.live_snapshot import LiveSnapshot
from node.planner.service import check_request
from wire.api.planner import PlanReassignmentRequest
from wire.errors import InvalidRequest


def test_defaults_and_spark_properties_pass_through() -> None:
    config = load_config(
        {"zookeeper.connect": "zk:2181/keel", "spark.executor.memory": "2g", "spark.master": "spark://m:7077"}
    )
    assert config.spark_master == "spark://m:7077"
    assert config.spark_conf == {"spark.executor.memory": "2g"}
    assert config.get_int("planner.max.concurrent.moves.per.broker") == 5
    assert config.get_int("planner.self.healing.broker.failure.threshold.ms") == 1_800_000
    assert not config.get_bool("planner.self.healing.enable")
    assert config.listener.port == 9099
    assert load_config({"zookeeper.connect": "zk:2181"}).spark_master == "local[*]"


def test_the_zookeeper_connection_timeout_follows_the_session_timeout_unless_set() -> None:
    base = {"zookeeper.connect": "zk:2181", "zookeeper.session.timeout.ms": "6000"}
    assert load_config(base).connection_timeout_s == 6.0
    assert load_config({**base, "zookeeper.connection.timeout.ms": "15000"}).connection_timeout_s == 15.0
    with pytest.raises(ConfigError, match=r"zookeeper\.connection\.timeout\.ms"):
        load_config({**base, "zookeeper.connection.timeout.ms": "0"})


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({}, "zookeeper.connect"),
        ({"planner.snapshot.interval.ms": "soon"}, "planner.snapshot.interval.ms"),
        ({"planner.max.concurrent.moves.per.broker": "0"}, "planner.max.concurrent.moves.per.broker"),
        ({"planner.self.healing.enable": "yes"}, "planner.self.healing.enable"),
        ({"listeners": "PLAINTEXT://:1,OTHER://:2"}, "listeners"),
        ({"spark.executor.memory": " "}, "spark.executor.memory"),
    ],
)
def test_bad_properties_name_the_key(props: dict[str, str], key: str) -> None:
    base = {} if key == "zookeeper.connect" else {"zookeeper.connect": "zk:2181"}
    with pytest.raises(ConfigError) as caught:
        load_config({**base, **props})
    assert caught.value.key == key


SNAPSHOT = LiveSnapshot(
    0,
    brokers=[{"id": 1, "rack": None, "alive": True}, {"id": 2, "rack": None, "alive": True},
             {"id": 4, "rack": None, "alive": False}],
    partitions=[],
    replicas=[],
)  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (PlanReassignmentRequest(goals=[]), "no goal"),
        (PlanReassignmentRequest(goals=["rebalance", "shuffle"]), "unknown goal 'shuffle'"),
        (PlanReassignmentRequest(goals=["rebalance"], balance="weight"), "unknown balance"),
        (PlanReassignmentRequest(goals=["remove-brokers"]), "needs the brokers"),
        (PlanReassignmentRequest(goals=["rebalance"], brokers=[1, 9]), "broker 9 is not a live broker"),
        (PlanReassignmentRequest(goals=["rebalance"], brokers=[1, 4]), "broker 4 is not a live broker"),
        (PlanReassignmentRequest(goals=["remove-brokers"], remove_brokers=[3]), "broker 3 does not exist"),
        (PlanReassignmentRequest(goals=["rebalance"], capacity={"x": 1.0}), "capacity key"),
    ],
)
def test_plan_requests_refused_before_planning(request_: PlanReassignmentRequest, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        check_request(request_, SNAPSHOT)


def test_a_dead_broker_may_be_removed() -> None:
    check_request(PlanReassignmentRequest(goals=["remove-brokers"], remove_brokers=[4]), SNAPSHOT)


SASL_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="p";'
    ),
}


def test_a_planner_with_broker_credentials_needs_an_authenticating_authorizing_listener() -> None:
    base = {"zookeeper.connect": "127.0.0.1:2181"}
    assert load_config(base).listener.host == "127.0.0.1", "loopback unless told"
    with pytest.raises(ConfigError, match=r"listeners: .*whoever reaches it could act as that user"):
        load_config(base | SASL_CLIENT)
    sasl_listener = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9099",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        load_config(base | SASL_CLIENT | sasl_listener)
    authorizer = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    assert (
        load_config(base | SASL_CLIENT | sasl_listener | authorizer).listener.security_protocol
        == "SASL_PLAINTEXT"
    )
