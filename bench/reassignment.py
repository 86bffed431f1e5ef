"""Partition reassignment: how fast data moves to a new broker, unthrottled and throttled, and
what it does to produce latency.

Two brokers on this machine and an embedded ZooKeeper. A topic of `--partitions` partitions,
all on broker 1 (replication factor 1), gets `--megabytes` of 1 KiB records (acks=1). Then, in
one run:

- consume: a KeelConsumer reads all of it from broker 1 (the figure the move is compared
  with), and a raw reader fetches the same bytes without decoding them (what a follower does);
- move: every partition is reassigned from [1] to [2] with no throttle; the rate is the bytes
  moved over the time from the request until no reassignment is in progress;
- throttled move: back from [2] to [1], with the throttles `keel reassign --throttle` sets
  (`--throttle-mb` MB/s on both brokers, leader and follower throttled replicas per partition);
  the rate is taken over the same span and compared with the throttle;
- produce latency: all along, acks=all round trips of small batches (one in flight, 20 ms
  apart) to another topic with replicas [1, 2], led by broker 1, whose follower shares its
  fetcher with the move; p50 and p99 before the moves, during the unthrottled move, and during
  the throttled one.

    .venv/bin/python -m bench.reassignment [--megabytes 1000] [--throttle-mb 40]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.election import cpu_model, percentile
from node.broker.gc_tuning import tune_gc
from node.clients.admin import KeelAdminClient
from node.clients.consumer import KeelConsumer
from node.clients.throttles import clear_throttle_resources, throttle_plan, throttle_resources
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from wire import records
from wire.api import (
    CreatableReplicaAssignment,
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
from wire.errors import WireError

TOPIC = "moving"
PROBE = "probe"
MB = 1_000_000


def start_brokers(connect: str, home: Path) -> tuple[LocalCluster, dict[int, int]]:
    cluster = LocalCluster(home, connect)
    for broker_id in (1, 2):
        cluster.new(broker_id, {"log.segment.bytes": "268435456"}, home=home / f"broker-{broker_id}").start()
    return cluster, {b.broker_id: b.port for b in cluster.all}


def bootstrap(ports: dict[int, int]) -> str:
    return ",".join(f"127.0.0.1:{p}" for p in ports.values())


async def create_topics(ports: dict[int, int], partitions: int) -> None:
    async with KeelAdminClient(bootstrap(ports), timeout=30) as admin:
        deadline = time.monotonic() + 60
        while True:
            try:
                if len((await admin.describe_cluster()).brokers) == 2:
                    break
            except WireError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise RuntimeError("the brokers did not all register")
            await asyncio.sleep(0.1)
        await admin.create_topics(
            [
                CreatableTopic(
                    name=TOPIC,
                    assignments=[
                        CreatableReplicaAssignment(partition=p, broker_ids=[1]) for p in range(partitions)
                    ],
                ),
                CreatableTopic(
                    name=PROBE, assignments=[CreatableReplicaAssignment(partition=0, broker_ids=[1, 2])]
                ),
            ]
        )
        while True:
            answer = await admin.metadata([TOPIC, PROBE])
            ready = {t.name: t.partitions for t in answer.topics}
            if (
                len(ready.get(TOPIC, [])) == partitions
                and all(p.leader == 1 for p in ready[TOPIC])
                and [len(p.isr) for p in ready.get(PROBE, [])] == [2]
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the topics never got leaders")
            await asyncio.sleep(0.1)


def produce_request(topic: str, partition: int, batch: bytes, acks: int) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=30_000,
        topic_data=[
            ProduceTopicData(
                name=topic, partition_data=[ProducePartitionData(index=partition, records=batch)]
            )
        ],
    )


async def fill(port: int, partitions: int, batch: bytes, batches: int) -> float:
    clients = [await RpcClient.connect("127.0.0.1", port, request_timeout=60) for _ in range(partitions)]
    remaining = dict.fromkeys(range(partitions), batches // partitions)

    async def run(partition: int, client: RpcClient) -> None:
        request = produce_request(TOPIC, partition, batch, 1)
        while remaining[partition] > 0:
            remaining[partition] -= 1
            response = await client.send(request)
            assert isinstance(response, ProduceResponse)
            assert response.responses[0].partition_responses[0].error_code == 0

    started = time.perf_counter()
    await asyncio.gather(*(run(p, c) for p, c in enumerate(clients)))
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    return elapsed


async def consume(ports: dict[int, int], expected_records: int) -> float:
    got = 0
    started = time.perf_counter()
    async with KeelConsumer(bootstrap(ports), TOPIC, from_beginning=True, max_wait_ms=100) as consumer:
        while got < expected_records:
            got += len(await consumer.poll())
    return time.perf_counter() - started


async def raw_read(port: int, partitions: int, total_bytes: int) -> float:
    """Fetch every byte from the leader as a consumer, without decoding records: 1 MiB per
    partition and 10 MiB per response, as a follower asks by default."""
    client = await RpcClient.connect("127.0.0.1", port, request_timeout=60)
    offsets = dict.fromkeys(range(partitions), 0)
    got = 0
    started = time.perf_counter()
    while got < total_bytes:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=100,
            max_bytes=10 * 1024 * 1024,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic=TOPIC,
                    partitions=[
                        FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1024 * 1024)
                        for p, o in offsets.items()
                    ],
                )
            ],
        )
        response = await client.send(request)
        assert isinstance(response, FetchResponse)
        progressed = False
        for topic in response.responses:
            for data in topic.partitions:
                if data.records:
                    got += len(data.records)
                    *_, (_, last) = records.batches(data.records, check_crc=False)
                    offsets[data.partition_index] = last.last_offset + 1
                    progressed = True
        if not progressed:
            break
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


async def replica_bytes(port: int) -> int:
    async with KeelAdminClient(f"127.0.0.1:{port}", timeout=30) as admin:
        response = await admin.describe_log_dirs(None)
    return sum(
        p.partition_size for r in response.results for t in r.topics if t.name == TOPIC for p in t.partitions
    )


async def move(
    ports: dict[int, int], partitions: int, source: int, target: int, *, throttle: int | None, total: int
) -> float:
    """Reassign every partition from [source] to [target]; seconds until none is in progress."""
    async with KeelAdminClient(bootstrap(ports), timeout=60) as admin:
        current = {(TOPIC, p): [source] for p in range(partitions)}
        targets = {(TOPIC, p): [target] for p in range(partitions)}
        if throttle is not None:
            response = await admin.incremental_alter_configs(
                throttle_resources(throttle_plan(current, targets), throttle)
            )
            assert all(r.error_code == 0 for r in response.responses), response
            await asyncio.sleep(1.0)  # the brokers apply it from their config-change watch
        started = time.perf_counter()
        answer = await admin.alter_partition_reassignments(dict(targets))
        assert all(p.error_code == 0 for t in answer.responses for p in t.partitions), answer
        while True:
            if not (await admin.list_partition_reassignments(None)).topics:
                break
            await asyncio.sleep(0.05)  # polling the controller, as `keel reassign --wait` does
        elapsed = time.perf_counter() - started
        if throttle is not None:
            await admin.incremental_alter_configs(clear_throttle_resources([1, 2], [TOPIC]))
    moved = await replica_bytes(ports[target])
    if moved < total * 0.99:
        raise RuntimeError(f"only {moved} of {total} bytes arrived on broker {target}")
    return elapsed


class Latency:
    """acks=all round trips to the probe topic, one request at a time with a short pause between
    (a producer's batch in flight: a broker serves one request per connection at a time, so
    requests sent faster than they complete would measure the queue, not the round trip)."""

    def __init__(self, port: int, batch: bytes, pause_s: float) -> None:
        self._port = port
        self._batch = batch
        self._pause_s = pause_s
        self.phase = "idle"
        self.samples: dict[str, list[float]] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._client = await RpcClient.connect("127.0.0.1", self._port, request_timeout=60)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        request = produce_request(PROBE, 0, self._batch, -1)
        while not self._stop.is_set():
            phase = self.phase
            started = time.perf_counter()
            response = await self._client.send(request)
            assert isinstance(response, ProduceResponse)
            if response.responses[0].partition_responses[0].error_code == 0:
                self.samples.setdefault(phase, []).append(time.perf_counter() - started)
            await asyncio.sleep(self._pause_s)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self._client.close()

    def summary(self, phase: str) -> str:
        values = self.samples.get(phase, [])
        if not values:
            return "no samples"
        return (
            f"p50 {percentile(values, 0.5) * 1000:.1f} ms p99 {percentile(values, 0.99) * 1000:.1f} ms"
            f" ({len(values)} sends)"
        )


async def scenario(ports: dict[int, int], args: argparse.Namespace, batch: bytes, batches: int) -> None:
    await create_topics(ports, args.partitions)
    filled = await fill(ports[1], args.partitions, batch, batches)
    total = await replica_bytes(ports[1])
    record_count = batches // args.partitions * args.partitions * args.batch_records
    print(f"filled {total / MB:.0f} MB on broker 1 in {filled:.1f} s ({total / MB / filled:.1f} MB/s)")
    consumed = await consume(ports, record_count)
    raw = await raw_read(ports[1], args.partitions, total)
    consume_rate, raw_rate = total / MB / consumed, total / MB / raw
    print(f"consume (KeelConsumer) {consume_rate:.1f} MB/s, raw fetch {raw_rate:.1f} MB/s")
    probe = Latency(ports[1], records.build_batch([(None, b"p" * 100)] * 10, timestamp=0), 0.02)
    await probe.start()
    await asyncio.sleep(3.0)
    probe.phase = "unthrottled"
    unthrottled = await move(ports, args.partitions, 1, 2, throttle=None, total=total)
    probe.phase = "between"
    await asyncio.sleep(1.0)
    probe.phase = "throttled"
    limit = args.throttle_mb * MB
    throttled = await move(ports, args.partitions, 2, 1, throttle=limit, total=total)
    await probe.stop()
    rate, throttled_rate = total / MB / unthrottled, total / MB / throttled
    print(
        f"move {rate:.1f} MB/s in {unthrottled:.1f} s = {rate / consume_rate:.0%} of consume"
        f" ({rate / raw_rate:.0%} of raw fetch)"
    )
    print(
        f"throttled move at {args.throttle_mb} MB/s: {throttled_rate:.1f} MB/s in {throttled:.1f} s"
        f" ({throttled_rate / args.throttle_mb - 1:+.1%} from the throttle)"
    )
    print(
        f"produce latency (acks=all, probe topic led by broker 1): before {probe.summary('idle')};"
        f" unthrottled move {probe.summary('unthrottled')}; throttled move {probe.summary('throttled')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1000, help="record payload to move")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--throttle-mb", type=int, default=40, help="MB/s for the throttled move")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=512)
    args = parser.parse_args()
    tune_gc()
    record = bytes(range(256)) * (args.record_bytes // 256) + b"x" * (args.record_bytes % 256)
    batch = records.build_batch([(None, record)] * args.batch_records, timestamp=int(time.time() * 1000))
    batches = max(args.partitions, args.megabytes * MB // (args.record_bytes * args.batch_records))
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}; {args.partitions} partitions moved"
        f" [1] -> [2] -> [1], {args.record_bytes} B records in batches of {args.batch_records}"
    )
    with tempfile.TemporaryDirectory(prefix="keel-reassign-") as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        try:
            home = Path(tmp) / "run"
            home.mkdir()
            cluster, ports = start_brokers(f"{zookeeper.connect_string}/bench", home)
            try:
                uvloop.run(scenario(ports, args, batch, batches))
            finally:
                cluster.kill_all()
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    main()
