"""Crafted record batches against a real broker: a header that claims 2^31 - 1 records over a
4 KB body, one record over a garbage body, offsets and timestamps that lie. The leader refuses
each with INVALID_RECORD and appends nothing, a produce naming other partitions too has them
appended and answered, consumers read back exactly what was accepted, and the broker restarts
on the same log (before, four such batches pushed the partition's offsets past 32 bits: every
later produce to it failed, consumers looped on the batch and the broker could not start)."""

from __future__ import annotations

import struct
import time

import pytest

from node.clients.admin import KeelAdminClient
from tests.integration.conftest import Brokers
from tests.support import eventually
from wire import records
from wire.api import (
    CreatableTopic,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from wire.client import RpcClient
from wire.errors import ErrorCode

pytestmark = pytest.mark.hostile

TOPIC = "tenants"


def forged(
    batch: bytes, *, count: int | None = None, body: bytes | None = None, max_timestamp: int | None = None
) -> bytes:
    """`batch` rewritten as a hostile producer would, its length and CRC made right again."""
    out = bytearray(batch if body is None else batch[: records.HEADER_SIZE] + body)
    struct.pack_into(">i", out, 8, len(out) - records.LOG_OVERHEAD)
    if count is not None:
        struct.pack_into(">i", out, 23, count - 1)  # last offset delta
        struct.pack_into(">i", out, 57, count)
    if max_timestamp is not None:
        struct.pack_into(">q", out, 35, max_timestamp)
    struct.pack_into(">I", out, 17, records.checksum(out[21:]))
    return bytes(out)


def good(*values: bytes) -> bytes:
    return records.build_batch([(None, v) for v in values], timestamp=int(time.time() * 1000))


async def produce(client: RpcClient, batches: dict[int, bytes]) -> dict[int, int]:
    """acks=1 produce of one batch per partition; each partition's error code."""
    response = await client.send(
        ProduceRequest(
            acks=1,
            topic_data=[
                ProduceTopicData(
                    name=TOPIC,
                    partition_data=[ProducePartitionData(index=p, records=b) for p, b in batches.items()],
                )
            ],
        )
    )
    assert isinstance(response, ProduceResponse)
    return {p.index: p.error_code for p in response.responses[0].partition_responses}


async def read_all(client: RpcClient, partition: int) -> list[tuple[int, bytes | None]]:
    response = await client.send(
        FetchRequest(
            max_wait_ms=0,
            topics=[
                FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=partition, fetch_offset=0)])
            ],
        )
    )
    assert isinstance(response, FetchResponse)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    return [(r.offset, r.value) for r in records.records(data.records)]


async def test_crafted_batches_are_refused_whole_and_the_partition_and_broker_live_on(
    brokers: Brokers,
) -> None:
    (broker,) = brokers.start(1)
    await eventually(broker.describe, timeout=30, message="broker did not come up")
    async with KeelAdminClient(f"127.0.0.1:{broker.port}") as admin:
        (created,) = (await admin.create_topics([CreatableTopic(name=TOPIC, num_partitions=2)])).topics
    assert created.error_code == ErrorCode.NONE
    client = await RpcClient.connect("127.0.0.1", broker.port, request_timeout=30)
    try:

        async def leading() -> bool:
            return (await produce(client, {0: good(b"a0", b"a1"), 1: good(b"b0")})) == {0: 0, 1: 0}

        await eventually(leading, timeout=30, message="the topic never took a record")
        four_kb = good(*(bytes([i]) * 90 for i in range(40)))
        assert 3_500 < len(four_kb) < 4_500
        claims_2_31 = forged(four_kb, count=2**31 - 1)
        for _ in range(4):
            assert await produce(client, {0: claims_2_31}) == {0: ErrorCode.INVALID_RECORD}
        garbage = forged(good(b"x"), count=1, body=b"\xff" * 64)
        assert await produce(client, {0: garbage}) == {0: ErrorCode.INVALID_RECORD}
        lying_time = forged(good(b"y"), max_timestamp=0)
        assert await produce(client, {0: lying_time}) == {0: ErrorCode.INVALID_RECORD}
        # Another tenant's partition in the same request is appended and answered as usual.
        assert await produce(client, {0: claims_2_31, 1: good(b"b1")}) == {0: ErrorCode.INVALID_RECORD, 1: 0}
        assert await produce(client, {0: good(b"a2")}) == {0: 0}
        expected = {0: [(0, b"a0"), (1, b"a1"), (2, b"a2")], 1: [(0, b"b0"), (1, b"b1")]}
        assert {p: await read_all(client, p) for p in (0, 1)} == expected
    finally:
        await client.close()

    broker.stop()
    broker.start()
    await eventually(broker.describe, timeout=30, message="the broker did not start again on its log")
    client = await RpcClient.connect("127.0.0.1", broker.port, request_timeout=30)
    try:

        async def reads_back() -> bool:
            try:
                return {p: await read_all(client, p) for p in (0, 1)} == expected
            except AssertionError:
                return False

        await eventually(reads_back, timeout=30, message="after a restart the log is not what was accepted")
        assert await produce(client, {0: good(b"a3")}) == {0: 0}
    finally:
        await client.close()
