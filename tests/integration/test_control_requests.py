"""Hand-crafted controller requests to a real broker process over the wire (spec §9).

A refused order must change nothing. From outside, that shows as a later, lower-epoch order
still being accepted: had the refused one been applied, it would be fenced.
"""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually
from wire.api import (
    Endpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveBroker,
    MetadataRequest,
    MetadataResponse,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from wire.client import RpcClient
from wire.errors import ErrorCode
from wire.frames import encode_frame


def partition_state(
    partition: int, leader_epoch: int, *, replicas: list[int] | None = None
) -> LeaderAndIsrPartitionState:
    replicas = [1, 2] if replicas is None else replicas
    return LeaderAndIsrPartitionState(
        topic="orders",
        partition=partition,
        controller_epoch=3,
        leader=replicas[0],
        leader_epoch=leader_epoch,
        isr=replicas,
        partition_epoch=leader_epoch,
        replicas=replicas,
    )


def order(*states: LeaderAndIsrPartitionState, controller_epoch: int) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=1, controller_epoch=controller_epoch, broker_epoch=-1, partition_states=list(states)
    )


async def send(client: RpcClient, request: LeaderAndIsrRequest) -> tuple[int, list[int]]:
    response = await client.send(request)
    assert isinstance(response, LeaderAndIsrResponse)
    return response.error_code, [e.error_code for e in response.partition_errors]


async def started(brokers: Brokers) -> BrokerProcess:
    (broker,) = brokers.start(1)
    await eventually(broker.describe, timeout=20, message="broker did not come up")
    return broker


async def test_hand_crafted_leader_and_isr_gets_the_right_error_each_time(brokers: Brokers) -> None:
    broker = await started(brokers)
    client = await RpcClient.connect("127.0.0.1", broker.port)
    assert await send(client, order(partition_state(0, 2), controller_epoch=5)) == (0, [0])

    # An older controller epoch: the whole request fails, and nothing of it is applied.
    stale = order(partition_state(0, 9), partition_state(1, 9), controller_epoch=4)
    assert await send(client, stale) == (
        ErrorCode.STALE_CONTROLLER_EPOCH,
        [ErrorCode.STALE_CONTROLLER_EPOCH] * 2,
    )
    # An equal or older leader epoch is fenced for that partition only.
    mixed = order(partition_state(0, 2), partition_state(1, 0), controller_epoch=5)
    assert await send(client, mixed) == (0, [ErrorCode.FENCED_LEADER_EPOCH, 0])
    assert await send(client, order(partition_state(0, 1), controller_epoch=5)) == (
        0,
        [ErrorCode.FENCED_LEADER_EPOCH],
    )
    # A partition whose replicas do not include this broker.
    assert await send(client, order(partition_state(2, 0, replicas=[2, 3]), controller_epoch=5)) == (
        0,
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    )
    # The refused orders changed nothing: epochs just above the accepted ones are still new.
    assert await send(
        client, order(partition_state(0, 3), partition_state(1, 1), partition_state(2, 0), controller_epoch=5)
    ) == (0, [0, 0, 0])
    await client.close()


@pytest.mark.plain_pass_only(
    "writes hand-made plaintext frames on a raw socket: on a SASL_SSL listener they are not TLS, and "
    "before authentication anything but ApiVersions closes the connection (test_sasl_plaintext.py)"
)
async def test_malformed_partition_entries_are_invalid_and_change_nothing(brokers: Brokers) -> None:
    broker = await started(brokers)
    good = partition_state(0, 4).to_wire()
    malformed_entries = [
        {**good, "leader_epoch": "4"},
        {**good, "isr": [1, "2"]},
        {k: v for k, v in good.items() if k != "replicas"},
        [1, 2, 3],
    ]
    for number, entry in enumerate(malformed_entries, start=20):
        body = {
            "controller_id": 1,
            "controller_epoch": 7,
            "broker_epoch": -1,
            "partition_states": [good, entry],
        }
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(encode_frame(msgpack.packb([4, 0, number, "forger", body])))
        head = await asyncio.wait_for(reader.readexactly(4), 5)
        correlation_id, answer = msgpack.unpackb(await reader.readexactly(int.from_bytes(head, "big")))
        writer.close()
        assert (correlation_id, answer["error_code"]) == (number, ErrorCode.INVALID_REQUEST), entry
        assert "partition_states[1]" in answer["error_message"]
    client = await RpcClient.connect("127.0.0.1", broker.port)
    # Neither the good entry beside them nor their controller epoch 7 was applied.
    assert await send(client, order(partition_state(0, 0), controller_epoch=6)) == (0, [0])
    await client.close()


async def test_update_metadata_feeds_the_metadata_answer_and_stale_ones_are_refused(brokers: Brokers) -> None:
    broker = await started(brokers)
    client = await RpcClient.connect("127.0.0.1", broker.port)

    def update(epoch: int, leader: int) -> UpdateMetadataRequest:
        return UpdateMetadataRequest(
            controller_id=1,
            controller_epoch=epoch,
            partition_states=[
                UpdateMetadataPartitionState(
                    topic="orders",
                    partition=0,
                    controller_epoch=epoch,
                    leader=leader,
                    leader_epoch=1,
                    isr=[1],
                    partition_epoch=1,
                    replicas=[1, 2],
                    offline_replicas=[2],
                )
            ],
            live_brokers=[
                LiveBroker(
                    broker_id=1,
                    endpoints=[
                        Endpoint(
                            listener="PLAINTEXT",
                            security_protocol="PLAINTEXT",
                            host="127.0.0.1",
                            port=broker.port,
                        )
                    ],
                )
            ],
        )

    assert (await client.send(update(3, 1))).error_code == 0
    assert (await client.send(update(2, 2))).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    answer = await client.send(MetadataRequest(topics=None))
    assert isinstance(answer, MetadataResponse)
    assert answer.cluster_id and answer.controller_id == 1
    [(topic, partitions)] = [(t.name, t.partitions) for t in answer.topics]
    assert topic == "orders"
    assert [(p.leader, p.isr, p.offline_replicas, p.error_code) for p in partitions] == [(1, [1], [2], 0)]
    stop = StopReplicaRequest(
        controller_id=1,
        controller_epoch=2,
        partitions=[StopReplicaPartition(topic="orders", partition=0, delete_partition=True)],
    )
    assert (await client.send(stop)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    await client.close()
