"""`keel reassign plan` and `keel reassign snapshot`: reassignment plans.

    keel reassign plan --goal rebalance [--goal leaders ...] [--brokers 1,2,...]
        [--remove-brokers 3,4] [--topics t1,t2] [--balance count|bytes] [--capacity 1=2,2=1]
        --output plan.json [--report report.json] [--format json|table]
        [--execute] [--throttle BYTES_PER_S] [--planner host:port]
        [--from-file cluster.json [--spark-master local[*]]]
    keel reassign snapshot --output cluster.json [--zookeeper host:port/chroot]

`plan` asks the cluster's planner (found through any broker, which reads `/keel/planner`, or
named by `--planner`); with `--from-file` it plans on that cluster.json with a local
SparkSession and no cluster at all. The plan file is Kafka's reassignment JSON (for `keel
reassign execute`); the table shows each broker before and after, the moves against their
lower bound, and the balance. `--execute` has the planner's executor carry the plan out.

A bad request or snapshot file is one line on stderr and exit 2, before Spark starts or
anything connects when the arguments alone show it. A planner that is not running, or that
refuses the request (a broker the cluster does not know, a plan that cannot be made), is one
line and exit 1; nothing is executed either way.

`snapshot` reads ZooKeeper and asks every live broker for its replica sizes (DescribeLogDirs):
the cluster.json format, no Spark.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from node.cli.plan_status import check_planner_address
from node.cli.zookeeper_access import (
    add_zookeeper_argument,
    command_security,
    zookeeper_connect,
    zookeeper_session,
)
from node.clients.planner import PlannerClient, PlannerNotRunning, find_planner
from node.command.entry import CommandError, PartialError, UsageError
from node.command.options import non_negative_int
from node.command.output import OutputFile, print_json, print_table
from wire.api.planner import PlanReassignmentRequest
from wire.errors import ErrorCode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from node.planner.live_snapshot import LiveSnapshot
    from node.planner.request import PlanRequest
    from node.zk.acls import ZkSecurity
    from wire.security import ClientSecurity

COMMANDS = ("plan", "snapshot")


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
    parser.add_argument("--execute", action="store_true", help="have the planner's executor carry it out")
    parser.add_argument("--throttle", type=non_negative_int, default=None, metavar="BYTES_PER_S")
    parser.add_argument("--planner", metavar="HOST:PORT", help="the planner (default: ask a broker)")
    snapshot = sub.add_parser("snapshot", parents=[common], help="export the live cluster as cluster.json")
    snapshot.add_argument("--output", type=Path, required=True)
    add_zookeeper_argument(snapshot)


async def run(args: argparse.Namespace, bootstrap: str) -> int:
    """Every argument is checked and every output file opened before the planner is asked:
    a plan executed must not be followed by "cannot write"."""
    if args.command == "snapshot":
        return await snapshot(args)
    request = _checked_request(args)
    with contextlib.ExitStack() as outputs:
        output = outputs.enter_context(OutputFile(args.output, "--output"))
        report_output = (
            None if args.report is None else outputs.enter_context(OutputFile(args.report, "--report"))
        )
        if args.from_file is not None:
            reassignment, report = plan_from_file(args, request)
        else:
            reassignment, report = await _plan_live(args, bootstrap, request)
        _write(output, report_output, reassignment, report)
    _show(args, report)
    return 0


def _checked_request(args: argparse.Namespace) -> PlanRequest:
    """The request, and every argument beside it, checked before anything connects."""
    from node.planner.request import PlanError, PlanRequest
    from node.planner.session import master_problem

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
        raise UsageError(str(e)) from None
    if args.from_file is not None and args.execute:
        raise UsageError("--execute needs the cluster's planner, not --from-file")
    if args.from_file is not None and (problem := master_problem(args.spark_master)):
        raise UsageError(f"--spark-master {args.spark_master}: {problem}")
    check_planner_address(args.planner)
    return request


def _write(
    output: OutputFile, report_output: OutputFile | None, reassignment: dict[str, Any], report: dict[str, Any]
) -> None:
    """Write the plan, then the report. If the planner's executor is already carrying the plan
    out, a failed write is reported as such, with the plan on stdout to act on."""
    plan_json = orjson.dumps(reassignment)
    written: OutputFile | None = None
    try:
        for written, data in (
            (output, plan_json),
            (report_output, orjson.dumps(report, option=orjson.OPT_INDENT_2)),
        ):
            if written is not None:
                written.write(data)
    except OSError as e:
        assert written is not None
        failure = f"cannot write {written.path}: {e.strerror or e}"
        if not report.get("executing"):
            raise CommandError(f"{failure}; nothing was executed") from None
        sys.stdout.write(plan_json.decode() + "\n")
        raise PartialError(
            f"plan {report.get('plan_id')} is executing ({len(reassignment['partitions'])} partitions, "
            f"see `keel reassign status`), but {failure}; the plan is on stdout"
        ) from None


def _show(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.format == "json":
        print_json(report)
    else:
        print_report(report)
        if report.get("executing"):
            print("The planner's executor is carrying the plan out: see `keel reassign status`.")


# --- plan ---


async def _plan_live(
    args: argparse.Namespace, bootstrap: str, checked: PlanRequest
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan from the cluster's planner, for a request already checked here."""
    request = PlanReassignmentRequest(
        goals=list(checked.goals),
        brokers=None if checked.brokers is None else list(checked.brokers),
        remove_brokers=list(checked.remove_brokers),
        topics=None if checked.topics is None else list(checked.topics),
        balance=checked.balance,
        capacity=None if checked.capacity is None else {str(k): v for k, v in checked.capacity.items()},
        execute=args.execute,
        throttle_bytes_per_s=-1 if args.throttle is None else args.throttle,
    )
    try:
        if args.planner is not None:
            client = PlannerClient.at(args.planner, timeout=args.timeout, security=args.security)
        else:
            endpoint = await find_planner(bootstrap, timeout=args.timeout, security=args.security)
            client = PlannerClient(endpoint, security=args.security)
        async with client:
            response = await client.plan(request)
    except PlannerNotRunning as e:
        raise CommandError(str(e)) from None
    if response.error_code != ErrorCode.NONE:
        try:
            name = ErrorCode(response.error_code).name
        except ValueError:
            name = str(response.error_code)
        raise CommandError(f"the planner refused: {name}: {response.error_message}")
    partitions = [
        {"topic": p.topic, "partition": p.partition, "replicas": p.replicas} for p in response.partitions
    ]
    report = orjson.loads(response.report_json)
    report.setdefault("plan_id", response.plan_id)
    report.setdefault("snapshot", response.snapshot)
    if args.execute:
        report["executing"] = response.executing
    return {"version": 1, "partitions": partitions}, report


def plan_from_file(args: argparse.Namespace, request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from node.planner.plan import plan
    from node.planner.request import PlanError
    from node.planner.snapshot import SnapshotError, frames, read_snapshot_rows

    try:
        rows = read_snapshot_rows(args.from_file)
    except SnapshotError as e:
        raise UsageError(f"{args.from_file}: {e}") from None
    spark = _start_spark(args.spark_master)
    try:
        result = plan(spark, frames(spark, *rows), request)
    except SnapshotError as e:
        raise UsageError(f"{args.from_file}: {e}") from None
    except PlanError as e:
        raise UsageError(str(e)) from None
    return result.to_reassignment_json(), result.report


def _start_spark(master: str) -> SparkSession:
    from node.planner.session import spark_session

    try:
        return spark_session(master)
    except Exception as e:  # py4j and pyspark raise several kinds; each means Spark did not start
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CommandError(
            f"Spark did not start with --spark-master {master}: {reason}; "
            "check that master, or plan with --spark-master local[*]"
        ) from e


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
    if stats := report.get("bytes_balance"):
        print(
            f"Bytes pass:       {stats['swaps']} swaps in {stats['rounds']} rounds, "
            f"{stats['extra_moves']} moves on top of the count plan's {stats['count_plan_moves']}"
            + (f"; brokers outside ±5 %: {stats['outside_band']}" if stats["outside_band"] else "")
        )
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


# --- snapshot ---


async def snapshot(args: argparse.Namespace) -> int:
    connect = zookeeper_connect(args)
    security = command_security(args)
    with OutputFile(args.output, "--output") as output:
        taken = await _take_snapshot(connect, args.timeout, security, args.security)
        try:
            output.write(orjson.dumps(taken.cluster_json(), option=orjson.OPT_INDENT_2) + b"\n")
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror or e}") from None
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


async def _take_snapshot(
    connect: str, timeout: float, security: ZkSecurity, client_security: ClientSecurity
) -> LiveSnapshot:
    """Read the cluster through ZooKeeper (node/cli/zookeeper_access.py), and the replica
    sizes from the brokers with the client's security (`--command-config`)."""
    from actors.base.clock import SystemClock
    from node.planner import live_snapshot
    from node.zk.store import ZkClusterStore

    async with zookeeper_session(connect, timeout, security) as zk:
        return await live_snapshot.take(
            ZkClusterStore(zk, SystemClock()),
            timeout=timeout,
            now_ms=int(time.time() * 1000),
            security=client_security,
        )
