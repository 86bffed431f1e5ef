"""`keel-planner planner.properties [--override key=value ...] [--verbose]`: run the planner sidecar.

Exit status: 0 after an orderly shutdown (SIGTERM or SIGINT), 2 for a bad configuration
(nothing started, not even Spark), 1 when start-up fails (ZooKeeper unreachable, Spark does
not start, the listener's port is taken). Each failure is one line, `keel-planner: ...`, after
the log lines of what had started; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

import uvloop

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
from node.planner.config import PlannerConfig, load_config
from node.planner.server import KeelPlanner
from node.zk.client import NO_AUTH_HINT, UNREACHABLE_HINT, NoAuth, ZooKeeperUnavailable
from wire.server import ListenerUnavailable

log = logging.getLogger("keel.planner")
# The chaos run reads plans and moves from these lines (node/chaos/logs.py).
LOG_FORMAT = "%(asctime)s %(levelname)s [planner] %(name)s: %(message)s"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = KeelArgumentParser(
        prog="keel-planner", description="Run the Keel reassignment planner.", epilog=EXIT_STATUS_HELP
    )
    parser.add_argument("properties", type=Path, help="planner.properties file")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a property"
    )
    add_verbose_option(parser)
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> PlannerConfig:
    return load_config(read_properties_file(args.properties, args.override))


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
    )
    logging.getLogger("aiozk").setLevel(logging.WARNING)
    logging.getLogger("py4j").setLevel(logging.WARNING)


async def run(planner: KeelPlanner, *, verbose: bool = False) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with libraries_quiet(verbose):
        await start(planner)
    await stop.wait()
    log.info("stopping on a signal")
    try:
        await asyncio.wait_for(planner.shutdown(), 15)
    except TimeoutError:
        log.error("shutdown took longer than 15 s; exiting anyway")
        return 1
    return 0


async def start(planner: KeelPlanner) -> None:
    """Start the planner; if it cannot start, close what did and say why in one line."""
    try:
        await planner.startup()
    except ZooKeeperUnavailable as e:
        await planner.shutdown()
        raise CommandError(f"{e} {UNREACHABLE_HINT}") from e
    except NoAuth as e:
        await planner.shutdown()
        raise CommandError(NO_AUTH_HINT) from e
    except MetricsListenerUnavailable as e:
        await planner.shutdown()
        raise CommandError(f"{e}: stop the process that holds it, or choose another port") from e
    except ListenerUnavailable as e:
        await planner.shutdown()
        raise CommandError(f"{e}: stop the process that holds it, or set another port in listeners") from e
    except Exception:
        await planner.shutdown()
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(argv)
    return run_main("keel-planner", lambda: serve(argv, verbose), verbose=verbose)


def serve(argv: list[str], verbose: bool) -> int:
    args = parse_args(argv)
    try:
        config = build_config(args)
    except ConfigError as e:
        raise UsageError(f"invalid configuration: {e}") from e
    configure_logging()
    # A signal while the JVM starts ends the process the default way; after it, the loop's
    # handlers take over.
    from node.planner.session import spark_session

    log.info("starting Spark (master %s)", config.spark_master)
    with libraries_quiet(verbose):
        try:
            spark = spark_session(config.spark_master, config.spark_conf)
        except Exception as e:
            raise CommandError(f"Spark did not start on {config.spark_master} (spark.master): {e}") from e
    log.info(
        "Spark is up (version %s, %d cores by default)", spark.version, spark.sparkContext.defaultParallelism
    )
    planner = KeelPlanner(config, spark)
    try:
        return uvloop.run(run(planner, verbose=verbose))
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
