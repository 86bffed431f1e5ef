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
from node.cli.partition_file import Partition
from node.cli.reassignment_plan import (
    ReassignmentFileError,
    dead_targets,
    load_reassignment_file,
    mib,
    missing_partitions,
    reassignment_json,
    render_progress,
)
from node.clients.admin import KeelAdminClient
from node.clients.replica_sizes import ReplicaSizeReader, bytes_to_copy
from node.clients.throttles import clear_throttle_resources, throttle_plan, throttle_resources
from node.command.entry import CommandError, PartialError, UsageError
from node.command.options import non_negative_int
from node.command.output import print_json, print_table
from wire.api import AlterConfigsResource, AlterConfigsResourceResponse, MetadataResponse
from wire.errors import ErrorCode, WireError

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
        raise CommandError(f"listing reassignments failed: {ErrorCode(response.error_code).name}")
    return {
        (t.name, p.partition_index): list(p.adding_replicas) for t in response.topics for p in t.partitions
    }


async def _existing(admin: KeelAdminClient, targets: dict[Partition, list[int]]) -> MetadataResponse:
    """The metadata of the file's topics; a partition the cluster does not have is a failure
    of the command before anything is sent."""
    metadata = await admin.metadata(sorted({t for t, _ in targets}))
    current, _ = _assignment(metadata)
    if missing := missing_partitions(current, targets):
        raise CommandError(missing)
    return metadata


# --- the commands ---


async def execute(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> int:
    """Kafka's order: check, print the current assignment (to roll back), set the throttle,
    start the moves. What fails once something is set is a PartialError saying what was."""
    metadata = await _existing(admin, targets)
    current, _ = _assignment(metadata)
    if dead := dead_targets(current, targets, {b.broker_id for b in metadata.brokers}):
        raise CommandError(f"{dead}; nothing was started")
    ongoing = await _ongoing(admin, None)
    if ongoing and not args.additional:
        raise CommandError(
            f"{len(ongoing)} reassignments are in progress already; wait for them, or pass --additional"
        )
    rollback = {tp: current[tp] for tp in targets}
    if args.format != "json":
        print("Current partition replica assignment (save it to roll back):")
        print(orjson.dumps(reassignment_json(rollback)).decode())
        print()
    throttled = await _set_throttle(admin, args, current, targets)
    results = await _start(admin, targets, throttled, args.reassignment_json_file)
    errors = [r for r in results if r["error"]]
    started = len(results) - len(errors)
    if args.format != "json":
        print(f"Started the reassignment of {started} partitions.")
    outcome: dict[str, object] = {"current": reassignment_json(rollback), "results": results}
    if args.wait and not errors:
        outcome["verify"] = await _follow(admin, args, targets)
    if args.format == "json":
        print_json(outcome)
    if errors:
        refused = ", ".join(f"{r['topic']}-{r['partition']} ({r['error']}: {r['message']})" for r in errors)
        if started or throttled:
            raise PartialError(
                f"started the reassignment of {started} of {len(results)} partitions"
                f"{_throttle_note(throttled, args.reassignment_json_file)}; the controller refused {refused}"
            )
        raise CommandError(f"the controller refused {refused}; nothing was started")
    return 0


async def _set_throttle(
    admin: KeelAdminClient,
    args: argparse.Namespace,
    current: dict[Partition, list[int]],
    targets: dict[Partition, list[int]],
) -> list[int]:
    """Set --throttle as Kafka's tool does; returns the brokers throttled (none without it)."""
    if args.throttle is None:
        return []
    plan = throttle_plan(current, targets)
    resources = throttle_resources(plan, args.throttle)
    if failed := await _alter(admin, resources):
        if len(failed) == len(resources):
            raise CommandError("setting the throttle failed (above); nothing was set or started")
        raise PartialError(
            f"setting the throttle failed (above) on {len(failed)} of {len(resources)} resources, so no "
            f"reassignment was started; `keel reassign cancel --reassignment-json-file "
            f"{args.reassignment_json_file}` removes the throttle that was set"
        )
    if args.format != "json":
        print(f"Throttle set to {args.throttle} bytes/s on brokers {sorted(plan.brokers)}.")
    return sorted(plan.brokers)


async def _start(
    admin: KeelAdminClient, targets: dict[Partition, list[int]], throttled: list[int], file: str
) -> list[dict[str, object]]:
    """AlterPartitionReassignments: a result per partition. A refusal of the whole request
    after the throttle was set leaves the throttle, and says so."""
    response = await admin.alter_partition_reassignments({tp: r for tp, r in targets.items()})
    if response.error_code != ErrorCode.NONE:
        refusal = f"the controller refused the reassignment: {ErrorCode(response.error_code).name}"
        if throttled:
            raise PartialError(f"{refusal}{_throttle_note(throttled, file)}")
        raise CommandError(f"{refusal}; nothing was started")
    return [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "error": None if p.error_code == ErrorCode.NONE else ErrorCode(p.error_code).name,
            "message": p.error_message,
        }
        for t in response.responses
        for p in t.partitions
    ]


def _throttle_note(throttled: list[int], file: str) -> str:
    if not throttled:
        return ""
    return (
        f"; the throttle stays set on brokers {throttled}: `keel reassign cancel "
        f"--reassignment-json-file {file}` removes it (and cancels what started)"
    )


async def _follow(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> list[dict[str, object]]:
    """`--wait` once the moves started: a failure to follow them does not stop them."""
    try:
        return await _wait(admin, args, targets)
    except (WireError, OSError, TimeoutError) as e:
        raise PartialError(
            f"started the reassignment of {len(targets)} partitions, but following it failed: {e}; "
            f"`keel reassign verify --reassignment-json-file {args.reassignment_json_file}` shows how far"
        ) from e


async def _wait(
    admin: KeelAdminClient, args: argparse.Namespace, targets: dict[Partition, list[int]]
) -> list[dict[str, object]]:
    """Draw progress until no partition of the file is in progress, then verify."""
    metadata = await admin.metadata(sorted({t for t, _ in targets}))
    reader = ReplicaSizeReader(metadata, args.timeout, security=admin.security)
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
    reader = ReplicaSizeReader(metadata, args.timeout, security=admin.security)
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
    await _existing(admin, targets)
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
    metadata = await _existing(admin, targets)
    response = await admin.alter_partition_reassignments(dict.fromkeys(targets))
    if response.error_code != ErrorCode.NONE:
        raise CommandError(
            f"the controller refused: {ErrorCode(response.error_code).name}; nothing was cancelled"
        )
    results = [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "error": None if p.error_code == ErrorCode.NONE else ErrorCode(p.error_code).name,
        }
        for t in response.responses
        for p in t.partitions
    ]
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
        raise CommandError(f"listing reassignments failed: {ErrorCode(response.error_code).name}")
    metadata = await admin.metadata(sorted({t.name for t in response.topics}) or None)
    _, leaders = _assignment(metadata)
    adding = {
        (t.name, p.partition_index): list(p.adding_replicas) for t in response.topics for p in t.partitions
    }
    reader = ReplicaSizeReader(metadata, args.timeout, security=admin.security)
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
) -> list[AlterConfigsResourceResponse]:
    """Apply config changes; returns those that failed (each is one line on stderr)."""
    if not resources:
        return []
    response = await admin.incremental_alter_configs(resources)
    failed = [r for r in response.responses if r.error_code != ErrorCode.NONE]
    for r in failed:
        if not quiet or r.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            print(
                f"keel: config of {r.resource_name or '<default>'}: "
                f"{ErrorCode(r.error_code).name}: {r.error_message}",
                file=sys.stderr,
            )
    return failed


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
            raise UsageError(f"{args.reassignment_json_file}: {e}") from None
    async with KeelAdminClient(
        bootstrap, timeout=args.timeout, security=args.security, fail_unreachable=True
    ) as admin:
        if args.command == "list":
            return await list_reassignments(admin, args)
        command = {"execute": execute, "verify": verify, "cancel": cancel}[args.command]
        return await command(admin, args, targets)
