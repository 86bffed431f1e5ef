"""`keel`: the client CLI over the RPC wire.

    keel cluster describe        cluster id, controller, epoch and brokers
    keel controller show         the active controller
    keel controller reelect      delete /controller so the brokers elect anew
    keel topic create|list|describe|delete|alter
    keel produce --topic T       stdin lines as records (Kafka's console producer)
    keel consume --topic T       records to stdout (Kafka's console consumer)
    keel leader-election --election-type preferred|unclean
                                 elect leaders (Kafka's kafka-leader-election)
    keel consumer-groups --list|--describe|--reset-offsets|--delete|--delete-offsets
                                 consumer groups (Kafka's kafka-consumer-groups)
    keel reassign execute|verify|cancel|list
                                 partition reassignment (Kafka's kafka-reassign-partitions)
    keel reassign plan|snapshot  reassignment plans from the planner (or --from-file)
    keel reassign status [--wait]
                                 the progress of the plan the planner executes
    keel user add|delete|list    SCRAM users in ZooKeeper (kafka-configs --entity-type users)
    keel zookeeper secure [--unsecure]
                                 set Kafka's ACLs on the znodes (zookeeper-security-migration)
    keel acl add|remove|list     ACLs in ZooKeeper (Kafka's kafka-acls), --zookeeper-connect
    keel configs --describe|--alter --entity-type topics|brokers
                                 dynamic topic and broker configs (Kafka's kafka-configs)
    keel dump-log --files F      batches and records of segment files on disk (kafka-dump-log)

Every command takes `--bootstrap-server host:port[,host:port]` (default: the brokers of the
local cluster under .keel-cluster, else 127.0.0.1:9092), `--format table|json`, `--timeout S`,
`--command-config FILE` (admin client properties; default: that local cluster's
`client.properties` when it runs with `keel-cluster up --security`, and no --bootstrap-server
is given) and `--verbose`, before or after the command.

An error is one line, `keel: ...` (a bad argument: `keel topic create: ...`), with exit status
1 when the action failed, 2 for a bad argument, property or file (nothing was sent), 3 when the
action ran and a later step failed; `--verbose` adds the traceback (node/command/entry.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from node.cli import (
    acl_commands,
    config_commands,
    console_commands,
    dump_log_commands,
    election_commands,
    group_commands,
    reassign_commands,
    topic_commands,
    user_commands,
    zookeeper_commands,
)
from node.cli.arguments import CommandConfigError, add_global_options, apply_command_config
from node.clients.admin import KeelAdminClient
from node.command.entry import (
    EXIT_STATUS_HELP,
    CommandError,
    KeelArgumentParser,
    UsageError,
    quiet_libraries,
    run_main,
    verbose_requested,
)
from node.command.output import print_json, print_table
from wire.api import DescribeClusterResponse
from wire.errors import BrokerUnreachable

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def default_bootstrap() -> str:
    if env := os.environ.get("KEEL_BOOTSTRAP_SERVER"):
        return env
    from node.cluster.state import ClusterState

    state = ClusterState.load(Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    if state is not None and state.brokers:
        return ",".join(f"127.0.0.1:{b.port}" for b in state.brokers.values())
    return DEFAULT_BOOTSTRAP


def default_command_config(args: argparse.Namespace) -> Path | None:
    """A local secured cluster's `client.properties`, when the command goes to that cluster's
    brokers by default (no --command-config, no --bootstrap-server): as the brokers are found."""
    if args.command_config is not None or args.bootstrap_server or os.environ.get("KEEL_BOOTSTRAP_SERVER"):
        return None
    if args.group in (user_commands.GROUP, zookeeper_commands.GROUP, acl_commands.GROUP):
        return None  # ZooKeeper's commands: their --command-config names ZooKeeper credentials
    if args.group == dump_log_commands.GROUP:
        return None  # it reads files and talks to nothing
    from node.cluster.security import CLIENT_CONFIG
    from node.cluster.state import ClusterState

    state = ClusterState.load(Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    if state is None or state.security is None:
        return None
    path = state.directory / CLIENT_CONFIG
    return path if path.exists() else None


def _controller_address(cluster: DescribeClusterResponse) -> str | None:
    for broker in cluster.brokers:
        if broker.broker_id == cluster.controller_id:
            return f"{broker.host}:{broker.port}"
    return None


async def cluster_describe(admin: KeelAdminClient, fmt: str) -> int:
    cluster = await admin.describe_cluster()
    if fmt == "json":
        print_json(cluster.to_wire())
        return 0
    print(f"Cluster id:        {cluster.cluster_id}")
    print(f"Controller:        {cluster.controller_id}")
    print(f"Controller epoch:  {cluster.controller_epoch}")
    print()
    print_table(
        ["BROKER", "HOST", "PORT", "RACK", "CONTROLLER"],
        [
            [b.broker_id, b.host, b.port, b.rack, "*" if b.broker_id == cluster.controller_id else ""]
            for b in cluster.brokers
        ],
    )
    return 0


async def controller_show(admin: KeelAdminClient, fmt: str) -> int:
    """The active controller, with its metrics asked of the controller itself."""
    cluster = await admin.describe_cluster()
    address = _controller_address(cluster)
    metrics: dict[str, float] = {}
    if address is not None:
        async with KeelAdminClient(address, timeout=10, security=admin.security) as controller:
            metrics = (await controller.describe_controller()).metrics
    shown = {
        "controller_id": cluster.controller_id,
        "controller_epoch": cluster.controller_epoch,
        "address": address,
        "metrics": metrics,
    }
    if fmt == "json":
        print_json(shown)
    else:
        print_table(
            ["CONTROLLER", "EPOCH", "ADDRESS"], [[cluster.controller_id, cluster.controller_epoch, address]]
        )
        if metrics:
            print()
            print_table(["METRIC", "VALUE"], [[name, _number(value)] for name, value in metrics.items()])
    return 0 if cluster.controller_id != -1 else 1


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


async def controller_reelect(admin: KeelAdminClient, fmt: str) -> int:
    previous = await admin.reelect_controller()
    if fmt == "json":
        print_json({"deleted_controller_id": previous})
    else:
        print(f"Deleted /controller (was broker {previous}); the brokers will elect a new controller.")
    return 0


GROUP_HELP = {
    "cluster": "the cluster's id, brokers and controller",
    "controller": "show the active controller and its metrics, or make the brokers elect anew",
}

# A command that reached no broker at all says where to look, not only what failed.
NO_BROKER_HINT = "is the cluster up? bin/keel-cluster status shows a local cluster's brokers"

COMMANDS: dict[tuple[str, str], Callable[[KeelAdminClient, str], Awaitable[int]]] = {
    ("cluster", "describe"): cluster_describe,
    ("controller", "show"): controller_show,
    ("controller", "reelect"): controller_reelect,
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    common = KeelArgumentParser(add_help=False)
    add_global_options(common, suppress=True)
    parser = KeelArgumentParser(
        prog="keel", description="Talk to a Keel cluster over its RPC wire.", epilog=EXIT_STATUS_HELP
    )
    add_global_options(parser, suppress=False)
    groups = parser.add_subparsers(dest="group", required=True)
    topic_commands.add_arguments(
        groups.add_parser("topic", help="create, list, describe, delete and alter topics").add_subparsers(
            dest="command", required=True
        ),
        common,
    )
    console_commands.add_arguments(groups, common)
    election_commands.add_arguments(groups, common)
    group_commands.add_arguments(groups, common)
    user_commands.add_arguments(groups, common)
    zookeeper_commands.add_arguments(groups, common)
    acl_commands.add_arguments(groups, common)
    config_commands.add_arguments(groups, common)
    dump_log_commands.add_arguments(groups, common)
    reassign_commands.add_arguments(
        groups.add_parser("reassign", help="move partition replicas between brokers").add_subparsers(
            dest="command", required=True
        ),
        common,
    )
    for group in sorted({g for g, _ in COMMANDS}):
        sub = groups.add_parser(group, help=GROUP_HELP[group]).add_subparsers(dest="command", required=True)
        for (g, command), handler in COMMANDS.items():
            if g == group:
                sub.add_parser(command, parents=[common], help=handler.__name__.replace("_", " "))
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    if args.group == dump_log_commands.GROUP:
        return dump_log_commands.run(args)
    if args.group in console_commands.COMMANDS:
        return await console_commands.COMMANDS[args.group](args.bootstrap_server or default_bootstrap(), args)
    if args.group == user_commands.GROUP:
        return await user_commands.run(args)
    if args.group == zookeeper_commands.GROUP:
        return await zookeeper_commands.run(args)
    if args.group == acl_commands.GROUP:
        return await acl_commands.run(args)
    if args.group == group_commands.GROUP:
        return await group_commands.run(args, args.bootstrap_server or default_bootstrap())
    if args.group == "reassign":
        return await reassign_commands.run(args, args.bootstrap_server or default_bootstrap())
    # Checked before anything connects.
    configs_request = config_commands.checked_request(args) if args.group == config_commands.GROUP else None
    bootstrap = args.bootstrap_server or default_bootstrap()
    async with KeelAdminClient(
        bootstrap, timeout=args.timeout, security=args.security, fail_unreachable=True
    ) as admin:
        if args.group == "topic":
            return await topic_commands.COMMANDS[args.command](admin, args)
        if args.group == election_commands.GROUP:
            return await election_commands.run(admin, args)
        if configs_request is not None:
            return await config_commands.run(admin, args, configs_request)
        return await COMMANDS[args.group, args.command](admin, args.format)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(argv)
    quiet_libraries(verbose)
    return run_main("keel", lambda: _command(argv), verbose=verbose)


def _command(argv: list[str]) -> int:
    args = parse_args(argv)
    args.command_config = args.command_config or default_command_config(args)
    try:
        apply_command_config(args)
    except CommandConfigError as e:
        raise UsageError(str(e)) from e
    try:
        return asyncio.run(run(args))
    except ValueError as e:
        raise CommandError(str(e)) from e
    except BrokerUnreachable as e:
        raise CommandError(f"{e.message}; {NO_BROKER_HINT}") from e


if __name__ == "__main__":
    sys.exit(main())
