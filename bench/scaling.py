"""Keel as the partition count grows: 10k to 1M partitions, replication factor 3, 3 brokers.

One fresh cluster per size, on one embedded ZooKeeper (a chroot each): topics of 1,000
partitions and their states written straight into ZooKeeper, then the brokers started
together. For each size:
  - settle: from the brokers' start to the controller idle with every request answered;
  - memory: each broker's resident set once settled, per partition (every broker hosts a
    replica of every partition at RF 3; the controller's broker also holds the controller);
  - failover (median of --runs): `/controller` deleted, until every broker accepted the new
    controller's UpdateMetadata, and until the new controller is idle (bench/failover.py);
  - broker failure: a broker that is not the controller killed with -9, until the controller
    is idle again with none of its leaders left (bench/broker_failure.py);
  - baseline, in the same run: a bare multiRead of every state (bench/failover.py).
A size that does not settle within --settle-timeout is reported as such, and larger ones are
not tried. Writes a table (`--table`, markdown) and a plot (`--plot`, PNG; needs matplotlib,
`pip install -e .[bench]`).

    .venv/bin/python -m bench.scaling --sizes 10000,100000,300000,1000000 [--standby] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.broker_failure import measure as broker_failure
from bench.election import cpu_model
from bench.failover import BROKERS, ControllerHold, controller_idle, one_failover, populate, quiet, raw_reads
from bench.scale import SENTINEL
from node.broker.gc_tuning import tune_gc
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper


@dataclasses.dataclass
class Size:
    partitions: int
    settled_s: float | None = None  # None: not settled within the timeout
    rss_kib: dict[int, int] = dataclasses.field(default_factory=dict)
    controller: int = -1
    failover_s: list[float] = dataclasses.field(default_factory=list)
    failover_idle_s: list[float] = dataclasses.field(default_factory=list)
    broker_failure_s: float | None = None
    multi_read_s: float | None = None

    def per_partition_kib(self, controller: bool) -> float:
        chosen = [kib for b, kib in self.rss_kib.items() if (b == self.controller) == controller]
        return statistics.median(chosen) / self.partitions if chosen else float("nan")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,300000,1000000")
    parser.add_argument("--runs", type=int, default=3, help="failovers per size")
    parser.add_argument("--standby", action="store_true", help="the brokers run the warm standby")
    parser.add_argument("--settle-timeout", type=float, default=900.0)
    parser.add_argument("--failure-timeout", type=float, default=900.0, help="for the broker failure")
    parser.add_argument("--zk-heap-mb", type=int, default=4096)
    parser.add_argument("--table", type=Path, help="write the table here (markdown)")
    parser.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    parser.add_argument("--keep-logs", action="store_true", help="keep broker logs in a directory it prints")
    args = parser.parse_args()
    try:
        args.sizes = sorted(int(s) for s in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes: not a comma-separated list of partition counts: {args.sizes!r}")
    return args


def one_size(zookeeper: EmbeddedZooKeeper, home: Path, partitions: int, args: argparse.Namespace) -> Size:
    size = Size(partitions)
    connect = f"{zookeeper.connect_string}/scaling{partitions}"
    uvloop.run(populate(connect, partitions, {SENTINEL: len(BROKERS)}))
    home.mkdir()
    settings = {"controller.standby.enable": "true"} if args.standby else {}
    cluster = LocalCluster(home, connect, session_timeout_ms=30_000, settings=settings)

    def launch() -> None:
        for broker_id in BROKERS:
            cluster.new(broker_id, home=home / f"broker-{broker_id}").start()

    try:
        started = time.perf_counter()
        uvloop.run(ControllerHold.start_together(connect, launch))
        ports = [b.port for b in cluster.all]
        try:
            uvloop.run(asyncio.wait_for(quiet(connect, ports, standby=args.standby), args.settle_timeout))
        except (TimeoutError, RuntimeError):
            print(f"{partitions}: not settled within {args.settle_timeout:.0f} s")
            return size
        size.settled_s = time.perf_counter() - started
        size.controller = uvloop.run(_controller(ports))
        size.rss_kib = {b.broker_id: b.rss_kib() for b in cluster.all}
        print(f"{partitions}: settled in {size.settled_s:.1f} s, controller {size.controller}")
        print(f"{partitions}: resident KiB {size.rss_kib}")
        for run in range(1, args.runs + 1):
            to_update, to_idle = uvloop.run(one_failover(connect, ports, standby=args.standby))
            size.failover_s.append(to_update)
            size.failover_idle_s.append(to_idle)
            print(f"{partitions}: failover {run}: everywhere {to_update:.2f} s, idle {to_idle:.2f} s")
        size.multi_read_s = uvloop.run(raw_reads(connect, partitions, multi_read=True))
        uvloop.run(quiet(connect, ports, standby=args.standby))
        try:
            _, elapsed, led = uvloop.run(broker_failure(connect, cluster, partitions, args.failure_timeout))
        except RuntimeError as e:  # bench.failover.wait_for's timeout
            print(f"{partitions}: broker failure: {e} after {args.failure_timeout:.0f} s")
            return size
        size.broker_failure_s = elapsed
        print(f"{partitions}: broker failure, {led} leaders: controller idle after {elapsed:.2f} s")
        return size
    finally:
        cluster.kill_all()


async def _controller(ports: list[int]) -> int:
    found = await controller_idle(ports, answered=True)
    return -1 if found is None else found[0]


def table(sizes: list[Size], args: argparse.Namespace) -> str:
    load = os.getloadavg()
    lines = [
        f"Measured {datetime.date.today()} on {cpu_model()} ({os.cpu_count()} cores), python "
        f"{sys.version.split()[0]}, RF 3 over 3 brokers{', warm standby' if args.standby else ''}; "
        f"load average at the end {load[0]:.1f}.",
        "",
        "| partitions | settle | failover: UpdateMetadata at every broker (median) "
        "| failover: controller idle | broker failure: controller idle | bare multiRead of the states "
        "| RSS per partition: controller's broker / another |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        if s.settled_s is None:
            lines.append(f"| {s.partitions:,} | not settled in {args.settle_timeout:.0f} s | | | | | |")
            continue
        failure = (
            f"not idle in {args.failure_timeout:.0f} s"
            if s.broker_failure_s is None
            else f"{s.broker_failure_s:.2f} s"
        )
        failover = statistics.median(s.failover_s)
        idle = statistics.median(s.failover_idle_s)
        runs = ", ".join(f"{v:.2f}" for v in s.failover_s)
        lines.append(
            f"| {s.partitions:,} | {s.settled_s:.1f} s | {failover:.2f} s (runs {runs}) | {idle:.2f} s "
            f"| {failure} | {s.multi_read_s:.2f} s "
            f"| {s.per_partition_kib(True):.2f} / {s.per_partition_kib(False):.2f} KiB |"
        )
    return "\n".join(lines) + "\n"


def plot(sizes: list[Size], path: Path, standby: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [s for s in sizes if s.settled_s is not None]
    x = [s.partitions for s in done]
    figure, (times, memory) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = {
        "settle": [s.settled_s for s in done],
        "failover: UpdateMetadata at every broker": [statistics.median(s.failover_s) for s in done],
        "failover: controller idle": [statistics.median(s.failover_idle_s) for s in done],
        "broker failure: controller idle": [
            float("nan") if s.broker_failure_s is None else s.broker_failure_s for s in done
        ],
        "bare multiRead of the states": [s.multi_read_s for s in done],
    }
    for label, values in series.items():
        times.plot(x, values, marker="o", label=label)
    times.set(xscale="log", yscale="log", xlabel="partitions", ylabel="seconds")
    times.set_title("time" + (" (warm standby)" if standby else ""))
    times.legend(fontsize=7)
    memory.plot(x, [s.per_partition_kib(True) for s in done], marker="o", label="controller's broker")
    memory.plot(x, [s.per_partition_kib(False) for s in done], marker="o", label="another broker")
    memory.set(xscale="log", xlabel="partitions", ylabel="KiB per partition")
    memory.set_title("resident memory")
    memory.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    args = parse_args()
    tune_gc()
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, sizes {args.sizes}")
    sizes: list[Size] = []
    with contextlib.ExitStack() as stack:
        if args.keep_logs:
            tmp = Path(tempfile.mkdtemp(prefix="keel-scaling-"))
            print(f"logs kept in {tmp}")
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="keel-scaling-")))
        zookeeper = EmbeddedZooKeeper(tmp / "zk", heap_mb=args.zk_heap_mb)
        zookeeper.start()
        stack.callback(zookeeper.stop)
        for partitions in args.sizes:
            size = one_size(zookeeper, tmp / f"size-{partitions}", partitions, args)
            sizes.append(size)
            if size.settled_s is None:
                break
    text = table(sizes, args)
    print(text)
    if args.table:
        args.table.write_text(text)
    if args.plot:
        plot(sizes, args.plot, args.standby)


if __name__ == "__main__":
    main()
