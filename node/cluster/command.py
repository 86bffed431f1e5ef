"""`keel-cluster`: a local multi-broker cluster on an embedded ZooKeeper.

    keel-cluster up [--brokers N] [--zookeeper-servers 1|3] [--dir DIR]
    keel-cluster status | stop | kill ID [--signal KILL|TERM|STOP|CONT] | restart ID | logs ID

Everything lives in DIR (default `.keel-cluster`): `cluster.json` (ports and pids), the
ZooKeeper data, each broker's `server.properties` and its log under `logs/`. Commands are
idempotent: `up` on a running cluster only shows it, and starts whatever has died.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from node.cli.output import print_json, print_table
from node.clients.admin import KeelAdminClient
from node.cluster.zookeeper import EmbeddedZooKeeper, JavaMissing, ZooKeeperStartError, free_ports
from wire.api import DescribeClusterResponse
from wire.errors import WireError

SESSION_TIMEOUT_MS = 6000
STATE_FILE = "cluster.json"


@dataclasses.dataclass
class BrokerProcess:
    broker_id: int
    port: int
    pid: int | None = None


@dataclasses.dataclass
class ClusterState:
    directory: Path
    zookeeper_servers: int
    zookeeper_ports: list[int]
    zookeeper_pids: list[int]
    brokers: dict[int, BrokerProcess]

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        try:
            raw = orjson.loads((directory / STATE_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        brokers = {int(k): BrokerProcess(**v) for k, v in raw["brokers"].items()}
        return cls(
            directory, raw["zookeeper_servers"], raw["zookeeper_ports"], raw["zookeeper_pids"], brokers
        )

    def save(self) -> None:
        value = dataclasses.asdict(self)
        value.pop("directory")
        value["brokers"] = {str(k): v for k, v in value["brokers"].items()}
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2))
        tmp.replace(self.directory / STATE_FILE)

    @property
    def zookeeper(self) -> EmbeddedZooKeeper:
        return EmbeddedZooKeeper(
            self.directory / "zookeeper", servers=self.zookeeper_servers, ports=self.zookeeper_ports
        )

    def log_file(self, broker_id: int) -> Path:
        return self.directory / "logs" / f"broker-{broker_id}.log"


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive; reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return status != "Z"


def process_state(pid: int | None) -> str:
    if not alive(pid):
        return "stopped"
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "running"
    return "paused" if status == "T" else "running"


def _start_zookeeper(state: ClusterState) -> None:
    if state.zookeeper_pids and all(alive(p) for p in state.zookeeper_pids):
        return
    for pid in state.zookeeper_pids:
        _signal(pid, signal.SIGKILL)
    zookeeper = state.zookeeper
    zookeeper.start(detach=True)
    state.zookeeper_ports = zookeeper.ports
    state.zookeeper_pids = [p.pid for p in zookeeper.processes]
    state.save()


def _write_properties(state: ClusterState, broker: BrokerProcess) -> Path:
    home = state.directory / f"broker-{broker.broker_id}"
    home.mkdir(parents=True, exist_ok=True)
    connect = ",".join(f"127.0.0.1:{p}" for p in state.zookeeper_ports[::3])
    properties = home / "server.properties"
    properties.write_text(
        "\n".join(
            [
                f"broker.id={broker.broker_id}",
                f"listeners=PLAINTEXT://127.0.0.1:{broker.port}",
                f"zookeeper.connect={connect}",
                f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                f"log.dirs={home / 'data'}",
            ]
        )
        + "\n"
    )
    return properties


def _start_broker(state: ClusterState, broker: BrokerProcess) -> None:
    if alive(broker.pid):
        return
    properties = _write_properties(state, broker)
    log_path = state.log_file(broker.broker_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "node.broker.main", str(properties)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    broker.pid = process.pid
    state.save()


def _signal(pid: int | None, sig: signal.Signals) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _wait_gone(pid: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def _describe(port: int, timeout: float = 2.0) -> DescribeClusterResponse | None:
    try:
        async with KeelAdminClient(f"127.0.0.1:{port}", timeout=timeout) as admin:
            return await admin.describe_cluster()
    except WireError:
        return None


async def _views(state: ClusterState) -> dict[int, DescribeClusterResponse | None]:
    ids = sorted(state.brokers)
    answers = await asyncio.gather(
        *(
            _describe(state.brokers[i].port) if process_state(state.brokers[i].pid) == "running" else _none()
            for i in ids
        )
    )
    return dict(zip(ids, answers, strict=True))


async def _none() -> None:
    return None


def wait_settled(state: ClusterState, timeout: float) -> bool:
    """Until every running broker answers and all name the same controller."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = asyncio.run(_views(state))
        running = [v for i, v in views.items() if process_state(state.brokers[i].pid) == "running"]
        if running and all(v is not None for v in running):
            controllers = {v.controller_id for v in running if v is not None}
            if len(controllers) == 1 and -1 not in controllers:
                return True
        time.sleep(0.1)
    return False


def show_status(state: ClusterState, fmt: str) -> None:
    views = asyncio.run(_views(state))
    rows = []
    for broker_id in sorted(state.brokers):
        broker = state.brokers[broker_id]
        view = views[broker_id]
        rows.append(
            {
                "broker_id": broker_id,
                "pid": broker.pid if alive(broker.pid) else None,
                "address": f"127.0.0.1:{broker.port}",
                "state": process_state(broker.pid),
                "controller": view is not None and view.controller_id == broker_id,
                "controller_id": view.controller_id if view else None,
                "controller_epoch": view.controller_epoch if view else None,
            }
        )
    zookeeper = {
        "connect": ",".join(f"127.0.0.1:{p}" for p in state.zookeeper_ports[::3]),
        "running": bool(state.zookeeper_pids) and all(alive(p) for p in state.zookeeper_pids),
    }
    if fmt == "json":
        print_json({"zookeeper": zookeeper, "brokers": rows})
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


def cmd_up(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    directory.mkdir(parents=True, exist_ok=True)
    state = ClusterState.load(directory)
    if state is None:
        state = ClusterState(directory, args.zookeeper_servers, [], [], {})
    for broker_id in range(1, args.brokers + 1):
        if broker_id not in state.brokers:
            state.brokers[broker_id] = BrokerProcess(broker_id, free_ports(1)[0])
    state.save()
    _start_zookeeper(state)
    for broker in state.brokers.values():
        _start_broker(state, broker)
    if not wait_settled(state, args.timeout):
        print(
            f"keel-cluster: the brokers did not agree on a controller within {args.timeout:g} s",
            file=sys.stderr,
        )
        show_status(state, args.format)
        return 1
    show_status(state, args.format)
    return 0


def cmd_status(args: argparse.Namespace, state: ClusterState) -> int:
    show_status(state, args.format)
    return 0


def cmd_stop(args: argparse.Namespace, state: ClusterState) -> int:
    for broker in state.brokers.values():
        _signal(broker.pid, signal.SIGCONT)  # a paused broker cannot handle SIGTERM
        _signal(broker.pid, signal.SIGTERM)
    for broker in state.brokers.values():
        if not _wait_gone(broker.pid, 20):
            _signal(broker.pid, signal.SIGKILL)
        broker.pid = None
    for pid in state.zookeeper_pids:
        _signal(pid, signal.SIGTERM)
    for pid in state.zookeeper_pids:
        if not _wait_gone(pid, 10):
            _signal(pid, signal.SIGKILL)
    state.zookeeper_pids = []
    state.save()
    print("stopped")
    return 0


def _broker(state: ClusterState, broker_id: int) -> BrokerProcess:
    if broker_id not in state.brokers:
        raise SystemExit(f"keel-cluster: no broker {broker_id} (brokers: {sorted(state.brokers)})")
    return state.brokers[broker_id]


def cmd_kill(args: argparse.Namespace, state: ClusterState) -> int:
    broker = _broker(state, args.id)
    if not alive(broker.pid):
        print(f"broker {args.id} is not running")
        return 0
    _signal(broker.pid, getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to broker {args.id} (pid {broker.pid})")
    return 0


def cmd_restart(args: argparse.Namespace, state: ClusterState) -> int:
    broker = _broker(state, args.id)
    _signal(broker.pid, signal.SIGCONT)
    _signal(broker.pid, signal.SIGTERM)
    if not _wait_gone(broker.pid, 20):
        _signal(broker.pid, signal.SIGKILL)
        _wait_gone(broker.pid, 5)
    broker.pid = None
    _start_zookeeper(state)
    _start_broker(state, broker)
    wait_settled(state, args.timeout)
    show_status(state, args.format)
    return 0


def cmd_logs(args: argparse.Namespace, state: ClusterState) -> int:
    _broker(state, args.id)
    path = state.log_file(args.id)
    if not path.exists():
        print(f"keel-cluster: no log yet at {path}", file=sys.stderr)
        return 1
    sys.stdout.write(path.read_text(errors="replace"))
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path(os.environ.get("KEEL_CLUSTER_DIR", ".keel-cluster")))
    common.add_argument("--format", choices=["table", "json"], default="table")
    common.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the cluster")
    parser = argparse.ArgumentParser(prog="keel-cluster", description="A local Keel cluster.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", parents=[common], help="start (or resume) the cluster and show it")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--zookeeper-servers", type=int, choices=[1, 3], default=1)
    sub.add_parser("status", parents=[common], help="show brokers, pids and the controller")
    sub.add_parser("stop", parents=[common], help="stop every broker, then ZooKeeper")
    kill = sub.add_parser("kill", parents=[common], help="signal one broker")
    kill.add_argument("id", type=int)
    kill.add_argument("--signal", choices=["KILL", "TERM", "STOP", "CONT"], default="TERM")
    restart = sub.add_parser("restart", parents=[common], help="stop one broker and start it again")
    restart.add_argument("id", type=int)
    logs = sub.add_parser("logs", parents=[common], help="print one broker's log")
    logs.add_argument("id", type=int)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "up":
            if args.brokers < 1:
                print("keel-cluster: --brokers must be at least 1", file=sys.stderr)
                return 2
            return cmd_up(args)
        state = ClusterState.load(args.dir)
        if state is None:
            print(f"keel-cluster: no cluster in {args.dir} (run `keel-cluster up` first)", file=sys.stderr)
            return 1
        handler = {
            "status": cmd_status,
            "stop": cmd_stop,
            "kill": cmd_kill,
            "restart": cmd_restart,
            "logs": cmd_logs,
        }[args.command]
        return handler(args, state)
    except (JavaMissing, ZooKeeperStartError) as e:
        print(f"keel-cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
