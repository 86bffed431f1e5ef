"""`keel-cluster`: a local multi-broker cluster on an embedded ZooKeeper.

    keel-cluster up [--brokers N] [--zookeeper-servers 1|3] [--dir DIR]
                    [--spark-master URL] [--no-planner] [--no-console] [--security tls|sasl]
    keel-cluster status | stop | kill ID [--signal KILL|TERM|STOP|CONT] | restart ID
    keel-cluster logs ID [--controller | --state-change] [--follow]
    keel-cluster chaos [--duration 60] [--seed N] [--brokers 5] [--zookeeper-servers 3]
                       [--faults kill,term,...] [--report report.json] [--dir DIR] [--keep]

Everything lives in DIR (default `.keel-cluster`): `cluster.json` (ports and pids), the
ZooKeeper data, each broker's `server.properties` and data (`broker-N/data`, where it writes its
server.log, controller.log and state-change.log; `logs` prints them), its stdout and stderr
under `logs/`. `up` also starts
one planner (`bin/keel-planner`, its Spark on `--spark-master`, default local[*]) beside the
brokers unless `--no-planner`, and the web console (`bin/keel-ui`, its URL in `status`) unless
`--no-console`; `status` shows them and `stop` stops them first. Commands are
idempotent: `up` on a running cluster only shows it, and starts whatever has died. Everything
binds to 127.0.0.1 only: without `--security` anyone who can reach a port can do anything.

`--security tls|sasl` (on the first `up`; the cluster keeps it) makes the cluster's own CA and
certificates, secures every listener (node/cluster/security.py) and writes
`DIR/client.properties`, which `keel` then uses by default against this cluster
(`bin/keel --command-config DIR/client.properties ...` says so explicitly); `status` and the
checks that the cluster settled use it too.

An error is one line, `keel-cluster: ...`: exit status 2 for a bad argument, 1 when the
action failed (no cluster in DIR, no such broker, Java or ZooKeeper did not start, the brokers
did not agree on a controller in time); `--verbose` adds the traceback.

`chaos` starts a cluster of its own (in a temporary directory unless `--dir`, kept when the
run fails or with `--keep`), runs a workload and a seeded nemesis against it for `--duration`
seconds, heals it and checks the history (node/chaos); exit status 1 when a check is violated,
2 for a bad argument (fewer than 3 brokers among them). The same seed gives the same schedule
of faults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import orjson

from node.broker.logs import CONTROLLER_LOG, SERVER_LOG, STATE_CHANGE_LOG, follow_log, log_files, read_log
from node.cluster.local import (
    BrokerProcess,
    alive,
    send_signal,
    wait_gone,
)
from node.cluster.security import (
    SECURITY_MODES,
    create_scram_users,
    make_cluster_security,
)
from node.cluster.state import (
    BrokerRecord,
    ClusterState,
    ConsoleRecord,
    PlannerRecord,
    kafka_bootstrap,
    metrics_urls,
    spark_ui_url,
)
from node.cluster.zookeeper import JavaMissing, ZooKeeperStartError, free_ports
from node.command.entry import (
    EXIT_STATUS_HELP,
    CommandError,
    KeelArgumentParser,
    UsageError,
    add_verbose_option,
    quiet_libraries,
    run_main,
    verbose_requested,
)
from node.command.options import positive_float, positive_int
from node.command.output import print_json, print_table
from wire.security import ClientSecurity

T = TypeVar("T")


def _start_zookeeper(state: ClusterState) -> None:
    if state.zookeeper_pids and all(alive(p) for p in state.zookeeper_pids):
        return
    for pid in state.zookeeper_pids:
        send_signal(pid, signal.SIGKILL)
    zookeeper = state.zookeeper
    zookeeper.start(detach=True)
    state.zookeeper_ports = zookeeper.ports
    state.zookeeper_pids = [p.pid for p in zookeeper.processes]
    state.save()


def wait_settled(state: ClusterState, timeout: float) -> bool:
    """Until every running broker answers, all name the same controller, and each one's metadata
    lists every running broker (topics can be created at once)."""
    try:
        asyncio.run(state.cluster().wait_for_full_metadata(timeout))
    except TimeoutError:
        return False
    return True


def show_status(state: ClusterState, fmt: str) -> None:
    cluster = state.cluster()
    views = asyncio.run(cluster.views())
    rows = []
    for broker in sorted(cluster.all, key=lambda b: b.broker_id):
        view = views.get(broker.broker_id)
        rows.append(
            {
                "broker_id": broker.broker_id,
                "pid": broker.pid if broker.running else None,
                "address": f"127.0.0.1:{broker.port}",
                "state": broker.state,
                "controller": view is not None and view.controller_id == broker.broker_id,
                "controller_id": view.controller_id if view else None,
                "controller_epoch": view.controller_epoch if view else None,
            }
        )
    zookeeper = {
        "connect": ",".join(f"127.0.0.1:{p}" for p in state.zookeeper_ports[::3]),
        "running": bool(state.zookeeper_pids) and all(alive(p) for p in state.zookeeper_pids),
    }
    planner = _planner_status(state, cluster.security)
    security = state.cluster_security
    connect = {
        "security": state.security,
        "client_config": None if security is None else str(security.client_config),
        "command": state.how_to_connect(),
    }
    console = state.console_process()
    console_row = (
        None if console is None else {"url": console.url, "pid": console.pid, "state": console.state}
    )
    if fmt == "json":
        print_json(
            {
                "zookeeper": zookeeper,
                "brokers": rows,
                "planner": planner,
                "console": console_row,
                "connect": connect,
                "metrics": metrics_urls(state),
                "spark_ui": spark_ui_url(state),
                "kafka_bootstrap": kafka_bootstrap(state),
            }
        )
        return
    zk_state = "running" if zookeeper["running"] else "stopped"
    print(f"ZooKeeper: {zookeeper['connect']} ({state.zookeeper_servers} server(s), {zk_state})")
    print_table(
        ["BROKER", "PID", "ADDRESS", "STATE", "CONTROLLER", "CONTROLLER EPOCH"],
        [
            [
                r["broker_id"],
                r["pid"],
                r["address"],
                r["state"],
                "*" if r["controller"] else "",
                r["controller_epoch"],
            ]
            for r in rows
        ],
    )
    if planner is not None:
        print(
            f"Planner: {planner['address']} (pid {planner['pid']}, {planner['state']}, "
            f"Spark {planner['spark_master']})"
        )
        if (ui := spark_ui_url(state)) is not None:
            print(f"Spark UI: {ui}")
    if console_row is not None:
        print(f"Console: {console_row['url']} (pid {console_row['pid']}, {console_row['state']})")
    print(f"Connect: {connect['command']}")
    if (bootstrap := kafka_bootstrap(state)) is not None:
        print(f"Kafka bootstrap: {bootstrap}")
    for name, url in metrics_urls(state).items():
        print(f"Metrics: {name} {url}")


def _planner_status(state: ClusterState, security: ClientSecurity) -> dict[str, object] | None:
    """The planner's row: `active` once it holds /keel/planner, `starting` while Spark
    starts, `standby` while another planner holds the znode, `stopped`."""
    planner = state.planner_process()
    if planner is None or state.planner is None:
        return None
    shown = "stopped"
    if planner.running:
        shown = asyncio.run(_planner_state(planner.address, security))
    return {
        "pid": planner.pid if planner.running else None,
        "address": planner.address,
        "state": shown,
        "spark_master": state.planner.spark_master,
    }


async def _planner_state(address: str, security: ClientSecurity) -> str:
    from node.clients.planner import PlannerClient, PlannerNotRunning
    from wire.errors import WireError

    try:
        async with PlannerClient.at(address, timeout=2.0, security=security) as client:
            return "active" if (await client.status()).active else "standby"
    except (PlannerNotRunning, WireError):
        return "starting"


def cmd_up(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    directory.mkdir(parents=True, exist_ok=True)
    state = ClusterState.load(directory)
    if state is None:
        state = ClusterState(directory, args.zookeeper_servers, [], [], {}, security=args.security)
        if args.security is not None:
            make_cluster_security(directory, args.security)
    elif args.security is not None and args.security != state.security:
        raise CommandError(
            f"the cluster in {directory} runs with --security {state.security or 'none'}; "
            "stop it and remove the directory to change that"
        )
    for broker_id in range(1, args.brokers + 1):
        if broker_id not in state.brokers:
            port, metrics_port = free_ports(2)
            state.brokers[broker_id] = BrokerRecord(broker_id, port, metrics_port=metrics_port)
        record = state.brokers[broker_id]
        if record.kafka_port is None:
            # Kafka's clients reach every broker on a Kafka listener of its own.
            record.kafka_port = free_ports(1)[0]
    state.save()
    _start_zookeeper(state)
    security = state.cluster_security
    if security is not None and security.users:
        # Before any broker starts, so that the brokers' own identity is known to each other.
        asyncio.run(create_scram_users(state.zookeeper_connect, security.users))
    for broker_id in state.brokers:
        state.start_broker(broker_id)
    if args.no_planner:
        if state.planner is not None and not alive(state.planner.pid):
            state.planner = None
            state.save()
    else:
        if state.planner is None or (args.spark_master and args.spark_master != state.planner.spark_master):
            if state.planner is not None and (planner := state.planner_process()) is not None:
                planner.stop(args.timeout)
            port, metrics_port, ui_port = free_ports(3)
            state.planner = PlannerRecord(
                port, args.spark_master or "local[*]", metrics_port=metrics_port, spark_ui_port=ui_port
            )
            state.save()
        state.start_planner()
    _start_console(state, args.no_console)
    if not wait_settled(state, args.timeout):
        print(
            f"keel-cluster: the brokers did not agree on a controller within {args.timeout:g} s",
            file=sys.stderr,
        )
        show_status(state, args.format)
        return 1
    show_status(state, args.format)
    return 0


def _start_console(state: ClusterState, off: bool) -> None:
    """The web console on a port of its own, unless `--no-console`."""
    if off:
        if state.console is not None and not alive(state.console.pid):
            state.console = None
            state.save()
        return
    if state.console is None:
        state.console = ConsoleRecord(free_ports(1)[0])
        state.save()
    state.start_console()


def cmd_status(args: argparse.Namespace, state: ClusterState) -> int:
    show_status(state, args.format)
    return 0


def cmd_stop(args: argparse.Namespace, state: ClusterState) -> int:
    """The planner stops first. Then brokers stop one at a time with SIGTERM, the controller
    last, so that each one's controlled shutdown can move its leaders to brokers that stay (and
    the controller moves once); one that lingers past --timeout is killed. Then ZooKeeper stops."""
    planner = state.planner_process()
    if planner is not None and state.planner is not None:
        planner.stop(args.timeout)
        state.planner.pid = None
    console = state.console_process()
    if console is not None and state.console is not None:
        console.stop(args.timeout)
        state.console.pid = None
    cluster = state.cluster()
    views = asyncio.run(cluster.views())
    controllers = {v.controller_id for v in views.values() if v is not None}
    for broker in sorted(cluster.all, key=lambda b: (b.broker_id in controllers, b.broker_id)):
        broker.stop(args.timeout)
        state.brokers[broker.broker_id].pid = None
        state.save()
    for pid in state.zookeeper_pids:
        send_signal(pid, signal.SIGTERM)
    for pid in state.zookeeper_pids:
        if not wait_gone(pid, 10):
            send_signal(pid, signal.SIGKILL)
    state.zookeeper_pids = []
    state.save()
    print("stopped")
    return 0


def _broker(state: ClusterState, broker_id: int) -> BrokerProcess:
    if broker_id not in state.brokers:
        raise CommandError(f"no broker {broker_id} (brokers: {sorted(state.brokers)})")
    return state.process(broker_id)


def cmd_kill(args: argparse.Namespace, state: ClusterState) -> int:
    broker = _broker(state, args.id)
    if not broker.running:
        print(f"broker {args.id} is not running")
        return 0
    broker.signal(getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to broker {args.id} (pid {broker.pid})")
    return 0


def cmd_restart(args: argparse.Namespace, state: ClusterState) -> int:
    _broker(state, args.id).stop(args.timeout)
    state.brokers[args.id].pid = None
    _start_zookeeper(state)
    state.start_broker(args.id)
    wait_settled(state, args.timeout)
    show_status(state, args.format)
    return 0


def cmd_logs(args: argparse.Namespace, state: ClusterState) -> int:
    directory = _broker(state, args.id).log_dir
    if not log_files(directory, args.log):
        raise CommandError(f"broker {args.id} has no {args.log} yet in {directory}")
    if args.follow:
        follow_log(directory, args.log, sys.stdout)  # until Ctrl-C
    else:
        sys.stdout.write(read_log(directory, args.log))
    return 0


def cmd_chaos(args: argparse.Namespace) -> int:
    import secrets
    import shutil
    import tempfile

    from node.chaos.run import ChaosOptions, run_chaos

    options = ChaosOptions(
        seed=args.seed if args.seed is not None else secrets.randbelow(1 << 31),
        duration_s=args.duration,
        brokers=args.brokers,
        zookeeper_servers=args.zookeeper_servers,
        faults=args.faults,
        session_timeout_ms=args.session_timeout_ms,
    )
    if options.brokers < 3:
        raise UsageError("a chaos run needs at least 3 brokers (its topics have replication factor 3)")

    def say(line: str) -> None:
        print(line, flush=True)

    directory = args.dir or Path(tempfile.mkdtemp(prefix="keel-chaos-"))
    directory.mkdir(parents=True, exist_ok=True)
    report = None
    try:
        report = asyncio.run(_interruptible(run_chaos(options, directory, say)))
    finally:
        # A run that failed keeps its files: the brokers' logs are how its cause is read.
        if args.dir is None and not args.keep and report is not None and report.ok:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            say(f"the cluster's files are in {directory}")
    print(report.summary())
    if args.report is not None:
        args.report.write_bytes(orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2))
    return 0 if report.ok else 1


async def _interruptible(work: Coroutine[Any, Any, T]) -> T:
    """`work`, cancelled by SIGTERM or SIGINT so that its clean-up (the cluster it started)
    runs before the command ends."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        # The cluster is stopped: the usual status of an interrupted command (130).
        raise KeyboardInterrupt from None


def fault_kinds(text: str) -> tuple[str, ...]:
    from node.chaos.schedule import parse_faults

    try:
        return parse_faults(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_args(argv: list[str]) -> argparse.Namespace:
    common = KeelArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    common.add_argument("--format", choices=["table", "json"], default="table")
    common.add_argument(
        "--timeout", type=positive_float, default=60.0, help="seconds to wait for the cluster"
    )
    add_verbose_option(common)
    parser = KeelArgumentParser(
        prog="keel-cluster", description="A local Keel cluster.", epilog=EXIT_STATUS_HELP
    )
    add_verbose_option(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", parents=[common], help="start (or resume) the cluster and show it")
    up.add_argument("--brokers", type=positive_int, default=3)
    up.add_argument("--zookeeper-servers", type=int, choices=[1, 3], default=1)
    up.add_argument("--spark-master", default=None, help="the planner's Spark master (default local[*])")
    up.add_argument("--no-planner", action="store_true", help="start no planner")
    up.add_argument("--no-console", action="store_true", help="start no web console (bin/keel-ui)")
    up.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default=None,
        help="tls: SSL listeners with client certificates; sasl: SASL_SSL with SCRAM users and ACLs "
        "(first up only; writes DIR/client.properties)",
    )
    sub.add_parser("status", parents=[common], help="show brokers, pids and the controller")
    sub.add_parser("stop", parents=[common], help="stop every broker, then ZooKeeper")
    kill = sub.add_parser("kill", parents=[common], help="signal one broker")
    kill.add_argument("id", type=int)
    kill.add_argument("--signal", choices=["KILL", "TERM", "STOP", "CONT"], default="TERM")
    restart = sub.add_parser("restart", parents=[common], help="stop one broker and start it again")
    restart.add_argument("id", type=int)
    logs = sub.add_parser(
        "logs", parents=[common], help="print one broker's server.log (or controller.log, state-change.log)"
    )
    logs.add_argument("id", type=int)
    which = logs.add_mutually_exclusive_group()
    which.add_argument(
        "--controller", dest="log", action="store_const", const=CONTROLLER_LOG, default=SERVER_LOG
    )
    which.add_argument("--state-change", dest="log", action="store_const", const=STATE_CHANGE_LOG)
    logs.add_argument("--follow", action="store_true", help="keep printing as the log grows, until Ctrl-C")
    _add_chaos_parser(sub)
    return parser.parse_args(argv)


def _add_chaos_parser(sub: argparse._SubParsersAction[KeelArgumentParser]) -> None:
    from node.chaos.schedule import DEFAULT_FAULTS

    chaos = sub.add_parser(
        "chaos", help="run a workload under seeded faults on a cluster of its own, then check the history"
    )
    add_verbose_option(chaos)
    chaos.add_argument("--duration", type=positive_float, default=60.0, help="seconds of faults (default 60)")
    chaos.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one)")
    chaos.add_argument("--brokers", type=positive_int, default=5)
    chaos.add_argument("--zookeeper-servers", type=int, choices=[1, 3], default=3)
    chaos.add_argument(
        "--faults",
        type=fault_kinds,
        default=DEFAULT_FAULTS,
        help=f"fault kinds, comma-separated (default {','.join(DEFAULT_FAULTS)})",
    )
    chaos.add_argument(
        "--session-timeout-ms", type=positive_int, default=4000, help="the brokers' ZooKeeper session timeout"
    )
    chaos.add_argument("--report", type=Path, default=None, help="write the figures as JSON to this file")
    chaos.add_argument(
        "--dir", type=Path, default=None, help="the cluster's files (default: a temporary directory)"
    )
    chaos.add_argument("--keep", action="store_true", help="keep the temporary directory")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verbose = verbose_requested(argv)
    quiet_libraries(verbose)
    return run_main("keel-cluster", lambda: _command(argv), verbose=verbose)


def _command(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        if args.command == "up":
            return cmd_up(args)
        if args.command == "chaos":
            return cmd_chaos(args)
        state = ClusterState.load(args.dir)
        if state is None:
            raise CommandError(f"no cluster in {args.dir} (run `keel-cluster up` first)")
        handler = {
            "status": cmd_status,
            "stop": cmd_stop,
            "kill": cmd_kill,
            "restart": cmd_restart,
            "logs": cmd_logs,
        }[args.command]
        return handler(args, state)
    except (JavaMissing, ZooKeeperStartError) as e:
        raise CommandError(str(e)) from e


if __name__ == "__main__":
    sys.exit(main())
