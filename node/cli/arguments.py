"""What every `keel` command shares: the global options, which a user may give before or
after the command (`keel --bootstrap-server h:9092 topic list` and `keel topic list
--bootstrap-server h:9092` are the same), and the admin-client properties file of
`--command-config`. The argument types are node/command/options.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import javaproperties

from node.command.entry import add_verbose_option
from node.command.options import positive_float
from node.security.settings import CLIENT_KEYS, SettingError, client_security_from_properties

# The keys of Kafka's admin-client properties that mean something to Keel's clients: the
# connection's, its security (security.protocol, sasl.*, ssl.*), and the ZooKeeper credentials
# of the commands that go to ZooKeeper (node/cli/zookeeper_access.py).
COMMAND_CONFIG_KEYS = {
    "bootstrap.servers",
    "request.timeout.ms",
    "default.api.timeout.ms",
    "client.id",
    "java.security.auth.login.config",
    "zookeeper.sasl.clientconfig",
    *CLIENT_KEYS,
}
DEFAULT_TIMEOUT_S = 30.0


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The top-level parser holds the defaults; each command's copy of these options leaves
    the value alone unless it is given there (`suppress`), so either place works."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--bootstrap-server", default=default(None), help="host:port[,host:port...] of any brokers"
    )
    parser.add_argument("--format", choices=["table", "json"], default=default("table"))
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=default(None),
        help=f"seconds per request (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="client properties (bootstrap.servers, request.timeout.ms, client.id, security.protocol, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location, ...)",
    )
    add_verbose_option(parser)


class CommandConfigError(Exception):
    """A `--command-config` file that cannot be used; the message names the file and why."""


def read_command_config(path: Path) -> dict[str, str]:
    try:
        with path.open(encoding="utf-8") as f:
            props: dict[str, str] = javaproperties.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CommandConfigError(f"--command-config {path}: {e}") from None
    timeout = props.get("request.timeout.ms", props.get("default.api.timeout.ms"))
    if timeout is not None and not (timeout.isdigit() and int(timeout) > 0):
        raise CommandConfigError(f"--command-config {path}: request.timeout.ms must be a positive integer")
    return {k: v for k, v in props.items() if k in COMMAND_CONFIG_KEYS}


def apply_command_config(args: argparse.Namespace) -> None:
    """Fill what the command line left unset from the properties file, then the defaults;
    the command line wins. `args.security` is the clients' TLS and SASL settings."""
    props = {} if args.command_config is None else read_command_config(args.command_config)
    try:
        args.security = client_security_from_properties(props)
    except SettingError as e:
        raise CommandConfigError(f"--command-config {args.command_config}: {e}") from None
    if args.bootstrap_server is None:
        args.bootstrap_server = props.get("bootstrap.servers")
    if args.timeout is None:
        timeout_ms = props.get("request.timeout.ms", props.get("default.api.timeout.ms"))
        args.timeout = DEFAULT_TIMEOUT_S if timeout_ms is None else int(timeout_ms) / 1000
