"""What one broker process holds per partition replica it hosts: resident memory (RSS) of 3
brokers on an idle cluster with a few partitions, then with `--partitions` (replication
factor 3, so every broker hosts every partition), written straight into ZooKeeper as in
bench/failover.py. The difference over the replicas is what each hosted replica costs; the
controller's context shows as the extra of the broker that is controller.

Logs are opened when a partition is first produced to or fetched from, so these figures are
the metadata side: partition states, the metadata cache, the controller's context.

    .venv/bin/python -m bench.broker_memory [--partitions 30000]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.election import cpu_model
from bench.failover import BROKERS, ControllerHold, controller_idle, populate, wait_for
from bench.scale import SENTINEL, start_brokers
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper


def settled_rss(connect: str, home: Path, partitions: int) -> tuple[int, list[int], float]:
    """(controller id, each broker's RSS in KiB once the controller is idle, seconds to idle)
    for a fresh cluster holding `partitions` plus one sentinel partition per broker."""
    uvloop.run(populate(connect, partitions, {SENTINEL: len(BROKERS)}))
    home.mkdir()
    started = time.perf_counter()
    cluster: LocalCluster = uvloop.run(
        ControllerHold.start_together(connect, functools.partial(start_brokers, connect, home))
    )
    try:
        ports = [b.port for b in cluster.all]
        controller, _ = uvloop.run(wait_for(lambda: controller_idle(ports), timeout=600, interval=0.5))
        idle_s = time.perf_counter() - started
        # Let the followers' first fetch rounds and a GC pass settle before reading.
        time.sleep(5)
        return controller, [b.rss_kib() for b in cluster.all], idle_s
    finally:
        cluster.kill_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=30_000)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, RF 3, 3 brokers")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="keel-memory-")))
        zookeeper = EmbeddedZooKeeper(tmp / "zk", heap_mb=2048)
        zookeeper.start()
        stack.callback(zookeeper.stop)
        figures = {}
        for count in (0, args.partitions):
            gc.collect()
            controller, rss, idle_s = settled_rss(
                f"{zookeeper.connect_string}/p{count}", tmp / f"p{count}", count
            )
            figures[count] = (controller, rss)
            replicas = count + len(BROKERS)
            shown = ", ".join(
                f"broker {b}{' (controller)' if b == controller else ''} {kib / 1024:.0f} MiB"
                for b, kib in zip(BROKERS, rss, strict=True)
            )
            print(f"{replicas} replicas per broker: {shown}; idle after {idle_s:.1f} s")
        (_, small), (controller, large) = figures[0], figures[args.partitions]
        for b, before, after in zip(BROKERS, small, large, strict=True):
            per_replica = (after - before) * 1024 / args.partitions
            role = "controller" if b == controller else "broker"
            print(f"broker {b} ({role}): {per_replica / 1024:.2f} KiB per hosted replica")


if __name__ == "__main__":
    main()
