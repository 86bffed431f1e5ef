"""The live snapshot's rows, read from the fake store: dead brokers, target replicas of a
partition being reassigned, leaders and ISRs, and sizes from the leader's replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.base.ports import (
    BrokerInfo,
    LeaderAndIsr,
    RegisteredBroker,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
)
from node.cluster.zookeeper import free_ports
from node.planner import live_snapshot
from tests.fakes import FakeClusterStore, FakeZooKeeper
from tests.support import topic_admin
from wire.endpoint import Endpoint
from wire.security import ClientSecurity


async def cluster() -> FakeClusterStore:
    zk = FakeZooKeeper()
    (closed,) = free_ports(1)
    for broker, rack in ((1, "a"), (2, None)):
        await FakeClusterStore(zk).register_broker(
            BrokerInfo(broker, (Endpoint.plaintext("127.0.0.1", closed),), rack)
        )
    store = FakeClusterStore(zk)
    await topic_admin(store).create_topic(
        TopicAssignment(
            "t",
            {
                0: ReplicaAssignment((1, 3)),
                # Being reassigned from (2, 1) to (2, 3): 3 is added, 1 leaves.
                1: ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,)),
            },
        ),
        {},
    )
    zk.partition_states[TopicPartition("t", 0)] = (LeaderAndIsr(1, 0, (1,)), 1, 0)
    zk.partition_states[TopicPartition("t", 1)] = (LeaderAndIsr(2, 0, (2, 1)), 1, 0)
    return store


async def test_rows_from_zookeeper_with_unanswered_brokers() -> None:
    taken = await live_snapshot.take(await cluster(), timeout=1.0, now_ms=5)
    assert taken.brokers == [
        {"id": 1, "rack": "a", "alive": True},
        {"id": 2, "rack": None, "alive": True},
        {"id": 3, "rack": None, "alive": False},
    ]
    assert taken.partitions == [
        {"topic": "t", "partition": 0, "replicas": [1, 3], "leader": 1, "isr": [1], "size_bytes": None},
        {"topic": "t", "partition": 1, "replicas": [2, 3], "leader": 2, "isr": [2, 1], "size_bytes": None},
    ]
    assert taken.unanswered == (1, 2)
    assert taken.cluster_json()["partitions"][0] == {  # type: ignore[index]
        "topic": "t",
        "partition": 0,
        "replicas": [1, 3],
        "leader": 1,
        "size_bytes": None,
    }


async def test_a_partition_is_as_large_as_its_leaders_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)

    async def sizes(
        brokers: list[RegisteredBroker], *, timeout: float, security: object
    ) -> tuple[dict[int, dict[TopicPartition, int]], tuple[int, ...]]:
        return {1: {t0: 700}, 2: {t1: 900}}, ()

    monkeypatch.setattr(live_snapshot, "replica_sizes", sizes)
    taken = await live_snapshot.take(await cluster(), timeout=1.0, now_ms=5)
    assert [p["size_bytes"] for p in taken.partitions] == [700, 900]
    assert taken.replicas == [
        {"topic": "t", "partition": 0, "broker": 1, "size_bytes": 700},
        {"topic": "t", "partition": 1, "broker": 2, "size_bytes": 900},
    ]


async def test_sizes_are_asked_at_the_endpoint_of_the_clients_protocol(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A SASL_SSL client does not dial a broker's PLAINTEXT endpoint: that broker is unanswered."""
    store = await cluster()
    sasl_ssl = ClientSecurity(security_protocol="SASL_SSL")
    sizes, unanswered = await live_snapshot.replica_sizes(
        await store.registered_brokers(), timeout=1.0, security=sasl_ssl
    )
    assert (sizes, unanswered) == ({}, (1, 2))
    assert "broker 1 has no SASL_SSL endpoint" in caplog.text


def test_prune_keeps_the_newest_snapshots(tmp_path: Path) -> None:
    names = [live_snapshot.snapshot_name(ms) for ms in (1_000, 2_000, 3_000)]
    for name in names:
        (tmp_path / name / "brokers").mkdir(parents=True)
    (tmp_path / ".tmp-fresh").mkdir()
    deleted = live_snapshot.prune(tmp_path, 2)
    assert deleted == [tmp_path / names[0]]
    assert live_snapshot.snapshots(tmp_path) == [tmp_path / names[1], tmp_path / names[2]]
    assert (tmp_path / ".tmp-fresh").exists(), "a snapshot being written is left alone"
