"""`keel user`: SCRAM users in ZooKeeper, as `kafka-configs --zookeeper ... --entity-type users`.

    keel user add NAME --mechanism SCRAM-SHA-256 [--mechanism SCRAM-SHA-512] [--iterations N]
        [--password P | --password-file F]          (else asked for, or read from stdin)
    keel user add NAME --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    keel user delete NAME [--mechanism M ...]       (default: every mechanism)
    keel user delete NAME --delete-config SCRAM-SHA-512
    keel user list                                  names, mechanisms, iterations; no secrets

Each write is `/config/users/<name>` and its change notification (node/zk/scram_users.py), so
running brokers know the user at once. With ZooKeeper credentials (`--command-config` naming
`java.security.auth.login.config`) the user's znode gets the ACLs that keep it from anyone
but Keel's identity. A bad name, mechanism, iteration count or password is exit 2 before
ZooKeeper is asked; deleting a credential the user does not have is exit 1.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from node.cli.config_commands import split_items
from node.cli.zookeeper_access import (
    add_zookeeper_argument,
    command_security,
    zookeeper_connect,
    zookeeper_session,
)
from node.command.entry import CommandError, UsageError
from node.command.options import positive_int
from node.command.output import print_json, print_table
from node.zk.scram_users import (
    DEFAULT_ITERATIONS,
    ScramUserError,
    ScramUsers,
    UserCredentials,
    check_mechanism,
    check_user,
    new_credential,
)
from wire.credentials import SCRAM_MECHANISMS, ScramCredential

GROUP = "user"


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    sub = groups.add_parser(GROUP, help="add, delete and list SCRAM users").add_subparsers(
        dest="command", required=True
    )
    add = sub.add_parser("add", parents=[common], help="set a user's SCRAM credentials")
    add.add_argument("name")
    add.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS, default=None)
    add.add_argument("--iterations", type=positive_int, default=DEFAULT_ITERATIONS)
    password = add.add_mutually_exclusive_group()
    password.add_argument(
        "--password", help="the password (visible in the process list; see --password-file)"
    )
    password.add_argument("--password-file", type=Path, help="a file whose first line is the password")
    add.add_argument(
        "--add-config",
        metavar="CONFIG",
        help="kafka-configs' spelling: 'SCRAM-SHA-256=[iterations=8192,password=secret],...'",
    )
    delete = sub.add_parser("delete", parents=[common], help="remove a user's SCRAM credentials")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS, default=None)
    delete.add_argument(
        "--delete-config", metavar="MECHANISMS", help="kafka-configs' spelling: 'SCRAM-SHA-256,...'"
    )
    sub.add_parser("list", parents=[common], help="users with SCRAM credentials (no secrets)")
    for parser in sub.choices.values():
        add_zookeeper_argument(parser)


async def run(args: argparse.Namespace) -> int:
    """Everything the arguments can get wrong is found before ZooKeeper is asked."""
    try:
        to_add = _credentials_to_add(args) if args.command == "add" else {}
        to_delete = _mechanisms_to_delete(args) if args.command == "delete" else []
    except ScramUserError as e:
        raise UsageError(str(e)) from None
    connect = zookeeper_connect(args)
    security = command_security(args)
    from node.zk.config_store import ZkConfigStore

    async with zookeeper_session(connect, args.timeout, security) as zk:
        users = ScramUsers(ZkConfigStore(zk))
        try:
            if args.command == "add":
                await users.upsert(args.name, to_add)
                return _added(args, to_add)
            if args.command == "delete":
                return _deleted(args, to_delete, await users.delete(args.name, to_delete))
            return _listed(args, await users.describe())
        except ScramUserError as e:
            raise CommandError(str(e)) from None


def _credentials_to_add(args: argparse.Namespace) -> dict[str, ScramCredential]:
    check_user(args.name)
    if args.add_config is not None:
        if args.mechanism or args.password is not None or args.password_file is not None:
            raise ScramUserError("--add-config takes the mechanisms and password itself")
        return {m: new_credential(m, p, i) for m, (p, i) in parse_add_config(args.add_config).items()}
    if not args.mechanism:
        raise ScramUserError("name a --mechanism (SCRAM-SHA-256 or SCRAM-SHA-512), or give --add-config")
    password = _password(args)
    return {m: new_credential(m, password, args.iterations) for m in dict.fromkeys(args.mechanism)}


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if args.password_file is not None:
        try:
            text = args.password_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ScramUserError(f"cannot read --password-file {args.password_file}: {e}") from None
        return text.splitlines()[0] if text else ""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"Password for {args.name}: ")
    if getpass.getpass("Again: ") != first:
        raise ScramUserError("the passwords do not match")
    return first


def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """kafka-configs' `SCRAM-SHA-256=[iterations=8192,password=secret]` items → (password,
    iterations) per mechanism; `SCRAM-SHA-256=[password=secret]` takes the default count."""
    found: dict[str, tuple[str, int]] = {}
    for item in filter(None, split_items(text.strip())):
        mechanism, sep, value = item.partition("=")
        mechanism = mechanism.strip()
        check_mechanism(mechanism)
        if not sep or not (value.startswith("[") and value.endswith("]")):
            raise ScramUserError(
                f"{item!r} is not {mechanism}=[password=...] (or [iterations=N,password=...])"
            )
        fields = dict(part.partition("=")[::2] for part in value[1:-1].split(","))
        unknown = sorted(set(fields) - {"password", "iterations"})
        if unknown or "password" not in fields:
            raise ScramUserError(f"{mechanism} takes password= and optionally iterations=, not {item!r}")
        iterations = fields.get("iterations", str(DEFAULT_ITERATIONS))
        if not iterations.isdigit():
            raise ScramUserError(f"{mechanism}: iterations {iterations!r} is not a whole number")
        found[mechanism] = (fields["password"], int(iterations))
    if not found:
        raise ScramUserError("--add-config names no SCRAM credential")
    return found


def _mechanisms_to_delete(args: argparse.Namespace) -> list[str]:
    check_user(args.name)
    named = list(args.mechanism or [])
    if args.delete_config is not None:
        named += [m.strip() for m in args.delete_config.split(",") if m.strip()]
    for mechanism in named:
        check_mechanism(mechanism)
    return list(dict.fromkeys(named)) or list(SCRAM_MECHANISMS)


def _added(args: argparse.Namespace, credentials: dict[str, ScramCredential]) -> int:
    shown = {m: c.iterations for m, c in credentials.items()}
    if args.format == "json":
        print_json({"user": args.name, "mechanisms": shown})
    else:
        what = ", ".join(f"{m} ({i} iterations)" for m, i in shown.items())
        print(f"Set {what} for user {args.name}.")
    return 0


def _deleted(args: argparse.Namespace, asked: list[str], removed: list[str]) -> int:
    if not removed:
        raise CommandError(f"user {args.name} has no {' or '.join(asked)} credential")
    if args.format == "json":
        print_json({"user": args.name, "removed": removed})
    else:
        print(f"Removed {', '.join(removed)} of user {args.name}.")
    return 0


def _listed(args: argparse.Namespace, users: list[UserCredentials]) -> int:
    rows = [[u.user, m, i] for u in users for m, i in sorted(u.iterations.items())]
    if args.format == "json":
        print_json([{"user": u.user, "mechanisms": u.iterations} for u in users])
    else:
        print_table(["USER", "MECHANISM", "ITERATIONS"], rows)
    return 0
