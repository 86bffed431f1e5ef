"""`keel reassign execute|verify|cancel|list`, shaped like Kafka's kafka-reassign-partitions.

The file is Kafka's reassignment JSON, `{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2,3]}]}`; a bad file is one line on stderr and exit 2, before connecting.

`execute --throttle R` does what Kafka's tool does before starting the moves: it sets
`leader.replication.throttled.rate` and `follower.replication.throttled.rate` to R on every
broker that holds or receives a moving replica, and on each topic sets
`leader.replication.throttled.replicas` to the current replicas of its moving partitions and
`follower.replication.throttled.replicas` to the replicas being added. `verify` removes them
once every partition in the file is complete, as does `cancel` (Kafka's default without
--preserve-throttles).

Bytes still to copy: for each partition in progress, the leader's figure from DescribeLogDirs
(the bytes from each adding replica's last fetch offset to the log end), or while it has none
yet, the leader's replica size minus each adding replica's. `--wait` draws them as a progress
bar.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson

from node.cli import plan_commands, plan_status
from node.cli.arguments import non_negative_int
from node.cli.output import print_json, print_table
from node.cli.partition_file import EXIT_BAD_FILE, Partition
from node.cli.reassignment_plan import (
    ReassignmentFileError,
    load_reassignment_file,
    mib,
    reassignment_json,
    render_progress,
)
from node.clients.admin import KeelAdminClient
from node.clients.replica_sizes import ReplicaSizeReader, bytes_to_copy
from node.clients.throttles import clear_throttle_resources, throttle_plan, throttle_resources
from wire.api import (
    AlterConfigsResource,
    MetadataResponse,
)
from wire.errors import ErrorCode

# Seconds between two looks at the progress of `execute --wait`.
POLL_INTERVAL_S = 0.5


# --- talking to the cluster ---


def _assignment(metadata: MetadataResponse) -> tuple[dict[Partition, list[int]], dict[Partition, int]]:
    replicas, leaders = {}, {}
    for topic in metadata.topics:
        for p in topic.partitions:
            replicas[topic.name, p.partition] = list(p.replicas)
            leaders[topic.name, p.partition] = p.leader
    return replicas, leaders


async def _ongoing(admin: KeelAdminClient, partitions: list[Partition] | None) -> dict[Partition, list[int]]:
    """Partition → adding replicas, for the reassignments in progress."""
    response = await admin.list_partition_reassignments(partitions)
    if response.error_code != ErrorCode.NONE:
        raise ValueError(f"listing reassignments failed: {ErrorCode(response.error_code).name}")
    return {
        (t.name, p.partition_index): list(p.adding_replicas) for t in response.topics for p in t.partitions
    }


# --- the commands ---


async def execute(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> int:
    topics = sorted({t for t, _ in targets})
    metadata = await admin.metadata(topics)
    current, _ = _assignment(metadata)
    missing = [f"{t}-{p}" for t, p in targets if (t, p) not in current]
    if missing:
        print(f"keel: these partitions do not exist: {', '.join(missing)}", file=sys.stderr)
        return 1
    ongoing = await _ongoing(admin, None)
    if ongoing and not args.additional:
        print(
            f"keel: {len(ongoing)} reassignments are in progress already; "
            "wait for them, or pass --additional",
            file=sys.stderr,
        )
        return 1
    rollback = {tp: current[tp] for tp in targets}
    if args.format != "json":
        print("Current partition replica assignment (save it to roll back):")
        print(orjson.dumps(reassignment_json(rollback)).decode())
        print()
    if args.throttle is not None:
        plan = throttle_plan(current, targets)
        failed = await _alter(admin, throttle_resources(plan, args.throttle))
        if failed:
            return 1
        if args.format != "json":
            print(f"Throttle set to {args.throttle} bytes/s on brokers {sorted(plan.brokers)}.")
    response = await admin.alter_partition_reassignments({tp: r for tp, r in targets.items()})
    results = [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "error": None if p.error_code == ErrorCode.NONE else ErrorCode(p.error_code).name,
            "message": p.error_message,
        }
        for t in response.responses
        for p in t.partitions
    ]
    if response.error_code != ErrorCode.NONE:
        print(f"keel: the controller refused: {ErrorCode(response.error_code).name}", file=sys.stderr)
        return 1
    errors = [r for r in results if r["error"]]
    if args.format != "json":
        started = len(results) - len(errors)
        print(f"Started the reassignment of {started} partitions.")
        for r in errors:
            print(f"Error for {r['topic']}-{r['partition']}: {r['error']}: {r['message']}", file=sys.stderr)
    outcome = {"current": reassignment_json(rollback), "results": results}
    if args.wait and not errors:
        outcome["verify"] = await _wait(admin, args, targets)
    if args.format == "json":
        print_json(outcome)
    return 1 if errors else 0


async def _wait(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> list[dict[str, object]]:
    """Draw progress until no partition of the file is in progress, then verify."""
    metadata = await admin.metadata(sorted({t for t, _ in targets}))
    reader = ReplicaSizeReader(metadata, args.timeout)
    interactive = sys.stderr.isatty()
    first_total: int | None = None
    samples: list[tuple[float, int]] = []
    last_line = 0.0
    try:
        while True:
            ongoing = await _ongoing(admin, list(targets))
            _, leaders = _assignment(await admin.metadata(sorted({t for t, _ in targets})))
            remaining = sum((await bytes_to_copy(reader, ongoing, leaders)).values())
            first_total = remaining if first_total is None else max(first_total, remaining)
            copied = first_total - remaining
            now = time.monotonic()
            samples = [s for s in samples if now - s[0] <= 5.0] + [(now, copied)]
            rate = None
            if len(samples) > 1 and samples[-1][0] > samples[0][0]:
                rate = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
            line = render_progress(len(targets) - len(ongoing), len(targets), copied, first_total, rate)
            if interactive:
                print("\r" + line, end="", file=sys.stderr, flush=True)
            elif now - last_line >= 5.0 or not ongoing:
                print(line, file=sys.stderr, flush=True)
                last_line = now
            if not ongoing:
                break
            await asyncio.sleep(POLL_INTERVAL_S)
    finally:
        if interactive:
            print(file=sys.stderr)
        await reader.close()
    return await _verify(admin, args, targets)


async def _verify(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> list[dict[str, object]]:
    ongoing = await _ongoing(admin, list(targets))
    metadata = await admin.metadata(sorted({t for t, _ in targets}))
    current, leaders = _assignment(metadata)
    reader = ReplicaSizeReader(metadata, args.timeout)
    try:
        left = await bytes_to_copy(reader, {tp: a for tp, a in ongoing.items() if tp in targets}, leaders)
    finally:
        await reader.close()
    states = []
    for tp, target in targets.items():
        if tp in ongoing:
            state = "in progress"
        elif current.get(tp) == target:
            state = "complete"
        else:
            state = "failed"
        states.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "state": state,
                "replicas": current.get(tp),
                "target": target,
                "bytes_to_copy": left.get(tp, 0),
            }
        )
    if all(s["state"] == "complete" for s in states):
        brokers = [b.broker_id for b in metadata.brokers]
        failed = await _alter(admin, clear_throttle_resources(brokers, [t for t, _ in targets]), quiet=True)
        if not failed and args.format != "json":
            print("Every reassignment is complete; the throttles are removed.")
    return states


async def verify(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> int:
    states = await _verify(admin, args, targets)
    if args.format == "json":
        print_json(states)
    else:
        for s in states:
            line = f"Reassignment of partition {s['topic']}-{s['partition']} is {s['state']}"
            if s["state"] == "in progress":
                line += f" ({mib(int(str(s['bytes_to_copy'])))} to copy)"
            elif s["state"] == "failed":
                line += f": replicas are {s['replicas']}, not {s['target']}"
            print(line + ".")
    return 1 if any(s["state"] == "failed" for s in states) else 0


async def cancel(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> int:
    response = await admin.alter_partition_reassignments(dict.fromkeys(targets))
    if response.error_code != ErrorCode.NONE:
        print(f"keel: the controller refused: {ErrorCode(response.error_code).name}", file=sys.stderr)
        return 1
    results = [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "error": None if p.error_code == ErrorCode.NONE else ErrorCode(p.error_code).name,
        }
        for t in response.responses
        for p in t.partitions
    ]
    metadata = await admin.metadata(sorted({t for t, _ in targets}))
    await _alter(
        admin,
        clear_throttle_resources([b.broker_id for b in metadata.brokers], [t for t, _ in targets]),
        quiet=True,
    )
    if args.format == "json":
        print_json(results)
    else:
        for r in results:
            outcome = "cancelled" if r["error"] is None else f"not cancelled: {r['error']}"
            print(f"Reassignment of partition {r['topic']}-{r['partition']} {outcome}.")
    # Nothing to cancel is not a failure of the command.
    return 1 if any(r["error"] not in (None, "NO_REASSIGNMENT_IN_PROGRESS") for r in results) else 0


async def list_reassignments(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    response = await admin.list_partition_reassignments(None)
    if response.error_code != ErrorCode.NONE:
        print(f"keel: listing reassignments failed: {ErrorCode(response.error_code).name}", file=sys.stderr)
        return 1
    metadata = await admin.metadata(sorted({t.name for t in response.topics}) or None)
    _, leaders = _assignment(metadata)
    adding = {
        (t.name, p.partition_index): list(p.adding_replicas) for t in response.topics for p in t.partitions
    }
    reader = ReplicaSizeReader(metadata, args.timeout)
    try:
        left = await bytes_to_copy(reader, adding, leaders)
    finally:
        await reader.close()
    rows = [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "replicas": p.replicas,
            "adding_replicas": p.adding_replicas,
            "removing_replicas": p.removing_replicas,
            "bytes_to_copy": left.get((t.name, p.partition_index), 0),
        }
        for t in response.topics
        for p in t.partitions
    ]
    if args.format == "json":
        print_json(rows)
    else:
        print_table(
            ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "TO COPY"],
            [
                [
                    r["topic"],
                    r["partition"],
                    _ids(r["replicas"]),
                    _ids(r["adding_replicas"]),
                    _ids(r["removing_replicas"]),
                    mib(int(str(r["bytes_to_copy"]))),
                ]
                for r in rows
            ],
        )
    return 0


def _ids(value: object) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


async def _alter(
    admin: KeelAdminClient, resources: list[AlterConfigsResource], *, quiet: bool = False
) -> bool:
    """Apply config changes; True if any failed (each failure is one line on stderr)."""
    if not resources:
        return False
    response = await admin.incremental_alter_configs(resources)
    failed = [r for r in response.responses if r.error_code != ErrorCode.NONE]
    for r in failed:
        if not quiet or r.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            print(
                f"keel: config of {r.resource_name or '<default>'}: "
                f"{ErrorCode(r.error_code).name}: {r.error_message}",
                file=sys.stderr,
            )
    return bool(failed)


def add_arguments(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    file_help = 'Kafka\'s reassignment JSON: {"version":1,"partitions":[{"topic","partition","replicas"}]}'
    execute_parser = sub.add_parser("execute", parents=[common], help="start the reassignments in a file")
    execute_parser.add_argument("--reassignment-json-file", required=True, help=file_help)
    execute_parser.add_argument(
        "--throttle", type=non_negative_int, default=None, metavar="BYTES_PER_S", help="replication throttle"
    )
    execute_parser.add_argument("--wait", action="store_true", help="show progress until complete")
    execute_parser.add_argument(
        "--additional", action="store_true", help="start even while other reassignments are in progress"
    )
    for name, text in (
        ("verify", "report each partition; remove the throttles once all are complete"),
        ("cancel", "cancel the reassignments in a file and remove the throttles"),
    ):
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("--reassignment-json-file", required=True, help=file_help)
    sub.add_parser("list", parents=[common], help="the reassignments in progress")
    plan_commands.add_arguments(sub, common)
    plan_status.add_arguments(sub, common)


async def run(args: argparse.Namespace, bootstrap: str) -> int:
    """The file is checked before anything connects: a bad one is one line and exit 2."""
    if args.command == "status":
        return await plan_status.status_command(args, bootstrap)
    if args.command in plan_commands.COMMANDS:
        return await plan_commands.run(args, bootstrap)
    targets: dict[Partition, list[int]] = {}
    if args.command != "list":
        try:
            targets = load_reassignment_file(args.reassignment_json_file)
        except ReassignmentFileError as e:
            print(f"keel: {args.reassignment_json_file}: {e}", file=sys.stderr)
            return EXIT_BAD_FILE
    async with KeelAdminClient(bootstrap, timeout=args.timeout) as admin:
        if args.command == "list":
            return await list_reassignments(admin, args)
        command = {"execute": execute, "verify": verify, "cancel": cancel}[args.command]
        return await command(admin, args, targets)
