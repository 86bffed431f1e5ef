"""`keel-node server.properties [--override key=value ...] [--verbose]`: run one broker.

Exit status: 0 after an orderly shutdown (SIGTERM or SIGINT), 2 for a bad configuration
(nothing started: a bad property, a `log.dirs` path that is a file or cannot be created), 1
when start-up fails (no ZooKeeper session within zookeeper.connection.timeout.ms, the broker id
taken, the listener's port in use). Each failure is one line, `keel-node: ...`, after the log
lines of what had started; `--verbose` adds the traceback. The log lines go to stderr and to
server.log, controller.log and state-change.log in the first of `log.dirs` (node/broker/logs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import resource
import signal
import sys
import time
from pathlib import Path

import uvloop

from actors.base.ports import BrokerIdTakenError
from node.broker.config import BrokerConfig, load_config, prepare_log_dirs
from node.broker.gc_tuning import tune_gc
from node.broker.logs import LogSettings, configure_logging
from node.broker.server import KeelBroker
from node.command.entry import (
    EXIT_STATUS_HELP,
    CommandError,
    KeelArgumentParser,
    UsageError,
    add_verbose_option,
    libraries_quiet,
    run_main,
    verbose_requested,
)
from node.config.properties import ConfigError, read_properties_file
from node.metrics.http import MetricsListenerUnavailable
from node.zk.client import NO_AUTH_HINT, UNREACHABLE_HINT, NoAuth, ZooKeeperUnavailable
from wire.server import ListenerUnavailable

log = logging.getLogger("keel.node")

# The share of shutdown.timeout.ms kept for the orderly stop after a controlled shutdown.
CONTROLLED_SHUTDOWN_RESERVE = 0.25


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = KeelArgumentParser(prog="keel-node", description="Run one Keel broker.", epilog=EXIT_STATUS_HELP)
    parser.add_argument("properties", type=Path, help="server.properties file")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a property"
    )
    add_verbose_option(parser)
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    return load_config(read_properties_file(args.properties, args.override))


async def run(config: BrokerConfig, *, verbose: bool = False) -> int:
    broker = KeelBroker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # aiozk logs each failed connection attempt with a traceback; a start-up that fails is
    # reported below in one line.
    with libraries_quiet(verbose):
        await start(broker)
    await stop.wait()
    log.info("stopping")
    # The whole stop, controlled shutdown included, fits in shutdown.timeout.ms: the
    # controlled shutdown may take three quarters of it, the orderly stop the rest.
    timeout = config.get_int("shutdown.timeout.ms") / 1000
    deadline = time.monotonic() + timeout
    await broker.controlled_shutdown(deadline - timeout * CONTROLLED_SHUTDOWN_RESERVE)
    try:
        await asyncio.wait_for(broker.shutdown(), max(deadline - time.monotonic(), 0.001))
    except TimeoutError:
        log.error("shutdown took longer than %.1f s; exiting anyway", timeout)
        return 1
    return 0


async def start(broker: KeelBroker) -> None:
    """Start the broker; if it cannot start, close what did and say why in one line."""
    try:
        await broker.startup()
    except BrokerIdTakenError as e:
        await _close_quietly(broker)
        raise CommandError(f"{e}; refusing to start") from e
    except ZooKeeperUnavailable as e:
        await _close_quietly(broker)
        raise CommandError(f"{e} {UNREACHABLE_HINT}") from e
    except NoAuth as e:
        await _close_quietly(broker)
        raise CommandError(NO_AUTH_HINT) from e
    except MetricsListenerUnavailable as e:
        await _close_quietly(broker)
        raise CommandError(f"{e}: stop the process that holds it, or choose another port") from e
    except ListenerUnavailable as e:
        await _close_quietly(broker)
        raise CommandError(f"{e}: stop the process that holds it, or set another port in listeners") from e
    except Exception:
        await _close_quietly(broker)
        raise


async def _close_quietly(broker: KeelBroker) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(broker.shutdown(), 5)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(argv)
    return run_main("keel-node", lambda: serve(argv, verbose), verbose=verbose)


def raise_file_limit() -> None:
    """The soft limit on open files raised to the hard one, as Kafka's packaging does: every
    connection and every log segment (two files each) holds a descriptor, and the usual soft
    limit (1,024) is soon reached."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(argv: list[str], verbose: bool) -> int:
    args = parse_args(argv)
    tune_gc()
    raise_file_limit()
    try:
        config = build_config(args)
        prepare_log_dirs(config)
        configure_logging(LogSettings.of(config))
    except ConfigError as e:
        raise UsageError(f"invalid configuration: {e}") from e
    return uvloop.run(run(config, verbose=verbose))


def exit_now(code: int) -> None:
    """Exit without the interpreter's teardown. Everything is closed and flushed by then, and
    freeing the objects of 100k partitions one by one takes about a second that a stopping
    broker (and whoever waits for it) would spend for nothing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
