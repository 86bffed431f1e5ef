"""Znode contents as Kafka writes them (spec §1), so zkCli and Kafka's tools read them."""

from __future__ import annotations

import orjson
import pytest

from actors.base.ports import BrokerInfo, TopicPartition
from node.zk import data
from node.zk.client import ZooKeeperClient, split_connect
from wire.endpoint import Endpoint


def test_controller_json() -> None:
    raw = data.encode_controller(3, 1700000000000)
    assert orjson.loads(raw) == {
        "version": 2,
        "brokerid": 3,
        "timestamp": "1700000000000",
        "kraftControllerEpoch": -1,
    }
    assert data.decode_controller(raw) == 3
    assert data.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1]", b'{"brokerid":"1"}'])
def test_unreadable_controller(raw: bytes) -> None:
    with pytest.raises(data.ZNodeDataError):
        data.decode_controller(raw)


def test_controller_epoch_is_plain_decimal_text() -> None:
    assert data.encode_controller_epoch(5) == b"5"
    assert data.decode_controller_epoch(b"12") == 12
    with pytest.raises(data.ZNodeDataError):
        data.decode_controller_epoch(b"{}")


def test_broker_registration_version_5() -> None:
    info = BrokerInfo(
        2,
        (Endpoint("PLAINTEXT", "PLAINTEXT", "h1", 9092), Endpoint("INTERNAL", "PLAINTEXT", "h1", 9093)),
        rack="r1",
    )
    raw = data.encode_broker(info, 1700000000000)
    assert orjson.loads(raw) == {
        "version": 5,
        "host": "h1",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "endpoints": ["PLAINTEXT://h1:9092", "INTERNAL://h1:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        "rack": "r1",
        "features": {},
    }
    assert data.decode_broker(2, raw) == info


def test_rack_is_absent_unless_configured() -> None:
    raw = data.encode_broker(BrokerInfo(1, (Endpoint("PLAINTEXT", "PLAINTEXT", "h", 1),)), 0)
    assert "rack" not in orjson.loads(raw)


def test_cluster_id() -> None:
    cluster_id = data.new_cluster_id()
    assert len(cluster_id) == 22 and "=" not in cluster_id
    raw = data.encode_cluster_id(cluster_id)
    assert orjson.loads(raw) == {"version": "1", "id": cluster_id}
    assert data.decode_cluster_id(raw) == cluster_id


def test_connect_string_chroot() -> None:
    assert split_connect("a:1,b:2/kafka/prod") == ("a:1,b:2", "/kafka/prod")
    assert split_connect("a:1") == ("a:1", None)
    assert split_connect("a:1/") == ("a:1", None)


def test_a_path_under_the_chroot_is_what_aiozk_makes_of_it_fast_path_or_not() -> None:
    for connect in ("127.0.0.1:1", "127.0.0.1:1/keel", "127.0.0.1:1/a/b/", "127.0.0.1:1/a//b"):
        client = ZooKeeperClient(connect, session_timeout_s=6, connection_timeout_s=1)
        for path in ("/", "/brokers", "/brokers/ids/1", "brokers", "//x//y/", "/x/"):
            assert client.path(path) == client._zk.normalize_path(path), (connect, path)
    chrooted = ZooKeeperClient("h:1/keel", session_timeout_s=6, connection_timeout_s=1)
    assert chrooted.path("/a/b") == "/keel/a/b"


def test_partition_state_json() -> None:
    state = data.LeaderAndIsr(2, 4, (2, 3), 9)
    raw = data.encode_partition_state(state, 7)
    assert orjson.loads(raw) == {
        "version": 1,
        "leader": 2,
        "leader_epoch": 4,
        "controller_epoch": 7,
        "isr": [2, 3],
    }
    assert data.decode_partition_state("t-0", raw, 9) == data.LeadershipInfo(state, 7)
    recovering = data.encode_partition_state(state._replace(recovering=True), 7)
    assert orjson.loads(recovering)["leader_recovery_state"] == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b'{"leader":1}',
        b'{"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1]}',
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":["1"]}',
    ],
)
def test_unreadable_partition_state(raw: bytes) -> None:
    with pytest.raises(data.ZNodeDataError, match="t-0 state"):
        data.decode_partition_state("t-0", raw, 0)


def test_topic_json_round_trip() -> None:
    assignment = data.TopicAssignment(
        "t", {0: data.ReplicaAssignment((1, 2, 3)), 1: data.ReplicaAssignment((2, 3, 4), (4,), (1,))}, "abc"
    )
    raw = data.encode_topic(assignment)
    assert orjson.loads(raw) == {
        "version": 3,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 4]},
        "adding_replicas": {"1": [4]},
        "removing_replicas": {"1": [1]},
        "topic_id": "abc",
    }
    assert data.decode_topic("t", raw) == assignment
    assert data.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}').partitions == {
        0: data.ReplicaAssignment((1,))
    }


def test_preferred_replica_election_round_trips_as_kafka_writes_it() -> None:
    partitions = [TopicPartition("t", 1), TopicPartition("u", 0)]
    encoded = data.encode_preferred_replica_election(partitions)
    assert orjson.loads(encoded) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 1}, {"topic": "u", "partition": 0}],
    }
    assert data.decode_preferred_replica_election(encoded) == partitions
    repeated = b'{"version":1,"partitions":[{"topic":"t","partition":1},{"topic":"t","partition":1}]}'
    assert data.decode_preferred_replica_election(repeated) == [TopicPartition("t", 1)]
    for bad in (b"nope", b'{"partitions":{}}', b'{"partitions":[{"topic":"t","partition":"1"}]}'):
        with pytest.raises(data.ZNodeDataError):
            data.decode_preferred_replica_election(bad)


def test_reassign_partitions_json() -> None:
    from actors.base.ports import TopicPartition

    raw = data.encode_partition_reassignment({TopicPartition("t", 0): (4, 5, 6)})
    assert orjson.loads(raw) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 5, 6]}],
    }
    assert data.decode_partition_reassignment(raw) == {TopicPartition("t", 0): (4, 5, 6)}


@pytest.mark.parametrize(
    "raw",
    [b"nope", b"{}", b'{"partitions":[{"topic":"t"}]}', b'{"partitions":[{"topic":"t","partition":0}]}'],
)
def test_unreadable_reassign_partitions(raw: bytes) -> None:
    with pytest.raises(data.ZNodeDataError):
        data.decode_partition_reassignment(raw)
