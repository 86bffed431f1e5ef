"""`keel reassign plan` and `keel reassign snapshot`: plans from the planner.

    keel reassign snapshot --output cluster.json [--zookeeper host:port/chroot]
    keel reassign plan --goal G[,G...] [--brokers 1,2] [--remove-brokers 3] [--topics t1,t2]
                       [--balance count|bytes] [--capacity 1=2.0,2=1.0] --output plan.json
                       [--report report.json] [--execute] [--throttle BYTES_PER_S]
                       [--from-file cluster.json [--spark-master local[*]]] [--planner host:port]

`plan` asks the live planner (found through any broker, which reads `/keel/planner`, or given
by `--planner`); with `--from-file` it plans on that snapshot file with a SparkSession of its
own and no cluster at all. Either way it writes Kafka's reassignment JSON of the partitions
that change to `--output`, the report to `--report`, and prints the report's summary and its
per-broker before/after table. `snapshot` reads ZooKeeper and asks every live broker for its
replica sizes (DescribeLogDirs): the cluster.json format, no Spark.

Bad arguments are argparse's exit 2; a planner that is not running, or that refuses the
request (an unknown broker, a plan that cannot be made), is one line on stderr and exit 1,
and nothing is executed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from node.cli.arguments import non_negative_int
from node.cli.output import print_json, print_table
from node.clients.planner import PlannerClient, PlannerNotRunning, find_planner
from wire.api.planner import PlanReassignmentRequest
from wire.errors import ErrorCode

GOALS = ("rebalance", "remove-brokers", "heal", "leaders")
COMMANDS = ("plan", "snapshot")


def _goals(text: str) -> list[str]:
    goals = [g.strip() for g in text.split(",") if g.strip()]
    for goal in goals:
        if goal not in GOALS:
            raise argparse.ArgumentTypeError(f"unknown goal {goal!r} (one of {', '.join(GOALS)})")
    return goals


def _ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of broker ids") from None
    if any(i < 0 for i in ids):
        raise argparse.ArgumentTypeError(f"{text!r}: a broker id is never negative")
    return ids


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _capacity(text: str) -> dict[int, float]:
    capacity = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        broker, sep, weight = item.partition("=")
        try:
            capacity[int(broker)] = float(weight)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not BROKER=WEIGHT") from None
        if not sep or capacity[int(broker)] <= 0:
            raise argparse.ArgumentTypeError(f"{item!r} is not BROKER=WEIGHT with a positive weight")
    return capacity


def add_arguments(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    plan = sub.add_parser("plan", parents=[common], help="compute a reassignment plan")
    plan.add_argument(
        "--goal",
        type=_goals,
        action="extend",
        required=True,
        help=f"one or more of {', '.join(GOALS)} (comma-separated or repeated)",
    )
    plan.add_argument(
        "--brokers", type=_ids, default=None, help="the target broker set (default: the live ones)"
    )
    plan.add_argument(
        "--remove-brokers", type=_ids, default=[], help="brokers to empty (goal remove-brokers)"
    )
    plan.add_argument("--topics", type=_names, default=None, help="plan only these topics")
    plan.add_argument("--balance", choices=["count", "bytes"], default="count")
    plan.add_argument("--capacity", type=_capacity, default=None, help="relative broker weights: 1=2.0,2=1.0")
    plan.add_argument("--output", type=Path, required=True, help="the reassignment JSON to write")
    plan.add_argument("--report", type=Path, default=None, help="write the plan's report (JSON) here")
    plan.add_argument("--execute", action="store_true", help="have the planner's executor carry it out")
    plan.add_argument("--throttle", type=non_negative_int, default=None, metavar="BYTES_PER_S")
    plan.add_argument("--from-file", type=Path, default=None, help="plan on this cluster.json, offline")
    plan.add_argument("--spark-master", default="local[*]", help="Spark master for --from-file")
    plan.add_argument(
        "--planner", default=None, metavar="HOST:PORT", help="the planner (default: ask a broker)"
    )
    snapshot = sub.add_parser("snapshot", parents=[common], help="export the live cluster as cluster.json")
    snapshot.add_argument("--output", type=Path, required=True)
    snapshot.add_argument(
        "--zookeeper",
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help="ZooKeeper to read (default: KEEL_ZOOKEEPER, else the local cluster's)",
    )


# --- plan ---


def _write_json(path: Path, value: object) -> None:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")


def print_report(report: dict[str, Any], partitions: int) -> None:
    """The report's scalar figures as lines, then each of its row lists as a table (the
    per-broker before/after rows among them)."""
    print(f"Partitions to reassign: {partitions}")
    tables = []
    for key, value in report.items():
        if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
            tables.append((key, value))
        elif isinstance(value, dict):
            print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        else:
            print(f"{key}: {value}")
    for key, rows in tables:
        print()
        print(key.replace("_", " ").capitalize() + ":")
        headers = list(dict.fromkeys(k for row in rows for k in row))
        print_table([h.upper() for h in headers], [[row.get(h) for h in headers] for row in rows])


async def _plan_live(
    args: argparse.Namespace, bootstrap: str
) -> tuple[list[dict[str, Any]], dict[str, Any]] | int:
    request = PlanReassignmentRequest(
        goals=list(args.goal),
        brokers=args.brokers,
        remove_brokers=list(args.remove_brokers),
        topics=args.topics,
        balance=args.balance,
        capacity=None if args.capacity is None else {str(k): v for k, v in args.capacity.items()},
        execute=args.execute,
        throttle_bytes_per_s=-1 if args.throttle is None else args.throttle,
    )
    try:
        if args.planner is not None:
            client = PlannerClient.at(args.planner, timeout=args.timeout or 10.0)
        else:
            client = PlannerClient(await find_planner(bootstrap, timeout=args.timeout or 10.0))
        async with client:
            response = await client.plan(request)
    except PlannerNotRunning as e:
        print(f"keel: {e}", file=sys.stderr)
        return 1
    if response.error_code != ErrorCode.NONE:
        try:
            name = ErrorCode(response.error_code).name
        except ValueError:
            name = str(response.error_code)
        print(f"keel: the planner refused: {name}: {response.error_message}", file=sys.stderr)
        return 1
    partitions = [
        {"topic": p.topic, "partition": p.partition, "replicas": p.replicas} for p in response.partitions
    ]
    report = orjson.loads(response.report_json)
    report.setdefault("plan_id", response.plan_id)
    report.setdefault("snapshot", response.snapshot)
    if args.execute:
        report["executing"] = response.executing
    return partitions, report


def _plan_from_file(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]] | int:
    """Plan on a cluster.json with a SparkSession of this process (node.planner's jobs)."""
    from node.planner.plan import plan as compute
    from node.planner.request import PlanError, PlanRequest
    from node.planner.session import spark_session
    from node.planner.snapshot import SnapshotError, load_snapshot_json
    try:
        request = PlanRequest(
            goals=tuple(args.goal),
            brokers=None if args.brokers is None else tuple(args.brokers),
            remove_brokers=tuple(args.remove_brokers),
            topics=None if args.topics is None else tuple(args.topics),
            balance=args.balance,
            capacity=args.capacity,
        )
    except PlanError as e:
        print(f"keel: {e}", file=sys.stderr)
        return 2
    spark = spark_session(args.spark_master)
    try:
        snapshot = load_snapshot_json(spark, args.from_file)
        result = compute(spark, snapshot, request)
    except (SnapshotError, OSError) as e:
        print(f"keel: {args.from_file}: {e}", file=sys.stderr)
        return 2
    except PlanError as e:
        print(f"keel: {e}", file=sys.stderr)
        return 1
    return list(result.partitions), dict(result.report)


async def plan(args: argparse.Namespace, bootstrap: str) -> int:
    if args.from_file is not None:
        if args.execute:
            print("keel: --execute needs the live planner, not --from-file", file=sys.stderr)
            return 2
        outcome = await asyncio.to_thread(_plan_from_file, args)
    else:
        outcome = await _plan_live(args, bootstrap)
    if isinstance(outcome, int):
        return outcome
    partitions, report = outcome
    _write_json(args.output, {"version": 1, "partitions": partitions})
    if args.report is not None:
        _write_json(args.report, report)
    if args.format == "json":
        print_json({"partitions": partitions, "report": report})
    else:
        print_report(report, len(partitions))
        print()
        print(
            f"Wrote the plan to {args.output}"
            + (f" and its report to {args.report}" if args.report else "")
            + "."
        )
        if args.execute and report.get("executing"):
            print("The planner's executor is carrying it out: see `keel reassign status`.")
    return 0


# --- snapshot ---


def default_zookeeper() -> str | None:
    if env := os.environ.get("KEEL_ZOOKEEPER"):
        return env
    from node.cluster.command import ClusterState

    state = ClusterState.load(Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    if state is not None and state.zookeeper_ports:
        return ",".join(f"127.0.0.1:{p}" for p in state.zookeeper_ports[::3])
    return None


async def snapshot(args: argparse.Namespace) -> int:
    from actors.clock import SystemClock
    from node.planner import live_snapshot
    from node.zk.client import ZooKeeperClient, ZooKeeperUnavailable
    from node.zk.store import ZkClusterStore

    connect = args.zookeeper or default_zookeeper()
    if connect is None:
        print("keel: no ZooKeeper to read: pass --zookeeper host:port", file=sys.stderr)
        return 2
    timeout = args.timeout or 10.0
    zk = ZooKeeperClient(connect, session_timeout_s=timeout, connection_timeout_s=timeout)
    try:
        await zk.start()
    except ZooKeeperUnavailable as e:
        print(f"keel: {e}", file=sys.stderr)
        return 1
    try:
        taken = await live_snapshot.take(
            ZkClusterStore(zk, SystemClock()), timeout=timeout, now_ms=int(time.time() * 1000)
        )
    finally:
        await zk.close()
    document = taken.cluster_json()
    _write_json(args.output, document)
    for broker in taken.unanswered:
        print(f"keel: broker {broker} did not report its replica sizes", file=sys.stderr)
    summary = {
        "brokers": len(taken.brokers),
        "alive": sum(1 for b in taken.brokers if b["alive"]),
        "partitions": len(taken.partitions),
        "bytes": sum(p["size_bytes"] or 0 for p in taken.partitions),
        "output": str(args.output),
    }
    if args.format == "json":
        print_json(summary)
    else:
        print(
            f"Wrote {summary['partitions']} partitions on {summary['brokers']} brokers "
            f"({summary['alive']} alive, {summary['bytes']} bytes) to {args.output}."
        )
    return 0


async def run(args: argparse.Namespace, bootstrap: str) -> int:
    if args.command == "snapshot":
        return await snapshot(args)
    return await plan(args, bootstrap)
