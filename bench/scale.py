"""What the 30k-partition benchmarks share: their arguments, and a fresh 3-broker cluster per
run on one embedded ZooKeeper, with every topic and partition state written straight into
ZooKeeper and the brokers started together (so that none starts alone as controller and
shrinks the others out of the ISRs)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import uvloop

from bench.election import cpu_model
from bench.failover import BROKERS, ControllerHold, populate
from node.broker.gc_tuning import tune_gc
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper

# Sorts after every benchmark topic; one partition led by each broker.
SENTINEL = "topic-zz-sentinel"


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--partitions", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep-logs", action="store_true", help="keep broker logs in a directory it prints")
    args = parser.parse_args()
    tune_gc()  # as the broker and controller processes do
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}, "
        f"{args.partitions} partitions, RF 3, 3 brokers"
    )
    return args


def start_brokers(connect: str, home: Path) -> LocalCluster:
    cluster = LocalCluster(home, connect, session_timeout_ms=10_000)
    for broker_id in BROKERS:
        cluster.new(broker_id, home=home / f"broker-{broker_id}").start()
    return cluster


def fresh_clusters(name: str, args: argparse.Namespace) -> Iterator[tuple[int, str, LocalCluster]]:
    """(run, ZooKeeper connect string, running cluster) for each run; brokers are killed after
    each run and ZooKeeper at the end."""
    with contextlib.ExitStack() as stack:
        if args.keep_logs:
            tmp = tempfile.mkdtemp(prefix=f"keel-{name}-")
            print(f"logs kept in {tmp}")
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"keel-{name}-"))
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk", heap_mb=2048)
        zookeeper.start()
        stack.callback(zookeeper.stop)
        for run in range(1, args.runs + 1):
            connect = f"{zookeeper.connect_string}/run{run}"
            uvloop.run(populate(connect, args.partitions, {SENTINEL: len(BROKERS)}))
            home = Path(tmp) / f"run{run}"
            home.mkdir()
            cluster = uvloop.run(
                ControllerHold.start_together(connect, functools.partial(start_brokers, connect, home))
            )
            try:
                yield run, connect, cluster
            finally:
                cluster.kill_all()
