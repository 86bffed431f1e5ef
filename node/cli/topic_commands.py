"""`keel topic create|list|describe|delete|alter`, shaped like kafka-topics."""

from __future__ import annotations

import argparse
import sys

from node.clients.admin import KeelAdminClient
from node.command.options import positive_int
from node.command.output import print_json, print_table
from wire.api import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatePartitionsTopic,
    MetadataPartition,
    MetadataResponse,
)
from wire.errors import ErrorCode


def add_arguments(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    create = sub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    # -1: the broker's num.partitions and default.replication.factor, as Kafka's tool leaves them.
    create.add_argument("--partitions", type=positive_int, default=-1)
    create.add_argument("--replication-factor", type=positive_int, default=-1)
    create.add_argument(
        "--replica-assignment",
        default=None,
        help="brokers per partition, e.g. 1:2:3,2:3:1 (partition 0, 1, ...)",
    )
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    sub.add_parser("list", parents=[common], help="list topics")
    delete = sub.add_parser("delete", parents=[common], help="delete a topic")
    delete.add_argument("--topic", required=True)
    alter = sub.add_parser("alter", parents=[common], help="add partitions to a topic")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=positive_int, required=True, help="the new number of partitions")
    describe = sub.add_parser("describe", parents=[common], help="leader, replicas and ISR per partition")
    describe.add_argument("--topic", default=None)
    describe.add_argument(
        "--under-replicated-partitions", action="store_true", help="only partitions with ISR < replicas"
    )
    describe.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions without a live leader"
    )


def parse_assignment(text: str) -> list[CreatableReplicaAssignment]:
    try:
        return [
            CreatableReplicaAssignment(partition=p, broker_ids=[int(b) for b in part.split(":")])
            for p, part in enumerate(text.split(","))
        ]
    except ValueError:
        raise ValueError(f"--replica-assignment {text!r} is not like 1:2:3,2:3:1") from None


def parse_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config {item!r} is not KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


async def create(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    topic = CreatableTopic(
        name=args.topic,
        num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        assignments=parse_assignment(args.replica_assignment) if args.replica_assignment else [],
        configs=parse_configs(args.config),
    )
    (result,) = (await admin.create_topics([topic])).topics
    if args.format == "json":
        print_json(result.to_wire())
    elif result.error_code == ErrorCode.NONE:
        print(f"Created topic {result.name}.")
    else:
        reason = f"{ErrorCode(result.error_code).name}: {result.error_message}"
        print(f"Error creating topic {result.name}: {reason}", file=sys.stderr)
    return 0 if result.error_code == ErrorCode.NONE else 1


async def list_topics(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    names = [t.name for t in (await admin.metadata(None)).topics]
    if args.format == "json":
        print_json(names)
    else:
        for name in names:
            print(name)
    return 0


def _selected(partition: MetadataPartition, metadata: MetadataResponse, args: argparse.Namespace) -> bool:
    live = {b.broker_id for b in metadata.brokers}
    if args.under_replicated_partitions and len(partition.isr) >= len(partition.replicas):
        return False
    return not (args.unavailable_partitions and partition.leader in live)


async def describe(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    metadata = await admin.metadata([args.topic] if args.topic else None)
    rows = []
    missing = []
    for topic in metadata.topics:
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            missing.append(topic.name)
            continue
        for p in topic.partitions:
            if _selected(p, metadata, args):
                rows.append(
                    {
                        "topic": topic.name,
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": p.replicas,
                        "isr": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                )
    if args.format == "json":
        print_json(rows)
    else:
        print_table(
            ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            [
                [
                    r["topic"],
                    r["partition"],
                    r["leader"],
                    r["leader_epoch"],
                    ",".join(map(str, r["replicas"])),  # type: ignore[call-overload]
                    ",".join(map(str, r["isr"])),  # type: ignore[call-overload]
                    ",".join(map(str, r["offline_replicas"])),  # type: ignore[call-overload]
                ]
                for r in rows
            ],
        )
    for name in missing:
        print(f"Topic {name} does not exist.", file=sys.stderr)
    return 1 if missing else 0


async def delete(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    (result,) = (await admin.delete_topics([args.topic], timeout_ms=int(args.timeout * 1000))).responses
    if args.format == "json":
        print_json(result.to_wire())
    elif result.error_code == ErrorCode.NONE:
        print(f"Deleted topic {result.name}.")
    elif result.error_code == ErrorCode.REQUEST_TIMED_OUT:
        print(f"Topic {result.name} is marked for deletion; the deletion has not finished yet.")
    else:
        reason = f"{ErrorCode(result.error_code).name}: {result.error_message}"
        print(f"Error deleting topic {result.name}: {reason}", file=sys.stderr)
    return 0 if result.error_code in (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT) else 1


async def alter(admin: KeelAdminClient, args: argparse.Namespace) -> int:
    topic = CreatePartitionsTopic(name=args.topic, count=args.partitions)
    (result,) = (await admin.create_partitions([topic], timeout_ms=int(args.timeout * 1000))).results
    if args.format == "json":
        print_json(result.to_wire())
    elif result.error_code == ErrorCode.NONE:
        print(f"Topic {result.name} now has {args.partitions} partitions.")
    else:
        reason = f"{ErrorCode(result.error_code).name}: {result.error_message}"
        print(f"Error altering topic {result.name}: {reason}", file=sys.stderr)
    return 0 if result.error_code == ErrorCode.NONE else 1


COMMANDS = {"create": create, "list": list_topics, "describe": describe, "delete": delete, "alter": alter}
