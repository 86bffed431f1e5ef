"""`keel reassign plan`: a reassignment plan, here on a cluster.json with a local SparkSession.

    keel reassign plan --from-file cluster.json --goal rebalance [--goal leaders ...]
        [--brokers 1,2,...] [--remove-brokers 3,4] [--topics t1,t2] [--balance count|bytes]
        [--capacity 1=2,2=1] --output plan.json [--report report.json] [--format json|table]

The plan file is Kafka's reassignment JSON (for `keel reassign execute`); the table shows each
broker before and after, the moves against their lower bound, and the balance. A bad request or
snapshot is one line on stderr and exit 2, before Spark starts when the arguments alone show it.
Without --from-file the plan is asked of the cluster's planner.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from node.cli.output import print_json, print_table


def _ids(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of broker ids: {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"not a comma-separated list of broker ids: {text!r}")
    return values


def _names(text: str) -> tuple[str, ...]:
    values = tuple(x.strip() for x in text.split(",") if x.strip())
    if not values:
        raise argparse.ArgumentTypeError("no topic named")
    return values


def _capacity(text: str) -> dict[int, float]:
    out = {}
    for item in text.split(","):
        broker, _, weight = item.partition("=")
        try:
            out[int(broker)] = float(weight)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not broker=weight: {item!r}") from None
    return out


def add_arguments(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("plan", parents=[common], help="compute a reassignment plan")
    parser.add_argument(
        "--from-file", type=Path, metavar="CLUSTER_JSON", help="plan on this snapshot, offline"
    )
    parser.add_argument(
        "--goal",
        action="append",
        required=True,
        metavar="GOAL",
        help="rebalance, remove-brokers, heal or leaders (repeat or comma-separate to combine)",
    )
    parser.add_argument("--brokers", type=_ids, help="the target broker set (default: the live brokers)")
    parser.add_argument("--remove-brokers", type=_ids, default=(), help="brokers to drain")
    parser.add_argument("--topics", type=_names, help="plan only these topics")
    parser.add_argument("--balance", default="count", help="count (default) or bytes")
    parser.add_argument("--capacity", type=_capacity, help="relative broker weights: 1=2,2=1")
    parser.add_argument("--output", type=Path, required=True, help="where to write the reassignment JSON")
    parser.add_argument("--report", type=Path, help="where to write the report JSON")
    parser.add_argument("--spark-master", default="local[*]", help="Spark master for --from-file")


def _fail(message: str) -> int:
    print(f"keel: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from node.planner.request import PlanError, PlanRequest

    goals = tuple(g.strip() for value in args.goal for g in value.split(",") if g.strip())
    try:
        request = PlanRequest(
            goals=goals,
            brokers=args.brokers,
            remove_brokers=args.remove_brokers,
            topics=args.topics,
            balance=args.balance,
            capacity=args.capacity,
        )
    except PlanError as e:
        return _fail(str(e))
    if args.from_file is None:
        return _fail("the cluster's planner cannot be reached from here: give --from-file cluster.json")
    return plan_from_file(args, request)


def plan_from_file(args: argparse.Namespace, request: Any) -> int:
    from node.planner.plan import plan
    from node.planner.request import PlanError
    from node.planner.session import spark_session
    from node.planner.snapshot import SnapshotError, frames, read_snapshot_rows

    try:
        rows = read_snapshot_rows(args.from_file)
    except SnapshotError as e:
        return _fail(f"{args.from_file}: {e}")
    spark = spark_session(args.spark_master)
    try:
        result = plan(spark, frames(spark, *rows), request)
    except SnapshotError as e:
        return _fail(f"{args.from_file}: {e}")
    except PlanError as e:
        return _fail(str(e))
    try:
        args.output.write_bytes(orjson.dumps(result.to_reassignment_json()))
        if args.report is not None:
            args.report.write_bytes(orjson.dumps(result.report, option=orjson.OPT_INDENT_2))
    except OSError as e:
        return _fail(f"cannot write: {e}")
    if args.format == "json":
        print_json(result.report)
    else:
        print_report(result.report)
    return 0


def print_report(report: dict[str, Any]) -> None:
    rows = [
        [
            b["broker"],
            b["rack"],
            "" if b["target"] else "no",
            f"{b['replicas_before']} -> {b['replicas_after']}",
            f"{b['leaders_before']} -> {b['leaders_after']}",
            f"{_gib(b['bytes_before'])} -> {_gib(b['bytes_after'])}",
        ]
        for b in report["brokers"]
    ]
    print_table(["BROKER", "RACK", "TARGET", "REPLICAS", "LEADERS", "GIB"], rows)
    print()
    bound = report["lower_bound"]
    ratio = report["moves_over_lower_bound"]
    print(f"Moves:            {report['moves']} (lower bound {bound}" + (f", {ratio}x)" if ratio else ")"))
    print(f"Bytes to move:    {_gib(report['bytes'])} GiB")
    print(f"Leader changes:   {report['leader_changes']}")
    print(f"Partitions:       {report['changed_partitions']} of {report['partitions']} change")
    for key, label in (
        ("replica_spread", "Replica spread"),
        ("leader_spread", "Leader spread"),
        ("topic_spread", "Topic spread"),
        ("rack_violations", "Rack violations"),
        ("bytes_spread_pct_of_mean", "Bytes spread %"),
    ):
        print(f"{label + ':':<18}{report[key]['before']} -> {report[key]['after']}")
    print(f"Seconds:          {report['seconds']}")


def _gib(value: int) -> str:
    return f"{value / (1 << 30):.1f}"
