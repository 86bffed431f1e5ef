"""`keel consumer-groups`, shaped like Kafka's kafka-consumer-groups.sh, with its option names:

    --list [--state [S,...]]                       every group of every broker (ListGroups)
    --describe (--group G ... | --all-groups) [--members [--verbose] | --state]
    --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P] ... | --all-topics)
                    (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime T)
                    [--dry-run | --execute]
    --delete (--group G ... | --all-groups)
    --delete-offsets --group G --topic T[:P,P] ...

The rows and the reset plan are pure (node/cli/group_rows.py, offset_reset.py); the requests
go through GroupAdminClient (node/clients/group_admin.py). Kafka's messages are kept
("Consumer group 'G' does not exist.", "Assignments can only be reset if the group 'G' is
inactive, ..."), but each failure is a line on stderr and the exit status 1, where Kafka
prints "Error: ..." on stdout and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from node.cli.group_rows import (
    CONSUMER_PROTOCOL,
    MEMBERS_HEADERS,
    OFFSETS_HEADERS,
    REBALANCING,
    STATE_HEADERS,
    TopicPartition,
    member_rows,
    offset_rows,
    parse_states,
    state_row,
)
from node.cli.offset_reset import (
    LogOffsets,
    ResetError,
    ResetSpec,
    ResetTo,
    parse_datetime,
    parse_topic_scope,
    plan_reset,
)
from node.clients.group_admin import Coordinator, GroupAdminClient
from node.clients.metadata import UnknownTopicError
from node.command.entry import CommandError, UsageError
from node.command.output import print_json, print_table
from wire.api import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, DescribedGroup, ListedGroup
from wire.errors import ErrorCode, WireError

GROUP = "consumer-groups"
ACTIONS = ("list", "describe", "reset_offsets", "delete", "delete_offsets")

# How Kafka's tool words the errors of DeleteGroups and OffsetDelete for a group.
_GROUP_ERRORS = {
    ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
    ErrorCode.NON_EMPTY_GROUP: "the group is not empty (it has active members)",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "not authorized to access the group",
    ErrorCode.INVALID_GROUP_ID: "the group id is not valid",
}


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    parser = groups.add_parser(
        GROUP, parents=[common], help="list, describe, delete consumer groups and reset their offsets"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every consumer group")
    action.add_argument(
        "--describe", action="store_true", help="the groups' offsets and lag, members or state"
    )
    action.add_argument("--reset-offsets", action="store_true", help="reset the offsets of inactive groups")
    action.add_argument("--delete", action="store_true", help="delete groups without members")
    action.add_argument("--delete-offsets", action="store_true", help="delete a group's offsets of topics")
    # Not `group`: that is the name of the command (`args.group`, node/cli/main.py).
    parser.add_argument(
        "--group",
        dest="group_ids",
        action="append",
        default=[],
        metavar="GROUP",
        help="a group (repeat for several)",
    )
    parser.add_argument("--all-groups", action="store_true", help="every group")
    parser.add_argument(
        "--topic", action="append", default=[], help="T or T:0,1,2 (repeatable), for the offsets' commands"
    )
    parser.add_argument("--all-topics", action="store_true", help="every topic the group has offsets of")
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="--list: show states, or list only groups in these (stable,empty,...); --describe: the state",
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="--describe: the members")
    view.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N", help="positive or negative")
    to.add_argument(
        "--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="local time unless it has a zone"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the plan")


def check_args(args: argparse.Namespace) -> None:
    """Kafka's combinations of options (ConsumerGroupCommandOptions.checkArgs); UsageError
    before anything is sent."""
    if args.group_ids and args.all_groups:
        raise UsageError("--group and --all-groups do not go together")
    needs_groups = args.describe or args.reset_offsets or args.delete
    if needs_groups and not (args.group_ids or args.all_groups):
        raise UsageError(f"--{_action(args)} takes --group G or --all-groups")
    if args.list and (args.group_ids or args.all_groups):
        raise UsageError("--list takes no --group or --all-groups")
    if (args.members or args.offsets) and not args.describe:
        raise UsageError("--members and --offsets go with --describe")
    if args.state is not None:
        if not (args.list or args.describe):
            raise UsageError("--state goes with --list or --describe")
        if args.describe and (args.state or args.members or args.offsets):
            raise UsageError("--describe takes --state without a value, and not with --members or --offsets")
    if args.topic and not (args.reset_offsets or args.delete_offsets):
        raise UsageError("--topic goes with --reset-offsets or --delete-offsets")
    if args.delete_offsets and (len(args.group_ids) != 1 or not args.topic):
        raise UsageError("--delete-offsets takes one --group and at least one --topic")
    reset_given = any(
        (
            args.to_earliest,
            args.to_latest,
            args.to_offset is not None,
            args.shift_by is not None,
            args.to_datetime is not None,
        )
    )
    if args.reset_offsets:
        if bool(args.topic) == args.all_topics:
            raise UsageError("--reset-offsets takes --topic T (repeatable) or --all-topics")
        if not reset_given:
            raise UsageError(
                "--reset-offsets takes one of --to-earliest, --to-latest, --to-offset, --shift-by, "
                "--to-datetime"
            )
    elif reset_given or args.dry_run or args.execute or args.all_topics:
        raise UsageError("--to-*, --shift-by, --all-topics, --dry-run and --execute go with --reset-offsets")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in ACTIONS if getattr(args, a)).replace("_", "-")


def reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(ResetTo.EARLIEST)
    if args.to_latest:
        return ResetSpec(ResetTo.LATEST)
    if args.to_offset is not None:
        return ResetSpec(ResetTo.OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetSpec(ResetTo.SHIFT, args.shift_by)
    return ResetSpec(ResetTo.DATETIME, parse_datetime(args.to_datetime))


async def run(args: argparse.Namespace, bootstrap: str) -> int:
    check_args(args)
    try:
        spec = reset_spec(args) if args.reset_offsets else None
        scopes = [parse_topic_scope(t) for t in args.topic]
        states = parse_states(args.state) if args.list and args.state else []
    except ValueError as e:
        raise UsageError(str(e)) from e
    async with GroupAdminClient(
        bootstrap, timeout=args.timeout, security=args.security, fail_unreachable=True
    ) as admin:
        try:
            if args.list:
                return await list_groups(admin, args, states)
            group_ids = args.group_ids or [g.group_id for g in await _consumer_groups(admin, [])]
            if args.describe:
                return await describe(admin, args, group_ids)
            if args.delete:
                return await delete(admin, args, group_ids)
            if args.delete_offsets:
                return await delete_offsets(admin, args, group_ids[0], scopes)
            assert spec is not None
            return await reset_offsets(admin, args, group_ids, scopes, spec)
        except (UnknownTopicError, ResetError) as e:
            raise CommandError(str(e)) from e


async def _consumer_groups(admin: GroupAdminClient, states: Sequence[str]) -> list[ListedGroup]:
    """Kafka's listConsumerGroups: the groups of the consumer protocol, or of none yet (a
    group made by committing offsets alone)."""
    return [g for g in await admin.list_groups(states) if g.protocol_type in (CONSUMER_PROTOCOL, "")]


def _fail(message: str) -> None:
    print(message, file=sys.stderr)


def _print_rows(args: argparse.Namespace, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A table (none without rows, as Kafka's tool), or with --format json a list of objects
    keyed by the table's headers."""
    if args.format == "json":
        print_json([dict(zip(headers, row, strict=True)) for row in rows])
    elif rows:
        print_table(headers, rows)


# --- --list ---


async def list_groups(admin: GroupAdminClient, args: argparse.Namespace, states: list[str]) -> int:
    groups = await _consumer_groups(admin, states)
    if args.format == "json":
        print_json([{"group": g.group_id, "state": g.group_state} for g in groups])
    elif args.state is not None:
        print_table(["GROUP", "STATE"], [[g.group_id, g.group_state] for g in groups])
    else:
        for g in groups:
            print(g.group_id)
    return 0


# --- --describe ---


async def describe(admin: GroupAdminClient, args: argparse.Namespace, group_ids: list[str]) -> int:
    described = await admin.describe_groups(sorted(set(group_ids)))
    found: dict[str, tuple[Coordinator, DescribedGroup]] = {}
    failed = False
    for group_id, (coordinator, group) in described.items():
        if group.group_state == "Dead":
            _fail(f"Consumer group '{group_id}' does not exist.")
            failed = True
            continue
        if group.group_state == "Empty" and args.format != "json" and args.state is None:
            _fail(f"Consumer group '{group_id}' has no active members.")
        elif group.group_state in REBALANCING:
            _fail(f"Warning: Consumer group '{group_id}' is rebalancing.")
        found[group_id] = (coordinator, group)
    if args.state is not None:
        _print_states(args, found)
    elif args.members:
        _print_members(args, [group for _, group in found.values()])
    else:
        await _print_offsets(admin, args, [group for _, group in found.values()])
    return 1 if failed else 0


def _print_states(args: argparse.Namespace, found: dict[str, tuple[Coordinator, DescribedGroup]]) -> None:
    rows = [state_row(group, c.node_id, c.endpoint.host, c.endpoint.port) for c, group in found.values()]
    _print_rows(args, STATE_HEADERS, rows)


def _print_members(args: argparse.Namespace, groups: list[DescribedGroup]) -> None:
    with_assignment = bool(getattr(args, "verbose", False)) or args.format == "json"
    rows = [row for group in groups for row in member_rows(group, with_assignment=with_assignment)]
    headers = [*MEMBERS_HEADERS, *(["ASSIGNMENT"] if with_assignment else [])]
    _print_rows(args, headers, rows)


async def _print_offsets(
    admin: GroupAdminClient, args: argparse.Namespace, groups: list[DescribedGroup]
) -> None:
    committed = {g.group_id: await admin.fetch_offsets(g.group_id) for g in groups}
    rows = [row for g in groups for row in offset_rows(g, committed[g.group_id], {})]
    log_end = (
        await admin.list_offsets({(r.topic, r.partition) for r in rows}, LATEST_TIMESTAMP) if rows else {}
    )
    rows = [row for g in groups for row in offset_rows(g, committed[g.group_id], log_end)]
    _print_rows(args, OFFSETS_HEADERS, [row.cells() for row in rows])


# --- --reset-offsets ---


async def _scope_partitions(
    admin: GroupAdminClient, scopes: list[tuple[str, list[int] | None]]
) -> list[TopicPartition]:
    """The partitions `--topic` names: every partition of a topic named alone; a partition
    the topic does not have is an error."""
    counts = await admin.partition_counts([topic for topic, _ in scopes])
    partitions = []
    for topic, named in scopes:
        for p in named if named is not None else range(counts[topic]):
            if p >= counts[topic]:
                raise ResetError(f"topic '{topic}' has no partition {p}: it has {counts[topic]}")
            partitions.append((topic, p))
    return partitions


async def reset_offsets(
    admin: GroupAdminClient,
    args: argparse.Namespace,
    group_ids: list[str],
    scopes: list[tuple[str, list[int] | None]],
    spec: ResetSpec,
) -> int:
    described = await admin.describe_groups(sorted(set(group_ids)))
    named = await _scope_partitions(admin, scopes) if scopes else []
    plans: dict[str, dict[TopicPartition, int]] = {}
    failed = False
    for group_id, (_, group) in described.items():
        if group.group_state not in ("Empty", "Dead"):
            _fail(
                f"Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {group.group_state}."
            )
            failed = True
            continue
        committed = await admin.fetch_offsets(group_id)
        partitions = sorted(committed) if args.all_topics else named
        plans[group_id] = plan_reset(spec, partitions, committed, await _log_offsets(admin, spec, partitions))
    if args.execute:
        for group_id, plan in plans.items():
            if not plan:
                continue
            results = await admin.commit_offsets(group_id, plan)
            for (topic, p), code in sorted(results.items()):
                if code != ErrorCode.NONE:
                    _fail(f"Error resetting the offset of {topic}-{p} for group '{group_id}': {code.name}")
                    failed = True
    rows = [[g, t, p, offset] for g, plan in plans.items() for (t, p), offset in plan.items()]
    _print_rows(args, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    return 1 if failed else 0


async def _log_offsets(
    admin: GroupAdminClient, spec: ResetSpec, partitions: list[TopicPartition]
) -> LogOffsets:
    if not partitions:
        return LogOffsets({}, {})
    earliest = await admin.list_offsets(partitions, EARLIEST_TIMESTAMP)
    latest = await admin.list_offsets(partitions, LATEST_TIMESTAMP)
    at_time = await admin.list_offsets(partitions, spec.value) if spec.to is ResetTo.DATETIME else {}
    return LogOffsets(earliest, latest, at_time)


# --- --delete, --delete-offsets ---


async def delete(admin: GroupAdminClient, args: argparse.Namespace, group_ids: list[str]) -> int:
    results = await admin.delete_groups(sorted(set(group_ids)))
    deleted = [g for g, code in results.items() if code == ErrorCode.NONE]
    if args.format == "json":
        print_json([{"group": g, "error": code.name} for g, code in results.items()])
    elif deleted:
        names = "', '".join(deleted)
        print(f"Deletion of requested consumer groups ('{names}') was successful.")
    for group_id, code in results.items():
        if code != ErrorCode.NONE:
            _fail(
                f"Group '{group_id}' could not be deleted: {_GROUP_ERRORS.get(code, code.name)} ({code.name})"
            )
    return 0 if len(deleted) == len(results) else 1


async def delete_offsets(
    admin: GroupAdminClient,
    args: argparse.Namespace,
    group_id: str,
    scopes: list[tuple[str, list[int] | None]],
) -> int:
    partitions = await _scope_partitions(admin, scopes)
    try:
        results = await admin.delete_offsets(group_id, partitions)
    except WireError as e:
        reason = _GROUP_ERRORS.get(e.error_code, e.error_code.name)
        raise CommandError(f"Offsets of group '{group_id}' could not be deleted: {reason}") from e
    rows = [
        [t, p, "Successful" if code == ErrorCode.NONE else f"Error: {code.name}"]
        for (t, p), code in sorted(results.items())
    ]
    if args.format != "json" and all(code == ErrorCode.NONE for code in results.values()):
        topics = ", ".join(t for t, _ in scopes)
        print(f"Request succeed for deleting offsets with topic {topics} group {group_id}")
    _print_rows(args, ["TOPIC", "PARTITION", "STATUS"], rows)
    failed = [f"{t}-{p}" for (t, p), code in results.items() if code != ErrorCode.NONE]
    if failed:
        _fail(f"Offsets of group '{group_id}' could not be deleted for {', '.join(sorted(failed))}")
    return 1 if failed else 0
