"""`keel zookeeper secure [--unsecure]`: set Kafka's ACLs on an existing cluster's znodes, as
Kafka's `zookeeper-security-migration --zookeeper.acl secure|unsecure` does
(node/zk/security_migration.py).

It needs ZooKeeper credentials (`--command-config` naming `java.security.auth.login.config`),
the same identity as the brokers': the ACLs it sets name whoever runs it. Then restart the
brokers with `zookeeper.set.acl=true` so that what they create from then on has them too.
"""

from __future__ import annotations

import argparse

from node.cli.zookeeper_access import (
    add_zookeeper_argument,
    command_security,
    zookeeper_connect,
    zookeeper_session,
)
from node.command.entry import UsageError
from node.command.output import print_json
from node.zk.security_migration import migrate

GROUP = "zookeeper"


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    sub = groups.add_parser(GROUP, help="ZooKeeper ACLs of the cluster's znodes").add_subparsers(
        dest="command", required=True
    )
    secure = sub.add_parser(
        "secure", parents=[common], help="set Kafka's ACLs on every znode (zookeeper-security-migration)"
    )
    secure.add_argument(
        "--unsecure", action="store_true", help="open every znode again (--zookeeper.acl unsecure)"
    )
    add_zookeeper_argument(secure)


async def run(args: argparse.Namespace) -> int:
    connect = zookeeper_connect(args)
    security = command_security(args)
    if security.credentials is None:
        # As Kafka's tool: the ACLs would name no identity, and nobody could write again.
        raise UsageError(
            "no ZooKeeper credentials: pass --command-config FILE with "
            "java.security.auth.login.config=<JAAS file with a Client section>"
        )
    async with zookeeper_session(connect, args.timeout, security) as zk:
        count = await migrate(zk, secure=not args.unsecure)
    state = "open" if args.unsecure else "secure"
    if args.format == "json":
        print_json({"znodes": count, "acls": state})
    else:
        print(f"Set {state} ACLs on {count} znodes under {connect}.")
    return 0
