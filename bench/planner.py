"""Plan time, movement and memory of the Spark planner, against Kafka's `--generate`.

Synthetic clusters (node/planner/synthetic.py): N partitions in topics of 100 partitions, RF 3,
over 90 brokers in 10 racks, plus 10 new empty brokers (one per rack); goal rebalance onto all
100. Each size is planned `--runs` times in one warm SparkSession (local[2] by default; the
first, untimed plan warms the JVM), reporting the median seconds, moves against the lower
bound, spreads, and the peak memory of this process and its JVM together (VmRSS of the
process tree from /proc, sampled every 0.2 s). In the same run the `--generate` baseline is
applied to the same input (its moves, replica/leader/topic spread, rack violations), and
`keel reassign plan --from-file` is timed as a fresh process (cold JVM included) at
`--cli-size` partitions.

    .venv/bin/python -m bench.planner [--sizes 10000,100000,1000000] [--runs 3] [--cli-size 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.election import cpu_model
from node.planner.baseline import generate
from node.planner.plan import plan
from node.planner.request import PlanRequest
from node.planner.session import spark_session
from node.planner.snapshot import snapshot_json
from node.planner.synthetic import Shape, synthetic_snapshot

ROOT = Path(__file__).resolve().parent.parent


def shape_for(partitions: int) -> Shape:
    return Shape(
        topics=max(1, partitions // 100), partitions=100, replication=3, brokers=90, racks=10, new=10
    )


def _tree_rss_kib(root: int) -> int:
    children: dict[int, list[int]] = defaultdict(list)
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{entry}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            pid = int(entry)
            children[int(fields["PPid"])].append(pid)
            rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


@contextlib.contextmanager
def peak_memory() -> Iterator[list[int]]:
    """Yields a one-item list that holds the peak RSS (KiB) of this process tree when done."""
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss_kib(os.getpid()))
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


def baseline_figures(
    layout: dict[tuple[str, int], list[int]], brokers: list[int], racks: dict[int, str]
) -> dict[str, Any]:
    topics: dict[str, tuple[int, int]] = {}
    for (topic, _), replicas in layout.items():
        count, _rf = topics.get(topic, (0, len(replicas)))
        topics[topic] = (count + 1, len(replicas))
    started = time.monotonic()
    placed = generate(topics, brokers, racks, seed=1)
    seconds = time.monotonic() - started
    moves = 0
    replicas_on: Counter[int] = Counter()
    leaders_on: Counter[int] = Counter()
    topic_spread = 0
    violations = 0
    for topic, lists in placed.items():
        cells: Counter[int] = Counter()
        for p, replicas in enumerate(lists):
            moves += len(set(replicas) - set(layout[topic, p]))
            replicas_on.update(replicas)
            leaders_on[replicas[0]] += 1
            cells.update(replicas)
            violations += len(replicas) - len({racks[b] for b in replicas})
        topic_spread = max(topic_spread, max(cells[b] for b in brokers) - min(cells[b] for b in brokers))
    return {
        "moves": moves,
        "replica_spread": max(replicas_on[b] for b in brokers) - min(replicas_on[b] for b in brokers),
        "leader_spread": max(leaders_on[b] for b in brokers) - min(leaders_on[b] for b in brokers),
        "topic_spread": topic_spread,
        "rack_violations": violations,
        "seconds": round(seconds, 2),
    }


def run_size(spark: Any, partitions: int, runs: int, baseline: bool) -> dict[str, Any]:
    shape = shape_for(partitions)
    snapshot = synthetic_snapshot(spark, shape)
    snapshot.partitions.cache().count()
    seconds = []
    report: dict[str, Any] = {}
    peak_kib = 0
    for _ in range(runs):
        with peak_memory() as peak:
            started = time.monotonic()
            result = plan(spark, snapshot, PlanRequest())
            seconds.append(time.monotonic() - started)
        peak_kib = max(peak_kib, peak[0])
        report = result.report
        print(
            f"  {partitions:>9} partitions: {seconds[-1]:6.1f} s, moves {report['moves']} / LB "
            f"{report['lower_bound']} = {report['moves_over_lower_bound']}, peak {peak[0] / 1048576:.2f} GiB",
            flush=True,
        )
    figures: dict[str, Any] = {
        "partitions": partitions,
        "seconds": [round(s, 1) for s in seconds],
        "median_seconds": round(statistics.median(seconds), 1),
        "peak_gib": round(peak_kib / 1048576, 2),
        "moves": report["moves"],
        "lower_bound": report["lower_bound"],
        "lower_bounds": report["lower_bounds"],
        "moves_over_lower_bound": report["moves_over_lower_bound"],
        "replica_moves_pct": round(100 * report["moves"] / (3 * partitions), 2),
        "leader_changes": report["leader_changes"],
        "replica_spread": report["replica_spread"],
        "leader_spread": report["leader_spread"],
        "topic_spread": report["topic_spread"],
        "rack_violations": report["rack_violations"],
        "stage_seconds": report.get("stage_seconds"),
    }
    if baseline:
        layout = {(r.topic, r.partition): list(r.replicas) for r in snapshot.partitions.collect()}
        brokers = list(range(shape.brokers + shape.new))
        racks = {b: f"r{b % shape.racks}" for b in brokers}
        figures["generate"] = baseline_figures(layout, brokers, racks)
    snapshot.partitions.unpersist()
    return figures


def run_cli(spark: Any, partitions: int, master: str) -> dict[str, Any]:
    snapshot = synthetic_snapshot(spark, shape_for(partitions))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "cluster.json"
        source.write_bytes(orjson.dumps(snapshot_json(snapshot)))
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "node.cli.main",
                "reassign",
                "plan",
                "--from-file",
                str(source),
                "--goal",
                "rebalance",
                "--output",
                str(Path(tmp) / "plan.json"),
                "--report",
                str(Path(tmp) / "report.json"),
                "--spark-master",
                master,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"keel reassign plan failed: {done.stderr}")
        report = orjson.loads((Path(tmp) / "report.json").read_bytes())
    return {
        "partitions": partitions,
        "seconds": round(seconds, 1),
        "moves": report["moves"],
        "lower_bound": report["lower_bound"],
        "plan_seconds_inside": report["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cli-size", type=int, default=100000, help="0 to skip the CLI run")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--output", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; Spark master {args.master}", flush=True)
    spark = spark_session(args.master)
    plan(spark, synthetic_snapshot(spark, shape_for(10000)), PlanRequest())  # warm the JVM
    figures: dict[str, Any] = {"master": args.master, "sizes": []}
    for size in (int(s) for s in args.sizes.split(",")):
        figures["sizes"].append(run_size(spark, size, args.runs, not args.no_baseline))
        print(orjson.dumps(figures["sizes"][-1]).decode(), flush=True)
    if args.cli_size:
        figures["cli"] = run_cli(spark, args.cli_size, args.master)
        print(orjson.dumps(figures["cli"]).decode(), flush=True)
    if args.output:
        args.output.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
