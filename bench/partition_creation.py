"""Creating partition states in ZooKeeper: the controller's store against a bare client making
the same writes, for the floor under the controller's topic creation.

When topics are created, the controller writes, per topic, `/brokers/topics/<t>/partitions`
and, per partition, `/brokers/topics/<t>/partitions/<p>` and its `state` (Kafka's
createTopicPartitionStatesRaw). Each run writes a fresh set of topics (`--partitions` in topics
of 1,000, replication factor 3, their assignments already in `/brokers/topics`), by two writers
in turn on one embedded ZooKeeper:

  - Keel: `ZkClusterStore.create_partition_states`, as the controller calls it: multi-ops of
    500 partitions, at most 10 in flight, each fenced by `/controller_epoch` and `/controller`
    and, with `--records` (the warm standby), carrying its change record;
  - bare: one client sending the same creates in the same multi-ops, windowed the same, through
    the same multi-op codec (node/zk/multi_codec.py), with no fence, record or result handling.

Medians over the runs, in partitions per second, and their ratio. The bare figure is what this
machine's ZooKeeper allows any controller: a creation rate above it cannot be had with one
znode per partition state.

    .venv/bin/python -m bench.partition_creation [--partitions 200000] [--runs 3] [--records]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from actors.base.clock import SystemClock
from actors.base.ports import LeaderAndIsr, TopicPartition
from bench.election import cpu_model
from node.broker.gc_tuning import tune_gc
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk import data, paths
from node.zk.client import ZooKeeperClient, multi_failure
from node.zk.in_flight import MAX_IN_FLIGHT_REQUESTS, windowed
from node.zk.store import ZkClusterStore

PER_TOPIC = 1000
PARTITIONS_PER_MULTI = 500
BROKERS = (1, 2, 3)


def states_of(prefix: str, partitions: int) -> dict[TopicPartition, LeaderAndIsr]:
    states = {}
    for i in range(partitions):
        replicas = tuple(BROKERS[(i + k) % 3] for k in range(3))
        states[TopicPartition(f"{prefix}-{i // PER_TOPIC:04d}", i % PER_TOPIC)] = LeaderAndIsr(
            replicas[0], 0, replicas
        )
    return states


async def assign(zk: ZooKeeperClient, states: dict[TopicPartition, LeaderAndIsr]) -> None:
    """The topics' assignments, as an admin writes them before the controller's turn."""
    topics: dict[str, dict[str, list[int]]] = {}
    for tp, state in states.items():
        topics.setdefault(tp.topic, {})[str(tp.partition)] = list(state.isr)
    writes = (
        functools.partial(
            zk.create, paths.topic(topic), orjson.dumps({"version": 3, "partitions": assignment})
        )
        for topic, assignment in topics.items()
    )
    await windowed(writes, MAX_IN_FLIGHT_REQUESTS)


async def keel_create(store: ZkClusterStore, states: dict[TopicPartition, LeaderAndIsr], fence: int) -> float:
    started = time.perf_counter()
    results = await store.create_partition_states(states, 1, fence)
    elapsed = time.perf_counter() - started
    failed = [r for r in results.values() if isinstance(r, Exception)]
    assert not failed, f"{len(failed)} partition states not created, e.g. {failed[0]!r}"
    return elapsed


async def bare_create(zk: ZooKeeperClient, states: dict[TopicPartition, LeaderAndIsr]) -> float:
    ordered = sorted(states)
    chunks = [ordered[i : i + PARTITIONS_PER_MULTI] for i in range(0, len(ordered), PARTITIONS_PER_MULTI)]

    async def one(chunk: list[TopicPartition]) -> None:
        ops = [
            zk.create_op(paths.topic_partitions(t))
            for t in sorted({tp.topic for tp in chunk if tp.partition == 0})
        ]
        for tp in chunk:
            ops.append(zk.create_op(paths.topic_partition(tp.topic, tp.partition)))
            ops.append(
                zk.create_op(
                    paths.partition_state(tp.topic, tp.partition), data.encode_partition_state(states[tp], 1)
                )
            )
        failure = multi_failure(await zk.multi(ops))
        assert failure is None, f"a bare create failed: {failure!r}"

    started = time.perf_counter()
    await windowed((functools.partial(one, c) for c in chunks), MAX_IN_FLIGHT_REQUESTS)
    return time.perf_counter() - started


async def measure(connect: str, partitions: int, runs: int, records: bool) -> None:
    zk = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await zk.start()
    store = ZkClusterStore(zk, SystemClock())
    await store.ensure_persistent_paths()
    fence = await store.register_controller_and_increment_epoch(1)
    if records:
        store.change_records = True
        await store.start_change_records(fence.epoch, fence.zk_version)
    keel, bare = [], []
    for run in range(runs):
        # Each writer its own fresh topics, in turn, so that neither meets a ZooKeeper the
        # other just filled more than the other does.
        mine, theirs = states_of(f"k{run}", partitions), states_of(f"b{run}", partitions)
        await assign(zk, mine)
        await assign(zk, theirs)
        keel.append(await keel_create(store, mine, fence.zk_version))
        bare.append(await bare_create(zk, theirs))
        print(
            f"run {run + 1}: Keel {partitions / keel[-1]:,.0f} partitions/s ({keel[-1]:.2f} s), "
            f"bare {partitions / bare[-1]:,.0f} partitions/s ({bare[-1]:.2f} s)",
            flush=True,
        )
    await zk.close()
    k, b = statistics.median(keel), statistics.median(bare)
    print(
        f"median of {runs}: Keel {partitions / k:,.0f} partitions/s ({k:.2f} s), "
        f"bare {partitions / b:,.0f} partitions/s ({b:.2f} s): {k / b:.2f}x the bare writes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=200_000, help="per run and writer (at least 1)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--records", action="store_true", help="Keel writes the warm standby's change records"
    )
    args = parser.parse_args()
    if args.partitions < 1 or args.runs < 1:
        parser.error("--partitions and --runs must be at least 1")
    tune_gc()
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}; {args.partitions:,} partitions per run "
        f"in topics of {PER_TOPIC:,}; change records {'on' if args.records else 'off'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        # 2 writers x runs x partitions x 3 znodes, about 1 KiB each in ZooKeeper's heap
        # (less, and its collector runs without end before the last run is written).
        heap_mb = max(512, min(12288, 2 * args.runs * args.partitions * 3 // 1024))
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk", heap_mb=heap_mb)
        connect = zookeeper.start()
        try:
            asyncio.run(measure(connect, args.partitions, args.runs, args.records))
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    main()
