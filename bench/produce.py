"""Produce and consume throughput of the replicated log, and produce latency.

3 brokers on this machine, a topic of 3 partitions with replication factor 3 (each broker
leads one), 1 KiB records in batches, acks=all. Each run starts a fresh cluster and measures:

- produce throughput: every partition gets `--connections` clients, each with one request
  in flight (a broker handles one request per connection at a time, as Kafka does), until
  `--megabytes` of record payload are acknowledged by every in-sync replica;
- consume throughput: one consumer reads all of it back from the leaders;
- produce latency at a fixed moderate rate (`--latency-rate` records/s in small batches):
  p50 and p99 of the acks=all round trip;
- in the same run, the baseline (`bench.baseline_pipe`): the same batches written to three
  files and pushed through loopback sockets by a minimal asyncio program in three processes,
  with as many frames in flight.

The clients send ready-made record batches (built once, as a producer's accumulator would
have them): the figures measure the brokers, not batch encoding in the benchmark.

    .venv/bin/python -m bench.produce [--runs 3] [--megabytes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.election import cpu_model, percentile
from node.broker.gc_tuning import tune_gc
from node.clients.admin import KeelAdminClient
from node.clients.consumer import KeelConsumer
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from wire import records
from wire.api import (
    CreatableReplicaAssignment,
    CreatableTopic,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from wire.client import RpcClient
from wire.errors import WireError

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "bench"
PARTITIONS = 3
MB = 1_000_000


def start_brokers(connect: str, home: Path) -> tuple[LocalCluster, dict[int, int]]:
    cluster = LocalCluster(home, connect)
    for broker_id in (1, 2, 3):
        settings = {"message.max.bytes": "8388608", "replica.fetch.max.bytes": "8388608"}
        cluster.new(broker_id, settings, home=home / f"broker-{broker_id}").start()
    return cluster, {b.broker_id: b.port for b in cluster.all}


async def leaders(ports: dict[int, int]) -> dict[int, int]:
    """Create the topic (partition p led by broker p+1) and wait until every ISR is full."""
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    async with KeelAdminClient(bootstrap, timeout=30) as admin:
        deadline = time.monotonic() + 60
        while True:
            try:
                if len((await admin.describe_cluster()).brokers) == 3:
                    break
            except WireError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise RuntimeError("the brokers did not all register")
            await asyncio.sleep(0.1)
        assignment = {p: [1 + (p + k) % 3 for k in range(3)] for p in range(PARTITIONS)}
        await admin.create_topics(
            [
                CreatableTopic(
                    name=TOPIC,
                    assignments=[
                        CreatableReplicaAssignment(partition=p, broker_ids=r) for p, r in assignment.items()
                    ],
                )
            ]
        )
        while True:
            answer = await admin.metadata([TOPIC])
            parts = answer.topics[0].partitions if answer.topics else []
            if len(parts) == PARTITIONS and all(p.leader >= 0 and len(p.isr) == 3 for p in parts):
                return {p.partition: p.leader for p in parts}
            if time.monotonic() > deadline:
                raise RuntimeError("the topic never got full ISRs")
            await asyncio.sleep(0.1)


def produce_request(partition: int, batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceTopicData(
                name=TOPIC, partition_data=[ProducePartitionData(index=partition, records=batch)]
            )
        ],
    )


async def produce_throughput(
    ports: dict[int, int], owners: dict[int, int], batch: bytes, batches: int, connections: int
) -> float:
    clients = [
        (p, await RpcClient.connect("127.0.0.1", ports[owners[p]], request_timeout=60))
        for p in range(PARTITIONS)
        for _ in range(connections)
    ]
    # The same number of batches for every partition, shared by its connections.
    remaining = {p: batches // PARTITIONS + (1 if p < batches % PARTITIONS else 0) for p in range(PARTITIONS)}

    async def run(partition: int, client: RpcClient) -> None:
        request = produce_request(partition, batch)
        while remaining[partition] > 0:
            remaining[partition] -= 1
            response = await client.send(request)
            assert isinstance(response, ProduceResponse)
            error = response.responses[0].partition_responses[0].error_code
            assert error == 0, f"produce failed with error {error}"

    started = time.perf_counter()
    await asyncio.gather(*(run(p, c) for p, c in clients))
    elapsed = time.perf_counter() - started
    for _, client in clients:
        await client.close()
    return elapsed


async def consume_throughput(ports: dict[int, int], expected_records: int) -> float:
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    got = 0
    started = time.perf_counter()
    async with KeelConsumer(bootstrap, TOPIC, from_beginning=True, max_wait_ms=100) as consumer:
        while got < expected_records:
            got += len(await consumer.poll())
    return time.perf_counter() - started


async def produce_latency(
    ports: dict[int, int], owners: dict[int, int], record: bytes, rate: int, seconds: float
) -> list[float]:
    """acks=all round trips of 10-record batches sent at `rate` records/s, spread over the
    partitions, each request on its own schedule (not waiting for the one before)."""
    batch = records.build_batch([(None, record)] * 10, timestamp=int(time.time() * 1000))
    clients = {
        p: await RpcClient.connect("127.0.0.1", ports[owners[p]], request_timeout=60)
        for p in range(PARTITIONS)
    }
    interval = 10 / rate
    latencies: list[float] = []

    async def one(partition: int) -> None:
        started = time.perf_counter()
        response = await clients[partition].send(produce_request(partition, batch))
        assert isinstance(response, ProduceResponse)
        assert response.responses[0].partition_responses[0].error_code == 0
        latencies.append(time.perf_counter() - started)

    tasks = []
    begin = time.perf_counter()
    for i in range(int(seconds / interval)):
        await asyncio.sleep(max(0.0, begin + i * interval - time.perf_counter()))
        tasks.append(asyncio.create_task(one(i % PARTITIONS)))
    await asyncio.gather(*tasks)
    for client in clients.values():
        await client.close()
    return latencies


def baseline(home: Path, batch: bytes, frames: int, in_flight: int) -> float:
    leader_port, *follower_ports = free_ports(3)
    command = [sys.executable, "-m", "bench.baseline_pipe"]
    processes = [
        subprocess.Popen([*command, "follower", str(port), str(home / f"follower-{port}.bin")], cwd=ROOT)
        for port in follower_ports
    ]
    time.sleep(0.5)
    leader = [*command, "leader", str(leader_port), str(home / "leader.bin"), *map(str, follower_ports)]
    processes.append(subprocess.Popen(leader, cwd=ROOT))
    try:
        return uvloop.run(push_through_baseline(leader_port, batch, frames, in_flight))
    finally:
        for process in processes:
            process.kill()
            process.wait(10)


async def push_through_baseline(port: int, batch: bytes, frames: int, in_flight: int) -> float:
    for _ in range(100):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            break
        except OSError:
            await asyncio.sleep(0.05)
    else:
        raise RuntimeError("the baseline leader did not start")
    frame = len(batch).to_bytes(4, "big") + batch
    window = asyncio.Semaphore(in_flight)

    async def acks() -> None:
        for _ in range(frames):
            await reader.readexactly(1)
            window.release()

    started = time.perf_counter()
    collector = asyncio.create_task(acks())
    for _ in range(frames):
        await window.acquire()
        writer.write(frame)
        await writer.drain()
    await collector
    elapsed = time.perf_counter() - started
    writer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=200, help="record payload per run")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=512)
    parser.add_argument("--connections", type=int, default=2, help="producer connections per partition")
    parser.add_argument("--latency-rate", type=int, default=2000, help="records/s for the latency test")
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
        f" {args.connections} connection(s) per partition, {total / MB:.0f} MB per run"
    )
    produced, consumed, raw, p50s, p99s = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="keel-produce-") as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        try:
            for run in range(1, args.runs + 1):
                home = Path(tmp) / f"run{run}"
                home.mkdir()
                cluster, ports = start_brokers(f"{zookeeper.connect_string}/run{run}", home)
                try:
                    owners = uvloop.run(leaders(ports))
                    elapsed = uvloop.run(produce_throughput(ports, owners, batch, batches, args.connections))
                    read = uvloop.run(consume_throughput(ports, batches * args.batch_records))
                    latencies = uvloop.run(produce_latency(ports, owners, record, args.latency_rate, 5.0))
                finally:
                    cluster.kill_all()
                ceiling = baseline(home, batch, batches, PARTITIONS * args.connections)
                produced.append(total / MB / elapsed)
                consumed.append(total / MB / read)
                raw.append(total / MB / ceiling)
                p50s.append(percentile(latencies, 0.5) * 1000)
                p99s.append(percentile(latencies, 0.99) * 1000)
                print(
                    f"run {run}: produce {produced[-1]:.1f} MB/s, consume {consumed[-1]:.1f} MB/s,"
                    f" latency at {args.latency_rate} records/s p50 {p50s[-1]:.1f} ms p99 {p99s[-1]:.1f} ms"
                    f" | baseline {raw[-1]:.1f} MB/s"
                )
        finally:
            zookeeper.stop()
    k, r = statistics.median(produced), statistics.median(raw)
    print(
        f"median of {args.runs}: produce {k:.1f} MB/s ({k / r:.0%} of the baseline {r:.1f} MB/s),"
        f" consume {statistics.median(consumed):.1f} MB/s,"
        f" latency p50 {statistics.median(p50s):.1f} ms p99 {statistics.median(p99s):.1f} ms"
    )


if __name__ == "__main__":
    main()
