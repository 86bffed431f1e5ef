"""Produce and consume through a Kafka listener against Keel's own listener, on one cluster.

3 brokers, each with a Kafka listener beside Keel's; the topic of `bench.produce` (3
partitions, RF 3, each broker leading one), acks=all, 1 KiB records in ready-made batches.
Each run, on the same fresh cluster:

- Keel's wire: `bench.produce`'s produce (msgpack Produce, `--connections` per partition, one
  request in flight on each) and its consumer reading everything back;
- Kafka's wire, the same batches: Kafka Produce v9 frames (encoded by `wire.kafka.codec`, as
  a client's would be) on the same number of connections to the Kafka listeners, then Kafka
  Fetch v12 requests from offset 0 until every record is back;
- the two produce passes first, then the two reads (each of both wires' records), the wires
  taking turns at going first from run to run;
- confluent-kafka (librdkafka) producing the same payload as records, and consuming it: what
  a real Kafka client gets (its own batching and compression off).

The target (issue: real Kafka clients): the Kafka listener's produce throughput at least 90 %
of Keel's own for the same batches.

    .venv/bin/python -m bench.kafka_listener [--runs 3] [--megabytes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.election import cpu_model
from bench.produce import MB, PARTITIONS, TOPIC, consume_throughput, leaders, produce_throughput
from node.broker.gc_tuning import tune_gc
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from wire import records
from wire.kafka.codec import build, request_schema

_LENGTH = struct.Struct(">i")


def start_brokers(
    connect: str, home: Path, extra: dict[str, str] | None = None
) -> tuple[LocalCluster, dict[int, int], dict[int, int]]:
    """Three brokers, with `extra` settings; (cluster, Keel's port by broker, the Kafka
    listener's port by broker)."""
    cluster = LocalCluster(home, connect)
    kafka_ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    for broker_id, kafka_port in kafka_ports.items():
        settings = {
            "message.max.bytes": "8388608",
            "replica.fetch.max.bytes": "8388608",
            "kafka.listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}",
            **(extra or {}),
        }
        cluster.new(broker_id, settings, home=home / f"broker-{broker_id}").start()
    return cluster, {b.broker_id: b.port for b in cluster.all}, kafka_ports


def kafka_request(api_key: int, version: int, correlation_id: int, fields: dict[str, object]) -> bytes:
    """A framed Kafka request, header v2 (every version used here is flexible)."""
    import io

    from kio.serial import entity_writer

    schema = request_schema(api_key, version)
    assert schema is not None and schema.__flexible__
    body = io.BytesIO()
    entity_writer(schema)(body, build(schema, fields))
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"bench" + b"\x00"
    payload = header + body.getvalue()
    return _LENGTH.pack(len(payload)) + payload


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes) -> bytes:
    writer.write(frame)
    (length,) = _LENGTH.unpack(await reader.readexactly(4))
    return await reader.readexactly(length)


async def kafka_produce(
    kafka_ports: dict[int, int], owners: dict[int, int], batch: bytes, batches: int, connections: int
) -> float:
    remaining = {p: batches // PARTITIONS + (1 if p < batches % PARTITIONS else 0) for p in range(PARTITIONS)}
    streams = [
        (p, await asyncio.open_connection("127.0.0.1", kafka_ports[owners[p]]))
        for p in range(PARTITIONS)
        for _ in range(connections)
    ]

    async def run(partition: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = kafka_request(
            0,
            9,
            1,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30_000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
            },
        )
        while remaining[partition] > 0:
            remaining[partition] -= 1
            answer = await exchange(reader, writer, frame)
            # correlation id, header tags, then the body; a zero error code is 0x0000 after the
            # partition index: checked by the consume pass reading every record back.
            assert len(answer) > 8

    started = time.perf_counter()
    await asyncio.gather(*(run(p, r, w) for p, (r, w) in streams))
    elapsed = time.perf_counter() - started
    for _, (_, writer) in streams:
        writer.close()
    return elapsed


async def kafka_consume(kafka_ports: dict[int, int], owners: dict[int, int], expected_records: int) -> float:
    from kafka.protocol.consumer import FetchResponse
    from kafka.record.default_records import DefaultRecordBatch

    started = time.perf_counter()
    got = 0
    for partition in range(PARTITIONS):
        reader, writer = await asyncio.open_connection("127.0.0.1", kafka_ports[owners[partition]])
        offset, correlation = 0, 0
        while True:
            correlation += 1
            frame = kafka_request(
                1,
                12,
                correlation,
                {
                    "replica_id": -1,
                    "max_wait_ms": 100,
                    "min_bytes": 1,
                    "max_bytes": 8 << 20,
                    "isolation_level": 0,
                    "session_id": 0,
                    "session_epoch": -1,
                    "topics": [
                        {
                            "topic": TOPIC,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "current_leader_epoch": -1,
                                    "fetch_offset": offset,
                                    "log_start_offset": -1,
                                    "partition_max_bytes": 8 << 20,
                                }
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                    "rack_id": "",
                },
            )
            answer = FetchResponse[12].decode(await exchange(reader, writer, frame), header=True)
            data = answer.responses[0].partitions[0]
            chunk = bytes(data.records or b"")
            if not chunk:
                break
            position = 0
            while position + records.LOG_OVERHEAD <= len(chunk):
                header = records.read_header(chunk, position)
                if position + header.size > len(chunk):
                    break
                batch = DefaultRecordBatch(chunk[position : position + header.size])
                assert batch.validate_crc(), "a batch fails its CRC-32C"
                got += header.records_count
                offset = header.next_offset
                position += header.size
            if offset >= data.high_watermark:
                break
        writer.close()
    elapsed = time.perf_counter() - started
    assert got == expected_records, f"read {got} of {expected_records} records"
    return elapsed


def confluent_round_trip(bootstrap: str, record: bytes, count: int) -> tuple[float, float]:
    """(produce seconds, consume seconds) of `count` records through librdkafka."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce("confluent", value=record, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0, "undelivered records"
    produced = time.perf_counter() - started
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("confluent", p, 0) for p in range(PARTITIONS)])
    started = time.perf_counter()
    got = 0
    while got < count:
        messages = consumer.consume(1_000, 0.05)
        got += sum(1 for m in messages if m.error() is None)
    consumed = time.perf_counter() - started
    consumer.close()
    return produced, consumed


async def create_confluent_topic(ports: dict[int, int]) -> None:
    from node.clients.admin import KeelAdminClient
    from wire.api import CreatableReplicaAssignment, CreatableTopic

    async with KeelAdminClient(",".join(f"127.0.0.1:{p}" for p in ports.values()), timeout=30) as admin:
        assignment = {p: [1 + (p + k) % 3 for k in range(3)] for p in range(PARTITIONS)}
        await admin.create_topics(
            [
                CreatableTopic(
                    name="confluent",
                    assignments=[
                        CreatableReplicaAssignment(partition=p, broker_ids=r) for p, r in assignment.items()
                    ],
                )
            ]
        )
        deadline = time.monotonic() + 60
        while True:
            answer = await admin.metadata(["confluent"])
            parts = answer.topics[0].partitions if answer.topics else []
            if len(parts) == PARTITIONS and all(p.leader >= 0 and len(p.isr) == 3 for p in parts):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the confluent topic never got full ISRs")
            await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=100, help="record payload per run and wire")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=512)
    parser.add_argument("--connections", type=int, default=2, help="producer connections per partition")
    args = parser.parse_args()
    tune_gc()
    record = bytes(range(256)) * (args.record_bytes // 256) + b"x" * (args.record_bytes % 256)
    batch = records.build_batch([(None, record)] * args.batch_records, timestamp=int(time.time() * 1000))
    payload_per_batch = args.record_bytes * args.batch_records
    batches = max(1, args.megabytes * MB // payload_per_batch)
    total = batches * payload_per_batch
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}; {PARTITIONS} partitions, RF 3, acks=all,"
        f" {args.record_bytes} B records in batches of {args.batch_records} ({len(batch) / 1024:.0f} KiB),"
        f" {args.connections} connection(s) per partition, {total / MB:.0f} MB per run and wire"
    )
    rows: dict[str, list[float]] = {k: [] for k in ("keel_p", "keel_c", "kafka_p", "kafka_c", "rd_p", "rd_c")}
    with tempfile.TemporaryDirectory(prefix="keel-kafka-listener-") as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        try:
            for run in range(1, args.runs + 1):
                home = Path(tmp) / f"run{run}"
                home.mkdir()
                cluster, ports, kafka_ports = start_brokers(f"{zookeeper.connect_string}/run{run}", home)
                try:
                    owners = uvloop.run(leaders(ports))
                    expected = batches * args.batch_records
                    # The wires take turns going first: the first pass writes new segments and
                    # reads a cold cache, the second neither.
                    passes = {
                        "keel_p": functools.partial(
                            produce_throughput, ports, owners, batch, batches, args.connections
                        ),
                        "kafka_p": functools.partial(
                            kafka_produce, kafka_ports, owners, batch, batches, args.connections
                        ),
                    }
                    reads = {
                        "keel_c": functools.partial(consume_throughput, ports, 2 * expected),
                        "kafka_c": functools.partial(kafka_consume, kafka_ports, owners, 2 * expected),
                    }
                    order = 1 if run % 2 else -1
                    timed = {
                        name: uvloop.run(make())
                        for group in (passes, reads)
                        for name, make in list(group.items())[::order]
                    }
                    keel_p, kafka_p, keel_c, kafka_c = (
                        timed[k] for k in ("keel_p", "kafka_p", "keel_c", "kafka_c")
                    )
                    uvloop.run(create_confluent_topic(ports))
                    bootstrap = ",".join(f"127.0.0.1:{p}" for p in kafka_ports.values())
                    rd_p, rd_c = confluent_round_trip(bootstrap, record, expected)
                finally:
                    cluster.kill_all()
                # Each consume pass reads both wires' records back: its rate counts both.
                for key, seconds, volume in (
                    ("keel_p", keel_p, total),
                    ("keel_c", keel_c, 2 * total),
                    ("kafka_p", kafka_p, total),
                    ("kafka_c", kafka_c, 2 * total),
                    ("rd_p", rd_p, total),
                    ("rd_c", rd_c, total),
                ):
                    rows[key].append(volume / MB / seconds)
                print(
                    f"run {run}: produce Keel's wire {rows['keel_p'][-1]:.1f} MB/s, Kafka's wire"
                    f" {rows['kafka_p'][-1]:.1f} MB/s ({rows['kafka_p'][-1] / rows['keel_p'][-1]:.0%}),"
                    f" confluent-kafka {rows['rd_p'][-1]:.1f} MB/s | consume Keel's"
                    f" {rows['keel_c'][-1]:.1f}, Kafka's {rows['kafka_c'][-1]:.1f},"
                    f" confluent-kafka {rows['rd_c'][-1]:.1f} MB/s"
                )
        finally:
            zookeeper.stop()
    median = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"median of {args.runs}: produce Keel's wire {median['keel_p']:.1f} MB/s, Kafka's wire"
        f" {median['kafka_p']:.1f} MB/s ({median['kafka_p'] / median['keel_p']:.0%} of Keel's),"
        f" confluent-kafka {median['rd_p']:.1f} MB/s; consume Keel's {median['keel_c']:.1f} MB/s,"
        f" Kafka's {median['kafka_c']:.1f} MB/s ({median['kafka_c'] / median['keel_c']:.0%}),"
        f" confluent-kafka {median['rd_c']:.1f} MB/s"
    )


if __name__ == "__main__":
    main()
