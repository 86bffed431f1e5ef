"""Real brokers whose ZooKeeper connections all go through a proxy that loses the answer to the
controller's multi-op of partition-state creates for a new topic (issue 32): ZooKeeper applied
it, the controller's client reconnects to the same session and sends it again, and ZooKeeper
refuses it with NodeExists. Before, the controller gave those partitions up ("cannot
initialise") and never told a broker; now every partition comes online and every broker's
Metadata lists its leader. And a state znode that truly could not be created, because an
earlier controller's is there, is elected from and counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from tests.integration.conftest import CONNECTION_TIMEOUT_MS, SESSION_TIMEOUT_MS, Brokers, local_cluster
from tests.integration.test_metrics import scrape, value, with_metrics
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually
from tests.zookeeper_proxy import ReplyLosingProxy

TOPIC = "lossy"
PARTITIONS = 12


@pytest.fixture
def proxy(zookeeper: EmbeddedZooKeeper) -> Iterator[ReplyLosingProxy]:
    # Only the controller writes partition states, in multi-ops (opcode 14).
    with ReplyLosingProxy(
        zookeeper.servers[0].client_port,
        matching=f"/brokers/topics/{TOPIC}/partitions".encode(),
        opcodes=frozenset({14}),
    ) as proxy:
        yield proxy


@pytest.fixture
def cluster(proxy: ReplyLosingProxy, chroot: str, tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = local_cluster(
        tmp_path,
        f"127.0.0.1:{proxy.port}{chroot}",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        connection_timeout_ms=CONNECTION_TIMEOUT_MS,
        settings={"auto.leader.rebalance.enable": "false"},
    )
    yield cluster
    cluster.kill_all()


async def test_every_partition_comes_online_when_the_controllers_state_creates_lose_their_answer(
    cluster: LocalCluster, proxy: ReplyLosingProxy, kazoo: KazooClient
) -> None:
    first, *_ = cluster.start(1, 2, 3)
    await cluster.wait_for_full_metadata()
    controller, epoch = await cluster.wait_for_controller()
    await create_topic(first, TOPIC, partitions=PARTITIONS, rf=3)

    async def lost() -> bool:
        return proxy.lost == 1

    await eventually(lost, timeout=30, message="the proxy never lost the controller's answer")
    state = await settled_to(
        cluster,
        kazoo,
        TOPIC,
        lambda s: len(s) == PARTITIONS and all(leader >= 0 for leader, _, _ in s.values()),
        "not every partition of the topic came online on every broker",
    )
    assert all(sorted(isr) == [1, 2, 3] for _, _, isr in state.values()), state
    assert await cluster.wait_for_controller() == (controller, epoch), "the controller should not have moved"
    logs = cluster.by_id(controller).broker_log() + cluster.by_id(controller).broker_log("controller.log")
    assert "an earlier send had applied it" in logs, "the controller's client did not recognise its write"
    assert "cannot initialise" not in logs


async def test_a_state_znode_left_by_an_earlier_controller_is_elected_from_and_counted(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """A partition whose state znode exists when the controller creates it (an earlier
    controller's create, applied as it lost its role): before, "cannot initialise" and offline
    for good; now its leader is elected from that state, and the failure is counted."""
    started = [with_metrics(brokers, i).start() for i in (1, 2, 3)]
    await brokers.wait_for_full_metadata()
    left = {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 0, "isr": [2, 3]}
    assignment = {"version": 1, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}}
    # In one transaction, as Kafka's tools write a topic: the controller sees it whole.
    write = kazoo.transaction()
    write.create("/brokers/topics/left", orjson.dumps(assignment))
    write.create("/brokers/topics/left/partitions")
    write.create("/brokers/topics/left/partitions/0")
    write.create("/brokers/topics/left/partitions/0/state", orjson.dumps(left))
    assert all(not isinstance(r, Exception) for r in write.commit())
    state = await settled_to(
        brokers,
        kazoo,
        "left",
        lambda s: len(s) == 2 and all(leader >= 0 for leader, _, _ in s.values()),
        "a partition of the topic never came online",
    )
    # Elected from the state left there, as for an offline partition: the first live replica of
    # the assignment in its ISR, at the next leader epoch (broker 1 may have caught up since).
    assert state[0][:2] == (2, 5), state
    controller = await controller_of(brokers)
    samples = await scrape(next(b for b in started if b.broker_id == controller))
    assert value(samples, "kafka_controller_controllerstats_partitioninitializationfailures_total") == 1
    lines = brokers.by_id(controller).broker_log("state-change.log")
    assert "Partition left-0's state znode was written at controller epoch 0: electing its leader" in lines
