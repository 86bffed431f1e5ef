"""`keel acl add|remove|list`, shaped like kafka-acls with its ZooKeeper authorizer: ACLs are
written straight to ZooKeeper (`--zookeeper-connect`, or kafka-acls' `--authorizer-properties
zookeeper.connect=...`), in Kafka's layout, with the change notification that makes every
broker and planner apply them at once.

    keel acl add --allow-principal User:alice --operation Read --operation Write --topic orders
    keel acl add --deny-principal User:mallory --deny-host 10.0.0.9 --operation All --cluster
    keel acl remove --allow-principal User:alice --operation Read --topic orders
    keel acl list [--topic orders] [--principal User:alice]

`--operation` defaults to All and `--allow-host`/`--deny-host` to `*`, as in kafka-acls.
`remove` without a principal removes every ACL of the resources named. A bad principal,
operation or resource is refused before anything is written (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from actors.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_binding,
    check_principal,
    parse_name,
)
from node.command.entry import CommandError, UsageError
from node.command.output import print_json, print_table
from node.zk.acl_store import ZkAclStore
from node.zk.client import ZooKeeperClient, ZooKeeperUnavailable

GROUP = "acl"
_SESSION_TIMEOUT_S = 10.0


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    commands = groups.add_parser(GROUP, help="add, remove and list ACLs (kafka-acls)").add_subparsers(
        dest="command", required=True
    )
    for name, text in (("add", "add ACLs"), ("remove", "remove ACLs"), ("list", "list ACLs")):
        parser = commands.add_parser(name, parents=[common], help=text)
        parser.add_argument("--zookeeper-connect", default=None, help="host:port[,host:port][/chroot]")
        parser.add_argument(
            "--authorizer-properties",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="kafka-acls' spelling: zookeeper.connect=host:port",
        )
        parser.add_argument("--topic", action="append", default=[])
        # Not `group`: that is the command group's name in the parsed arguments.
        parser.add_argument("--group", action="append", default=[], dest="consumer_group")
        parser.add_argument("--transactional-id", action="append", default=[])
        parser.add_argument("--cluster", action="store_true", help="the cluster resource")
        parser.add_argument("--resource-pattern-type", choices=["literal", "prefixed"], default=None)
        if name == "list":
            parser.add_argument("--principal", action="append", default=[], help="only this principal's ACLs")
            continue
        parser.add_argument("--allow-principal", action="append", default=[])
        parser.add_argument("--deny-principal", action="append", default=[])
        parser.add_argument("--allow-host", action="append", default=[])
        parser.add_argument("--deny-host", action="append", default=[])
        parser.add_argument("--operation", action="append", default=[], help="default All")
        parser.add_argument("--force", action="store_true", help="accepted for kafka-acls' habit; never asks")


def zookeeper_connect(args: argparse.Namespace) -> str:
    if args.zookeeper_connect:
        return str(args.zookeeper_connect)
    for item in args.authorizer_properties:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise UsageError(f"--authorizer-properties {item!r} is not key=value")
        if key.strip() == "zookeeper.connect" and value.strip():
            return value.strip()
    raise UsageError("give --zookeeper-connect (or --authorizer-properties zookeeper.connect=host:port)")


def resources(args: argparse.Namespace) -> list[ResourcePattern]:
    """The resource patterns named on the command line (literal unless told otherwise)."""
    pattern_type = PatternType.PREFIXED if args.resource_pattern_type == "prefixed" else PatternType.LITERAL
    named = [
        *((ResourceType.TOPIC, t) for t in args.topic),
        *((ResourceType.GROUP, g) for g in args.consumer_group),
        *((ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id),
        *([(ResourceType.CLUSTER, CLUSTER_NAME)] if args.cluster else []),
    ]
    return [ResourcePattern(kind, name, pattern_type) for kind, name in named]


def entries(args: argparse.Namespace) -> set[AclEntry]:
    """Every (principal, host, operation) of the allow side and of the deny side."""
    operations = [parse_name(AclOperation, o) for o in args.operation] or [AclOperation.ALL]
    found: set[AclEntry] = set()
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                found.update(AclEntry(check_principal(principal), host, op, permission) for op in operations)
    return found


def bindings(args: argparse.Namespace) -> dict[ResourcePattern, set[AclEntry]]:
    """What `add` or `remove` names, each binding checked as Kafka checks it (UsageError)."""
    try:
        patterns = resources(args)
        wanted = entries(args)
        if not patterns:
            raise AclError("name a resource: --topic, --group, --transactional-id or --cluster")
        if args.command == "add" and not wanted:
            raise AclError("give --allow-principal or --deny-principal")
        for pattern in patterns:
            for entry in wanted:
                check_binding(AclBinding(pattern, entry))
    except AclError as e:
        raise UsageError(str(e)) from None
    return {p: wanted for p in patterns}


async def run(args: argparse.Namespace) -> int:
    connect = zookeeper_connect(args)
    named = bindings(args) if args.command != "list" else {}
    zk = ZooKeeperClient(connect, session_timeout_s=_SESSION_TIMEOUT_S, connection_timeout_s=args.timeout)
    try:
        await zk.start()
    except ZooKeeperUnavailable as e:
        raise CommandError(str(e)) from None
    try:
        store = ZkAclStore(zk)
        await store.create_acl_paths()
        if args.command == "list":
            return await list_acls(store, args)
        for pattern, wanted in named.items():
            await change(store, args.command, pattern, wanted, args.format)
        return 0
    finally:
        await zk.close()


async def change(
    store: ZkAclStore, command: str, pattern: ResourcePattern, wanted: set[AclEntry], fmt: str
) -> None:
    def updated(current: frozenset[AclEntry]) -> frozenset[AclEntry]:
        if command == "add":
            return current | wanted
        return current - wanted if wanted else frozenset()

    before, after = await store.update_acls(pattern, updated)
    if fmt == "json":
        print_json({"resource": _pattern_json(pattern), "acls": [_entry_json(e) for e in _sorted(after)]})
        return
    verb = "Adding" if command == "add" else "Removing"
    touched = (after - before) if command == "add" else (before - after)
    print(f"{verb} ACLs for resource `{pattern}`: {len(touched)} changed")
    _print_entries(after)


async def list_acls(store: ZkAclStore, args: argparse.Namespace) -> int:
    stored = await store.all_acls()
    try:
        asked = set(resources(args))
        principals = {check_principal(p) for p in args.principal}
    except AclError as e:
        raise UsageError(str(e)) from None
    shown = {
        pattern: frozenset(e for e in acls if not principals or e.principal in principals)
        for pattern, acls in sorted(stored.items())
        if not asked or pattern in asked
    }
    shown = {p: acls for p, acls in shown.items() if acls}
    if args.format == "json":
        print_json(
            [
                {"resource": _pattern_json(p), "acls": [_entry_json(e) for e in _sorted(a)]}
                for p, a in shown.items()
            ]
        )
        return 0
    rows = [
        (p.resource_type, p.pattern_type.name, p.name, e.principal, e.host, e.operation, e.permission)
        for p, acls in shown.items()
        for e in _sorted(acls)
    ]
    print_table(["RESOURCE TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"], rows)
    return 0


def _sorted(entries: Iterable[AclEntry]) -> list[AclEntry]:
    return sorted(entries, key=lambda e: (e.principal, e.permission.name, e.operation.name, e.host))


def _print_entries(entries: Iterable[AclEntry]) -> None:
    rows = [(e.principal, e.host, e.operation, e.permission) for e in _sorted(entries)]
    print_table(["PRINCIPAL", "HOST", "OPERATION", "PERMISSION"], rows)


def _pattern_json(pattern: ResourcePattern) -> dict[str, str]:
    return {
        "resourceType": pattern.resource_type.kafka_name,
        "patternType": pattern.pattern_type.name,
        "name": pattern.name,
    }


def _entry_json(entry: AclEntry) -> dict[str, str]:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.kafka_name,
        "permissionType": entry.permission.kafka_name,
    }
