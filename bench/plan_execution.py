"""Plan execution: how long the planner's executor takes to carry out a 100-move plan with
data, against the time the moves' bytes need at the throttle.

Five brokers on this machine and an embedded ZooKeeper. A topic of `--partitions` partitions
with replication factor 2, all on brokers 1-3, gets `--kib` KiB of 1 KiB records per partition
(acks=all). The plan replaces the second replica of every partition with broker 4 or 5 (one
move per partition), and a PlanExecutor carries it out as the planner does: at most
`--moves-per-broker` moves in flight per broker, the throttle `--throttle-mb` MB/s on every
broker of the plan, a look every second. Reported:

- the execution time, from `start` until the plan is complete (throttles removed);
- the sum of the moves' bytes over the throttle (the time one throttled stream would need);
- the bound the per-broker throttles set: the most bytes any one broker sends as a leader or
  receives as a new follower, over the throttle (brokers copy in parallel);
- and the executor's own overhead beyond that bound.

    .venv/bin/python -m bench.plan_execution [--partitions 100] [--kib 500] [--throttle-mb 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from actors.base.clock import SystemClock
from bench.election import cpu_model
from node.clients.admin import KeelAdminClient
from node.clients.producer import KeelProducer
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.planner.executor import PlanExecutor
from wire.api import CreatableReplicaAssignment, CreatableTopic
from wire.errors import WireError

TOPIC = "bench"
MB = 1_000_000
RECORD = 1024


def bootstrap(cluster: LocalCluster) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in cluster.all)


async def wait_for_brokers(cluster: LocalCluster, count: int) -> None:
    deadline = time.monotonic() + 60
    async with KeelAdminClient(bootstrap(cluster), timeout=30) as admin:
        while True:
            try:
                if len((await admin.describe_cluster()).brokers) == count:
                    return
            except WireError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the brokers did not register")
            await asyncio.sleep(0.1)


async def fill(cluster: LocalCluster, partitions: int, kib: int) -> dict[int, list[int]]:
    assignment = {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(partitions)}
    topic = CreatableTopic(
        name=TOPIC,
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition=p, broker_ids=r) for p, r in assignment.items()],
    )
    async with KeelAdminClient(bootstrap(cluster), timeout=30) as admin:
        (result,) = (await admin.create_topics([topic])).topics
        assert result.error_code == 0, result.error_message
    value = b"x" * RECORD
    async with KeelProducer(bootstrap(cluster), acks=-1, request_timeout=30, delivery_timeout=60) as producer:
        for p in range(partitions):
            for start in range(0, kib, 256):
                await producer.send_many(TOPIC, [(None, value)] * min(256, kib - start), partition=p)
    return assignment


async def scenario(cluster: LocalCluster, args: argparse.Namespace, state_dir: Path) -> None:
    await wait_for_brokers(cluster, 5)
    started = time.monotonic()
    current = await fill(cluster, args.partitions, args.kib)
    print(f"produced {args.partitions * args.kib * RECORD / MB:.1f} MB in {time.monotonic() - started:.1f} s")
    plan = [
        {"topic": TOPIC, "partition": p, "replicas": [replicas[0], 4 + p % 2]}
        for p, replicas in current.items()
    ]
    throttle = args.throttle_mb * MB
    executor = PlanExecutor(
        lambda: KeelAdminClient(bootstrap(cluster), timeout=30),
        max_moves_per_broker=args.moves_per_broker,
        throttle_bytes_per_s=throttle,
        state_dir=str(state_dir),
        clock=SystemClock(),
    )
    try:
        started = time.monotonic()
        await executor.start("bench", plan)  # sizes asked of the leaders (DescribeLogDirs)
        await executor.wait()
        elapsed = time.monotonic() - started
        status = executor.status()
        sizes = {m.tp: m.size_bytes for m in executor.moves()}
    finally:
        await executor.close()
    assert status["state"] == "complete", status
    total = int(str(status["bytes_total"]))
    sent: Counter[int] = Counter()
    received: Counter[int] = Counter()
    for entry in plan:
        size = sizes[TOPIC, int(str(entry["partition"]))]
        replicas = entry["replicas"]
        assert isinstance(replicas, list)
        sent[replicas[0]] += size
        received[replicas[1]] += size
    busiest = max([*sent.values(), *received.values()])
    serial, bound = total / throttle, busiest / throttle
    print(
        f"{status['moves_done']} moves, {total / MB:.1f} MB copied, throttle {args.throttle_mb} MB/s "
        f"per broker, at most {args.moves_per_broker} moves in flight per broker"
    )
    print(f"execution: {elapsed:.1f} s (plan start to complete, throttles removed)")
    print(
        f"sum of the moves' bytes at the throttle: {serial:.1f} s "
        f"(execution is {elapsed / serial:.2f}x of it)"
    )
    print(
        f"per-broker bound (busiest broker {busiest / MB:.1f} MB at the throttle): {bound:.1f} s "
        f"(execution is {elapsed / bound:.2f}x of it, {elapsed - bound:+.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100, help="partitions, one move each")
    parser.add_argument("--kib", type=int, default=500, help="KiB of records per partition")
    parser.add_argument("--throttle-mb", type=int, default=5, help="replication throttle, MB/s per broker")
    parser.add_argument("--moves-per-broker", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="keel-plan-exec-") as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        try:
            cluster = LocalCluster(Path(tmp) / "run", f"{zookeeper.connect_string}/bench")
            for broker_id in range(1, 6):
                cluster.new(broker_id, home=Path(tmp) / "run" / f"broker-{broker_id}").start()
            try:
                asyncio.run(scenario(cluster, args, Path(tmp) / "state"))
            finally:
                cluster.kill_all()
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    main()
