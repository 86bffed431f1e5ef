"""What scraping /metrics every second costs a broker at 30k partitions: the controller broker's
CPU time (utime + stime from /proc/<pid>/stat) over windows of the same wall time, one with a
scrape every second and one without, alternated so that both see the same background (the
followers' fetches, the periodic tasks, other work on the machine); the difference as % of one
core, the median over the window pairs, for each fresh cluster.

The cluster is bench/scale.py's: 3 brokers, RF 3 (every broker hosts every partition), written
straight into ZooKeeper, each broker with a metrics.http.listener.

    .venv/bin/python -m bench.metrics_scrape [--partitions 30000] [--runs 1] [--pairs 5] [--window 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import uvloop

from bench.election import cpu_model
from bench.failover import BROKERS, ControllerHold, controller_idle, populate, wait_for
from bench.scale import SENTINEL
from node.cluster.local import BrokerProcess, LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start_brokers(connect: str, home: Path) -> LocalCluster:
    cluster = LocalCluster(home, connect, session_timeout_ms=10_000)
    for broker_id in BROKERS:
        listener = f"127.0.0.1:{free_ports(1)[0]}"
        cluster.new(broker_id, {"metrics.http.listener": listener}, home=home / f"broker-{broker_id}").start()
    return cluster


async def window(broker: BrokerProcess, seconds: float, *, scrape: bool) -> tuple[float, list[float], int]:
    """(CPU seconds the broker used, each scrape's seconds, the last answer's bytes) over a
    window of `seconds` of wall time, scraping every second or not at all."""
    assert broker.pid is not None and broker.metrics_url is not None
    durations: list[float] = []
    size = 0
    async with aiohttp.ClientSession() as session:
        start_cpu, start = cpu_seconds(broker.pid), time.monotonic()
        tick = start
        while (now := time.monotonic()) < start + seconds:
            if scrape:
                async with session.get(broker.metrics_url) as answer:
                    body = await answer.read()
                    assert answer.status == 200
                size = len(body)
                durations.append(time.monotonic() - now)
            tick += 1.0
            await asyncio.sleep(max(0.0, min(tick, start + seconds) - time.monotonic()))
        return cpu_seconds(broker.pid) - start_cpu, durations, size


async def measure(
    cluster: LocalCluster, pairs: int, seconds: float
) -> tuple[int, list[float], list[float], int]:
    ports = [b.port for b in cluster.all]
    controller, _ = await wait_for(lambda: controller_idle(ports), timeout=900, interval=0.5)
    broker = next(b for b in cluster.all if b.broker_id == controller)
    # The followers' first fetch rounds and the first scrape's imports settle first.
    await window(broker, 10, scrape=True)
    costs, durations = [], []
    size = 0
    for _ in range(pairs):
        idle_cpu, _, _ = await window(broker, seconds, scrape=False)
        busy_cpu, took, size = await window(broker, seconds, scrape=True)
        costs.append((busy_cpu - idle_cpu) / seconds * 100)
        durations.extend(took)
        print(
            f"  idle {idle_cpu / seconds * 100:5.2f} % of a core, scraped {busy_cpu / seconds * 100:5.2f} %: "
            f"{costs[-1]:+.2f} %",
            flush=True,
        )
    return controller, costs, durations, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=5, help="scraped and quiet windows per run")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of each window")
    args = parser.parse_args()
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores, python {sys.version.split()[0]}, "
        f"{args.partitions} partitions, RF 3, 3 brokers; load average {os.getloadavg()[0]:.2f}"
    )
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="keel-metrics-")))
        zookeeper = EmbeddedZooKeeper(tmp / "zk", heap_mb=2048)
        zookeeper.start()
        stack.callback(zookeeper.stop)
        medians = []
        for run in range(1, args.runs + 1):
            connect = f"{zookeeper.connect_string}/run{run}"
            uvloop.run(populate(connect, args.partitions, {SENTINEL: len(BROKERS)}))
            home = tmp / f"run{run}"
            home.mkdir()
            cluster: LocalCluster = uvloop.run(
                ControllerHold.start_together(connect, functools.partial(start_brokers, connect, home))
            )
            try:
                controller, costs, durations, size = uvloop.run(measure(cluster, args.pairs, args.window))
            finally:
                cluster.kill_all()
            medians.append(statistics.median(costs))
            print(
                f"run {run}: controller broker {controller}: scraping every second costs "
                f"{medians[-1]:.2f} % of a core (median of {len(costs)} window pairs); "
                f"a scrape takes {statistics.median(durations) * 1000:.1f} ms median, "
                f"{max(durations) * 1000:.1f} ms max, {size / 1024:.0f} KiB, load average "
                f"{os.getloadavg()[0]:.2f}",
                flush=True,
            )
        print(f"median over {len(medians)} run(s): {statistics.median(medians):.2f} % of a core")


if __name__ == "__main__":
    main()
