"""Controlled shutdown at scale: 30k partitions, replication factor 3, 3 brokers, so the
broker that stops leads 10k of them.

Each run starts from a fresh cluster (topics and states written straight into ZooKeeper),
sends SIGTERM to a broker that is not the controller, and times from the signal:

- leaders moved in ZooKeeper: until every state znode of a partition it led has been
  written (one data watch on each, armed before the signal);
- leaders moved, applied: until both other brokers' Metadata show a new leader for every
  partition of a small sentinel topic that sorts after every other (as in
  bench/broker_failure.py: the controller sends the election's LeaderAndIsr sorted by
  partition, before UpdateMetadata, on one ordered channel, so by then both have applied
  every moved leader);
- exit: until the process has exited. The broker waits for the controller's answer, which
  comes after the leader moves and after its other 20k replicas have left their ISRs.

It then checks in ZooKeeper that no partition names the stopped broker as leader or ISR
member, and that every state znode was last written before the broker's znode went (its
mzxid is below `/brokers/ids`' pzxid): the leaders moved before the broker left, not
after. In the same run, the baseline: 10k conditional sets in fenced multi-ops of 500 by one
bare ZooKeeper client, the writes of the leader moves alone.

    .venv/bin/python -m bench.controlled_shutdown [--partitions 30000] [--runs 3]
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import time

import orjson
import uvloop

from bench.broker_failure import baseline, leaders_moved_on_survivors
from bench.failover import (
    BROKERS,
    PER_TOPIC,
    controller_idle,
    topic_names,
    wait_for,
)
from bench.scale import fresh_clusters, parse_args
from node.cluster.local import BrokerProcess, LocalCluster
from node.zk.client import DATA_CHANGED, ZooKeeperClient


def state_paths(partitions: int) -> list[str]:
    paths = [
        f"/brokers/topics/{t}/partitions/{p}/state" for t in topic_names(partitions) for p in range(PER_TOPIC)
    ]
    return paths[:partitions]


async def measure(connect: str, cluster: LocalCluster, partitions: int) -> tuple[float, float, float, int]:
    ports = {b.broker_id: b.port for b in cluster.all}
    controller, _ = await wait_for(lambda: controller_idle(list(ports.values())), timeout=300, interval=0.2)
    victim = next(b for b in BROKERS if b != controller)
    zk = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await zk.start()
    paths = state_paths(partitions)
    before = [orjson.loads(s[0] or b"{}") for s in await zk.get_many(paths) if s is not None]
    led = sum(1 for s in before if s["leader"] == victim)
    full = sum(1 for s in before if len(s["isr"]) == 3)
    if led < partitions // 3 * 0.99 or full != partitions:
        raise RuntimeError(f"not the starting state: the victim leads {led}, {full} ISRs are full")
    written = await watch_writes(zk, [p for p, s in zip(paths, before, strict=True) if s["leader"] == victim])
    stopping = cluster.by_id(victim)
    exited = asyncio.create_task(asyncio.to_thread(_wait_exit, stopping))
    signalled = time.perf_counter()
    stopping.signal(signal.SIGTERM)
    applied = await leaders_moved_on_survivors(ports, controller, victim, timeout_s=120) - signalled
    in_zookeeper = await asyncio.wait_for(written, 60) - signalled
    code, exit_time = await exited
    if code != 0:
        raise RuntimeError(f"broker {victim} exited with {code}")
    deregistered = (await zk.get("/brokers/ids"))[1].last_modified_children
    after = await zk.get_many(paths)
    late = still = 0
    for found in after:
        assert found is not None
        data, stat = found
        state = orjson.loads(data or b"{}")
        still += state["leader"] == victim or victim in state["isr"]
        late += stat.last_modified_zxid > deregistered
    await zk.close()
    if still or late:
        raise RuntimeError(f"{still} partitions still name the broker, {late} changed after it left")
    return in_zookeeper, applied, exit_time - signalled, led


async def watch_writes(zk: ZooKeeperClient, paths: list[str]) -> asyncio.Future[float]:
    """A future that resolves to the time the last of `paths` is written: one data watch on
    each, armed before the measurement starts."""
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    fired = 0

    def on_changed(_: str) -> None:
        # A watch fires once: one call per path written.
        nonlocal fired
        fired += 1
        if fired == len(paths) and not done.done():
            done.set_result(time.perf_counter())

    for path in paths:
        zk.add_watch(DATA_CHANGED, path, on_changed)
    for i in range(0, len(paths), 1000):
        await asyncio.gather(*(zk.exists(p, watch=True) for p in paths[i : i + 1000]))
    return done


def _wait_exit(broker: BrokerProcess) -> tuple[int | None, float]:
    code = broker.wait(60)
    return code, time.perf_counter()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    zk_runs, moved_runs, exit_runs, raw_runs = [], [], [], []
    for run, connect, cluster in fresh_clusters("controlled-shutdown", args):
        in_zk, moved, exited, led = uvloop.run(measure(connect, cluster, args.partitions))
        cluster.kill_all()  # the baseline runs on a quiet ZooKeeper
        raw_runs.append(uvloop.run(baseline(connect, args.partitions // 3)))
        zk_runs.append(in_zk)
        moved_runs.append(moved)
        exit_runs.append(exited)
        print(
            f"run {run}: {led} leaders moved in ZooKeeper {in_zk:.2f} s after SIGTERM,"
            f" applied by the other brokers after {moved:.2f} s"
            f" (raw ZooKeeper work {raw_runs[-1]:.2f} s); process exited after {exited:.2f} s"
        )
    for label, runs in (
        ("leaders moved in ZooKeeper", zk_runs),
        ("leaders moved, applied by the other brokers", moved_runs),
        ("process exited", exit_runs),
    ):
        print(
            f"{label}, median of {args.runs}: {statistics.median(runs):.2f} s"
            f" (runs {', '.join(f'{x:.2f}' for x in runs)})"
        )
    print(f"raw ZooKeeper work of the leader moves, median: {statistics.median(raw_runs):.2f} s")


if __name__ == "__main__":
    main()
