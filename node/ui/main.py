"""`keel-ui`: the web console.

    keel-ui --zookeeper-connect host:port[/chroot] [--listen 127.0.0.1:8080]
            [--allowed-host NAME ...] [--command-config client.properties] [--verbose]

It reads the cluster from ZooKeeper and the brokers and serves it at http://LISTEN/ until
stopped (SIGTERM or Ctrl-C). `--command-config` is Kafka's client properties file: how the
console reaches the brokers and the planner (security.protocol, sasl.*, ssl.*) and, through
`java.security.auth.login.config`, its ZooKeeper credentials, as `keel`'s commands read it.
It binds to 127.0.0.1 by default: without SASL on the cluster, whoever reaches the console
can change the cluster through it. It answers only requests whose Host header is its --listen
address, localhost or an --allowed-host name, so that a web page the operator opens elsewhere
cannot reach it through a name that points at its address (DNS rebinding).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from node.cli.arguments import CommandConfigError, read_command_config
from node.cli.zookeeper_access import command_security, zookeeper_session
from node.command.entry import (
    EXIT_STATUS_HELP,
    KeelArgumentParser,
    UsageError,
    add_verbose_option,
    libraries_quiet,
    run_main,
    verbose_requested,
)
from node.security.settings import SettingError, client_security_from_properties
from wire.security import ClientSecurity

DEFAULT_LISTEN = "127.0.0.1:8080"
# The console's ZooKeeper session: long enough to ride out a short disconnection.
SESSION_TIMEOUT_S = 30.0

log = logging.getLogger("keel.ui")


def listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not host:port")
    return host, int(port)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = KeelArgumentParser(prog="keel-ui", description="The Keel web console.", epilog=EXIT_STATUS_HELP)
    parser.add_argument(
        "--zookeeper-connect", "--zookeeper", dest="zookeeper", required=True, metavar="HOST:PORT[/CHROOT]"
    )
    parser.add_argument(
        "--listen",
        type=listen_address,
        default=listen_address(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to serve the console (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another Host name the console answers to (repeatable): the one a browser reaches it "
        "by, if not its --listen address or localhost; any other is refused (DNS rebinding)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="client properties: security.protocol, sasl.*, ssl.*, java.security.auth.login.config",
    )
    add_verbose_option(parser)
    return parser.parse_args(argv)


def client_security(args: argparse.Namespace) -> ClientSecurity:
    try:
        props = {} if args.command_config is None else read_command_config(args.command_config)
        return client_security_from_properties(props)
    except CommandConfigError as e:
        raise UsageError(str(e)) from None
    except SettingError as e:
        raise UsageError(f"--command-config {args.command_config}: {e}") from None


async def run(args: argparse.Namespace, verbose: bool) -> int:
    from node.ui.observer import ConsoleObserver
    from node.ui.server import close, serve

    security = client_security(args)
    zk_security = command_security(args)
    host, port = args.listen
    async with contextlib.AsyncExitStack() as stack:
        # A ZooKeeper that does not answer is one line; once up, library warnings are logged.
        with libraries_quiet(verbose):
            zk = await stack.enter_async_context(
                zookeeper_session(args.zookeeper, SESSION_TIMEOUT_S, zk_security)
            )
        observer = ConsoleObserver(zk, security)
        await observer.start()
        stack.push_async_callback(observer.stop)
        try:
            runner = await serve(observer, host, port, args.allowed_host)
        except OSError as e:
            raise UsageError(f"--listen {host}:{port}: {e.strerror or e}") from None
        stack.push_async_callback(close, runner)
        print(f"keel-ui: serving http://{host}:{port}/ (ZooKeeper {args.zookeeper})", flush=True)
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        await stopped.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return run_main("keel-ui", lambda: asyncio.run(run(parse_args(argv), verbose)), verbose=verbose)


if __name__ == "__main__":
    sys.exit(main())
