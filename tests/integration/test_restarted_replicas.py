"""KIP-903 across real broker processes on a real ZooKeeper: a replica that comes back having
lost its log rejoins the ISR only on its new incarnation's own fetches, never on what its
previous incarnation fetched.

Broker 2's previous incarnation is played by a client: once broker 2 is dead and out of the
ISR, a fetch as replica 2, with its old broker epoch and at the leader's log end, arrives late
(a zombie's, or one delayed in the network). Broker 2 then starts again with an empty log.
The leader throttles what it copies to followers outside the ISR to 1 byte a second, so the
new incarnation cannot catch up while the test watches: an ISR that names it meanwhile was
granted on its previous incarnation's word, and an election from it would lose every
acknowledged record. Without the throttle, it catches up and rejoins.
"""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest
from kazoo.client import KazooClient

from node.clients.producer import KeelProducer
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import data_dir
from tests.integration.test_partition_leadership import controller_of, create_topic, metadata, settled_to
from tests.integration.test_throttle import alter, setting
from tests.support import eventually
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerState,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from wire.client import RpcClient
from wire.errors import ErrorCode

pytestmark = [
    pytest.mark.hostile,
    pytest.mark.plain_pass_only("its requests as a broker (ClusterAction) come from a plaintext client"),
]

TOPIC_TYPE, BROKER_TYPE = 2, 4
TOPIC = "restarted"
RECORDS = 30
# How long the ISR is watched for the new incarnation while it cannot have caught up: the
# leader proposes on the UpdateMetadata that brings it live, within milliseconds.
WATCHED_S = 5.0


def broker_epoch(kazoo: KazooClient, broker_id: int) -> int:
    """The broker epoch: the czxid of its registration."""
    stat = kazoo.exists(f"/brokers/ids/{broker_id}")
    assert stat is not None, f"broker {broker_id} is not registered"
    return int(stat.czxid)


async def live_on(broker: BrokerProcess, broker_id: int) -> bool:
    answer = await metadata(broker, TOPIC)
    return answer is not None and any(b.broker_id == broker_id for b in answer.brokers)


async def test_a_restarted_replica_rejoins_the_isr_only_on_its_own_fetches(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    one = brokers.new(1).start()
    two = brokers.new(2, replica_fetch_max_bytes="1024").start()
    await controller_of(brokers)
    await create_topic(one, TOPIC, assignment={0: [1, 2]})
    await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][0] == 1 and s[0][2] == [1, 2], "no ISR of 1 and 2")
    async with KeelProducer(f"127.0.0.1:{one.port}", acks=-1, request_timeout=10) as producer:
        for n in range(RECORDS):  # one batch each: a throttled follower gets one per fetch
            await producer.send_many(TOPIC, [(None, b"%03d" % n + b"x" * 500)], partition=0)
    previous_epoch = broker_epoch(kazoo, 2)

    two.kill()
    await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][2] == [1], "broker 2 never left the ISR")
    # What broker 2's previous incarnation fetched last, arriving now: it reached the log end.
    zombie = await RpcClient.connect("127.0.0.1", one.port, request_timeout=5)
    try:
        late = await zombie.send(
            FetchRequest(
                replica_id=2,
                replica_epoch=previous_epoch,
                max_wait_ms=0,
                topics=[
                    FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=RECORDS)])
                ],
            )
        )
    finally:
        await zombie.close()
    assert isinstance(late, FetchResponse)
    assert late.responses[0].partitions[0].error_code == ErrorCode.NONE

    # Broker 2 lost its log; the leader copies 1 byte a second to followers outside the ISR.
    assert await alter(
        one,
        setting(BROKER_TYPE, "1", leader_replication_throttled_rate="1"),
        setting(TOPIC_TYPE, TOPIC, leader_replication_throttled_replicas="0:1"),
    ) == [(0, None), (0, None)]
    shutil.rmtree(data_dir(two, TOPIC, 0))
    two.start()
    await eventually(lambda: live_on(one, 2), timeout=30, message="broker 2 never came back live")
    assert broker_epoch(kazoo, 2) != previous_epoch
    watched_until = time.monotonic() + WATCHED_S
    while time.monotonic() < watched_until:
        state = await settled_to(brokers, kazoo, TOPIC, lambda s: True, "no agreed state")
        assert state[0][2] == [1], "broker 2 let back into the ISR on its previous incarnation's fetch"
        await asyncio.sleep(0.2)  # the interval of a watch over a window, not a wait for a condition

    # Unthrottled, the new incarnation catches up and rejoins on its own fetches.
    assert await alter(
        one,
        setting(BROKER_TYPE, "1", leader_replication_throttled_rate=None),
        setting(TOPIC_TYPE, TOPIC, leader_replication_throttled_replicas=None),
    ) == [(0, None), (0, None)]
    await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][2] == [1, 2], "broker 2 never rejoined the ISR")


async def test_only_a_partitions_leader_changes_its_isr(brokers: Brokers, kazoo: KazooClient) -> None:
    """Broker 2, a follower, asks the controller to make the ISR {2} at the current leader and
    partition epochs: refused with INVALID_REQUEST, nothing written. ZooKeeper-mode Kafka's
    controller wrote the sender in as leader: any broker could take a partition's leadership
    and drop the others from its ISR, without an election and without telling anyone."""
    one = brokers.new(1).start()
    brokers.new(2).start()
    controller = brokers.by_id(await controller_of(brokers))
    await create_topic(one, TOPIC, assignment={0: [1, 2]})
    state = await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][2] == [1, 2], "no ISR of 1 and 2")
    path = f"/brokers/topics/{TOPIC}/partitions/0/state"
    written, stat = kazoo.get(path)
    client = await RpcClient.connect("127.0.0.1", controller.port, request_timeout=10)
    try:
        answer = await client.send(
            AlterPartitionRequest(
                broker_id=2,
                broker_epoch=broker_epoch(kazoo, 2),
                topics=[
                    AlterPartitionTopic(
                        topic_name=TOPIC,
                        partitions=[
                            AlterPartitionItem(
                                partition_index=0,
                                leader_epoch=state[0][1],
                                new_isr_with_epochs=[
                                    BrokerState(broker_id=2, broker_epoch=broker_epoch(kazoo, 2))
                                ],
                                partition_epoch=stat.version,
                            )
                        ],
                    )
                ],
            )
        )
    finally:
        await client.close()
    assert isinstance(answer, AlterPartitionResponse)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    assert kazoo.get(path)[0] == written, "the partition's state is as it was"
