"""Kafka's own clients against real brokers on a Kafka listener (`kafka.listeners`): the
version table, produce and fetch of record batches in Kafka's format, offsets by time, and
the protocol's traps (an unknown ApiVersions version, an API not served, acks=0)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.metadata import ApiVersionsResponse
from kazoo.client import KazooClient

from node.cluster.zookeeper import free_ports
from tests.integration.conftest import Brokers
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from wire.kafka.versions import ADVERTISED

pytestmark = pytest.mark.plain_pass_only("the Kafka listener serves no SASL yet")


def start_with_kafka_listeners(brokers: Brokers, *broker_ids: int) -> str:
    """The brokers started, each with a Kafka listener; the Kafka bootstrap list."""
    ports = free_ports(len(broker_ids))
    for broker_id, port in zip(broker_ids, ports, strict=True):
        brokers.new(broker_id, {"kafka.listeners": f"PLAINTEXT://127.0.0.1:{port}"}).start()
    return ",".join(f"127.0.0.1:{port}" for port in ports)


async def test_kafka_python_produces_and_reads_back_every_record_in_order(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "orders", partitions=3, rf=3)
    await settled_to(brokers, kazoo, "orders", lambda s: len(s) == 3, "topic never agreed")
    sent = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(1_000)]

    def produce() -> list[tuple[int, int]]:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5
        )
        try:
            futures = [producer.send("orders", key=k, value=v) for k, v in sent]
            producer.flush(timeout=30)
            return [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]
        finally:
            producer.close(timeout=10)

    acknowledged = await asyncio.to_thread(produce)
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for (partition, offset), record in zip(acknowledged, sent, strict=True):
        by_partition.setdefault(partition, []).append(record)
        assert offset == len(by_partition[partition]) - 1, "offsets are dense from 0, in send order"

    def consume() -> dict[int, list[tuple[bytes, bytes]]]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2_000
        )
        try:
            consumer.assign([TopicPartition("orders", p) for p in range(3)])
            consumer.seek_to_beginning()
            got: dict[int, list[tuple[bytes, bytes]]] = {}
            deadline = time.monotonic() + 30
            while sum(len(v) for v in got.values()) < len(sent) and time.monotonic() < deadline:
                for record in consumer:
                    got.setdefault(record.partition, []).append((record.key, record.value))
            return got
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == by_partition


async def test_kafka_python_infers_kafka_3_0_and_sees_the_kafka_listeners(brokers: Brokers) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    await controller_of(brokers)

    def look() -> tuple[object, set[tuple[str, int]]]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            consumer.topics()
            cluster = consumer._client.cluster
            return consumer.config["api_version"], {(b.host, b.port) for b in cluster.brokers()}
        finally:
            consumer.close()

    version, addresses = await asyncio.to_thread(look)
    assert version == (3, 0), "magic-2 batches and idempotence need a broker seen as 0.11 or later"
    assert {f"{h}:{p}" for h, p in addresses} == set(bootstrap.split(","))


def exchange(port: int, api_key: int, version: int, body: bytes, correlation_id: int = 9) -> bytes | None:
    """One request frame with a v1 header; the answer's payload, or None if the broker closed."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        prefix = sock.recv(4, socket.MSG_WAITALL)
        if len(prefix) < 4:
            return None
        (length,) = struct.unpack(">i", prefix)
        return sock.recv(length, socket.MSG_WAITALL)


async def test_an_unknown_api_versions_version_is_answered_at_v0_and_an_unserved_api_closes(
    brokers: Brokers,
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await controller_of(brokers)
    port = int(bootstrap.split(":")[1])
    answer = await asyncio.to_thread(exchange, port, 18, 99, b"")
    assert answer is not None
    decoded = ApiVersionsResponse[0].decode(answer[4:])
    assert struct.unpack(">i", answer[:4]) == (9,)
    assert decoded.error_code == 35, "UNSUPPORTED_VERSION"
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ADVERTISED
    # JoinGroup is not advertised (yet): Kafka's broker closes such a connection.
    assert await asyncio.to_thread(exchange, port, 11, 5, b"\x00" * 40) is None
    # Produce v2 carries magic 0/1 message sets: refused the same way, though v0-2 are listed.
    assert await asyncio.to_thread(exchange, port, 0, 2, b"\x00" * 40) is None
    # And the listener still serves the next client.
    again = await asyncio.to_thread(exchange, port, 18, 0, b"")
    assert again is not None and ApiVersionsResponse[0].decode(again[4:]).error_code == 0


async def test_acks_0_gets_no_answer_and_the_records_land(brokers: Brokers, kazoo: KazooClient) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await create_topic(brokers.by_id(await controller_of(brokers)), "events", partitions=1, rf=1)
    await settled_to(brokers, kazoo, "events", lambda s: len(s) == 1, "topic never agreed")

    def produce_and_count() -> int:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=0, enable_idempotence=False)
        try:
            for i in range(100):
                producer.send("events", value=f"fire-{i}".encode())
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2_000)
        try:
            partition = TopicPartition("events", 0)
            consumer.assign([partition])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if consumer.end_offsets([partition])[partition] == 100:
                    break
                time.sleep(0.05)
            return int(consumer.end_offsets([partition])[partition])
        finally:
            consumer.close()

    assert await asyncio.to_thread(produce_and_count) == 100
