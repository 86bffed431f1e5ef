"""Controller re-election latency with 5 brokers.

For each forced re-election: delete `/controller` with an independent ZooKeeper client, then
time until the new controller itself answers DescribeCluster naming itself at the next epoch.
In the same run, the baseline: the bare ZooKeeper work of an election done by one aiozk
client (delete, the watch firing, read the epoch, the create-and-bump multi-op).

    .venv/bin/python -m bench.election [--runs 3] [--elections 20] [--brokers 5]

Prints p50 and p99 per run and the median of each over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import aiozk
import uvloop

from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk.client import split_connect
from wire.api import DescribeClusterRequest, DescribeClusterResponse
from wire.client import RpcClient


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_brokers(connect: str, count: int, home: Path) -> LocalCluster:
    cluster = LocalCluster(home, connect, session_timeout_ms=6000)
    for broker_id in range(1, count + 1):
        cluster.new(broker_id, home=home / f"broker-{broker_id}").start()
    return cluster


def zk_client(connect: str) -> aiozk.ZKClient:
    servers, chroot = split_connect(connect)
    return aiozk.ZKClient(servers, chroot=chroot)


async def keel_elections(zk_connect: str, cluster: LocalCluster, elections: int) -> list[float]:
    zk = zk_client(zk_connect)
    await zk.start()
    clients = {
        b.broker_id: await RpcClient.connect("127.0.0.1", b.port, request_timeout=5) for b in cluster.all
    }
    _, epoch = await cluster.wait_for_controller(timeout=30)
    samples = []
    for _ in range(elections):
        started = time.perf_counter()
        await zk.delete("/controller", force=True)
        winner = None
        while winner is None:
            answers = await asyncio.gather(*(c.send(DescribeClusterRequest()) for c in clients.values()))
            for broker_id, answer in zip(clients, answers, strict=True):
                assert isinstance(answer, DescribeClusterResponse)
                if answer.controller_id == broker_id and answer.controller_epoch == epoch + 1:
                    winner = broker_id
            if winner is None:
                # Each DescribeCluster reads ZooKeeper; a pause keeps polling from slowing the election.
                await asyncio.sleep(0.001)
        samples.append((time.perf_counter() - started) * 1000)
        epoch += 1
        await cluster.wait_for_controller(timeout=30)  # let the losers settle before the next round
    for client in clients.values():
        await client.close()
    await zk.close()
    return samples


async def bare_elections(zk_connect: str, elections: int) -> list[float]:
    """One aiozk client doing only the ZooKeeper work of an election."""
    observer = zk_client(zk_connect)
    candidate = zk_client(zk_connect)
    await observer.start()
    await candidate.start()
    await candidate.ensure_path("/bench")
    with contextlib.suppress(aiozk.exc.NodeExists):
        await candidate.create("/bench/controller_epoch", b"0")
    samples = []
    for _ in range(elections):
        await candidate.create("/bench/controller", b"x", ephemeral=True)
        deleted = candidate.wait_for_events([aiozk.WatchEvent.DELETED], "/bench/controller")
        await candidate.exists("/bench/controller", watch=True)
        started = time.perf_counter()
        await observer.delete("/bench/controller", force=True)
        await deleted
        value, stat = await candidate.get("/bench/controller_epoch")
        async with candidate.begin_transaction() as txn:
            txn.create("/bench/controller", b"x", ephemeral=True)
            txn.set_data("/bench/controller_epoch", str(int(value) + 1).encode(), version=stat.version)
        samples.append((time.perf_counter() - started) * 1000)
        await candidate.delete("/bench/controller", force=True)
    await observer.close()
    await candidate.close()
    return samples


async def one_run(
    zk: EmbeddedZooKeeper, brokers: int, elections: int, home: Path
) -> tuple[list[float], list[float]]:
    chroot = f"/bench-{time.time_ns()}"
    connect = zk.connect_string + chroot
    root = aiozk.ZKClient(zk.connect_string)
    await root.start()
    await root.ensure_path(chroot)
    await root.close()
    cluster = start_brokers(connect, brokers, Path(os.environ.get("KEEL_BENCH_LOGS", home)))
    try:
        await cluster.wait_for_controller(timeout=30)
        keel = await keel_elections(connect, cluster, elections)
    finally:
        cluster.stop_all(20)
    bare = await bare_elections(connect, elections)
    return keel, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--elections", type=int, default=20)
    parser.add_argument("--brokers", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {platform.machine()}, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="keel-bench-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk")
        zk.start()
        try:
            results = []
            for run in range(1, args.runs + 1):
                keel, bare = uvloop.run(one_run(zk, args.brokers, args.elections, Path(tmp)))
                row = (
                    percentile(keel, 0.5),
                    percentile(keel, 0.99),
                    percentile(bare, 0.5),
                    percentile(bare, 0.99),
                )
                results.append(row)
                print(
                    f"run {run}: keel p50 {row[0]:.1f} ms p99 {row[1]:.1f} ms | "
                    f"bare aiozk election p50 {row[2]:.1f} ms p99 {row[3]:.1f} ms | "
                    f"ratio p50 {row[0] / row[2]:.1f}x"
                )
        finally:
            zk.stop()
    medians = [statistics.median(r[i] for r in results) for i in range(4)]
    print(
        f"median over {args.runs} runs of {args.elections} elections, {args.brokers} brokers: "
        f"keel p50 {medians[0]:.1f} ms, p99 {medians[1]:.1f} ms; "
        f"bare p50 {medians[2]:.1f} ms, p99 {medians[3]:.1f} ms; ratio p50 {medians[0] / medians[2]:.1f}x"
    )


if __name__ == "__main__":
    main()
