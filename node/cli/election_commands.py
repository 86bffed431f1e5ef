"""`keel leader-election`, shaped like kafka-leader-election: a preferred or unclean leader
election of one partition, of the partitions a JSON file lists, or of every partition, sent
to the active controller (ElectLeaders). Prints what was elected, what needed no election,
and each failure; exits non-zero if any partition failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from node.cli.partition_file import EXIT_BAD_FILE, PartitionFileError, parse_partition_list, read_text
from node.clients.admin import KeelAdminClient
from node.command.output import print_json
from wire.api import ElectionType
from wire.errors import ErrorCode

GROUP = "leader-election"


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    election = groups.add_parser(
        GROUP, parents=[common], help="elect the preferred replica (or any live one) as leader"
    )
    election.add_argument("--election-type", required=True, choices=["preferred", "unclean"])
    election.add_argument("--topic", default=None, help="with --partition: the one partition to elect")
    election.add_argument("--partition", type=int, default=None)
    election.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    election.add_argument(
        "--path-to-json-file",
        default=None,
        help='partitions to elect: {"partitions": [{"topic": "t", "partition": 0}, ...]}',
    )


def partitions_asked(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions named, or None for every partition; ValueError unless exactly one way
    of naming them is used."""
    ways = sum(
        (
            args.topic is not None or args.partition is not None,
            args.all_topic_partitions,
            bool(args.path_to_json_file),
        )
    )
    if ways != 1:
        raise ValueError(
            "give one of --topic with --partition, --all-topic-partitions or --path-to-json-file"
        )
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file:
        return read_partitions_file(Path(args.path_to_json_file))
    if args.topic is None or args.partition is None:
        raise ValueError("--topic and --partition go together")
    if args.partition < 0:
        raise ValueError(f"--partition {args.partition} is negative")
    return [(args.topic, args.partition)]


def read_partitions_file(path: Path) -> list[tuple[str, int]]:
    """The partitions the JSON file lists, read strictly; raises PartitionFileError."""
    return parse_partition_list(read_text(path))


async def run(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    try:
        asked = partitions_asked(args)
    except PartitionFileError as e:
        print(f"keel: {args.path_to_json_file}: {e}", file=sys.stderr)
        return EXIT_BAD_FILE
    election_type = ElectionType[args.election_type.upper()]
    response = await admin.elect_leaders(election_type, asked, timeout_ms=int(args.timeout * 1000))
    results = sorted(
        (topic.topic, r.partition_id, r.error_code, r.error_message)
        for topic in response.replica_election_results
        for r in topic.partition_result
    )
    failed = [r for r in results if r[2] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
    if args.format == "json":
        print_json(
            {
                "election_type": election_type.name,
                "results": [
                    {
                        "topic": t,
                        "partition": p,
                        "error_code": code,
                        "error": _name(code),
                        "error_message": message,
                    }
                    for t, p, code, message in results
                ],
            }
        )
    else:
        print_results(election_type, results)
    if failed:
        raise ValueError(f"{len(failed)} replica(s) could not be elected")
    return 0


def print_results(election_type: ElectionType, results: list[tuple[str, int, int, str | None]]) -> None:
    succeeded = [f"{t}-{p}" for t, p, code, _ in results if code == ErrorCode.NONE]
    not_needed = [f"{t}-{p}" for t, p, code, _ in results if code == ErrorCode.ELECTION_NOT_NEEDED]
    if succeeded:
        kind = election_type.name
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(succeeded)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for t, p, code, message in results:
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            print(
                f"Error completing leader election ({election_type.name}) for partition: {t}-{p}: "
                f"{_name(code)}: {message or _name(code)}"
            )
    if not results:
        print(f"No partition needed a leader election ({election_type.name})")


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
