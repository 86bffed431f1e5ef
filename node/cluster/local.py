"""The one local-cluster library: broker processes on this machine, for `keel-cluster`, the
integration tests and every benchmark.

It writes each broker's `server.properties`, launches `python -m node.broker.main` with its
output in a log file, signals and stops brokers (SIGTERM first, SIGKILL when a broker does
not go in time), and waits until every running broker names the same controller. A broker
is tracked by pid, so a command started later (`keel-cluster status`) can pick up brokers an
earlier one launched.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from signal import SIGCONT, SIGKILL, SIGSTOP, SIGTERM, Signals

import javaproperties

from node.broker.logs import SERVER_LOG, read_log
from node.clients.admin import KeelAdminClient
from node.cluster.private_files import private
from node.cluster.zookeeper import free_ports
from wire.api import DescribeClusterResponse
from wire.errors import WireError
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int | None) -> bool:
    """Whether `pid` runs (a zombie child is reaped and counts as gone)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return _proc_state(pid) != "Z"


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "R"


def process_state(pid: int | None) -> str:
    """`running`, `paused` (SIGSTOP) or `stopped`."""
    if not alive(pid):
        return "stopped"
    assert pid is not None
    return "paused" if _proc_state(pid) == "T" else "running"


def send_signal(pid: int | None, sig: Signals) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(pid: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def describe(
    port: int, timeout: float = 2.0, *, security: ClientSecurity = PLAINTEXT_CLIENT
) -> DescribeClusterResponse | None:
    """What the broker at `port` says of the cluster, or None if it does not answer."""
    try:
        async with KeelAdminClient(f"127.0.0.1:{port}", timeout=timeout, security=security) as admin:
            return await admin.describe_cluster()
    except WireError:
        return None


class ManagedProcess:
    """A Keel process of this machine (`python -m MODULE props`): its properties file, its log
    file, its port, and its process once started, or the pid an earlier command recorded."""

    module = ""
    properties_name = ""
    log_name = ""

    def __init__(
        self,
        *,
        home: Path,
        settings: dict[str, str],
        port: int | None,
        log_path: Path | None,
        pid: int | None,
    ) -> None:
        self.port = port if port is not None else free_ports(1)[0]
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.properties = home / self.properties_name
        self.log_path = log_path or home / self.log_name
        self.settings = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **settings}
        self.pid = pid
        self.process: subprocess.Popen[bytes] | None = None
        self._stopped_by_us = False

    def launch(self, *, detach: bool, extra_args: list[str] | None = None) -> None:
        """Write the properties and launch; `detach` puts the process in a session of its
        own, so that it outlives the command that started it."""
        arguments = self.arguments()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *arguments, *(extra_args or [])],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                start_new_session=detach,
            )
        self.pid = self.process.pid

    def arguments(self) -> list[str]:
        """What follows `python -m MODULE`: the properties file, written here."""
        # They may hold passwords (sasl.jaas.config).
        with private(self.properties).open("w", encoding="utf-8") as f:
            javaproperties.dump(self.settings, f, timestamp=False)
        return [str(self.properties)]

    @property
    def metrics_url(self) -> str | None:
        """Where its metrics.http.listener serves /metrics; None when it has none."""
        listener = self.settings.get("metrics.http.listener")
        if not listener:
            return None
        host, _, port = listener.rpartition(":")
        return f"http://{host or '127.0.0.1'}:{port}/metrics"

    @property
    def running(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return alive(self.pid)

    @property
    def state(self) -> str:
        return process_state(self.pid) if self.running else "stopped"

    @property
    def paused(self) -> bool:
        # A process this object started is paused only by its own signal(); one found by pid
        # is asked of /proc.
        if self.process is not None:
            return self._stopped_by_us and self.running
        return self.state == "paused"

    def signal(self, sig: Signals) -> None:
        if self.running:
            send_signal(self.pid, sig)
            if sig in (SIGSTOP, SIGCONT):
                self._stopped_by_us = sig == SIGSTOP

    def wait(self, timeout: float) -> int | None:
        """Until the process ends: its exit code (None for one this command did not start)."""
        if self.process is not None:
            return self.process.wait(timeout)
        if not wait_gone(self.pid, timeout):
            raise subprocess.TimeoutExpired(self.module, timeout)
        return None

    def stop(self, timeout: float = 30.0, sig: Signals = SIGTERM) -> int | None:
        """Signal the process (a paused one is woken first), wait, and kill it if it lingers;
        its exit code when known."""
        if not self.running:
            return self.process.returncode if self.process is not None else None
        self.signal(SIGCONT)
        self.signal(sig)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            send_signal(self.pid, SIGKILL)
            return self.wait(10)

    def kill(self) -> None:
        self.stop(10, SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class BrokerProcess(ManagedProcess):
    """One broker (`python -m node.broker.main server.properties`)."""

    module = "node.broker.main"
    properties_name = "server.properties"
    log_name = "broker.log"

    def __init__(
        self,
        broker_id: int,
        *,
        home: Path,
        settings: dict[str, str],
        port: int | None = None,
        log_path: Path | None = None,
        pid: int | None = None,
    ) -> None:
        self.broker_id = broker_id
        settings = {"broker.id": str(broker_id), "log.dirs": str(home / "data"), **settings}
        super().__init__(home=home, settings=settings, port=port, log_path=log_path, pid=pid)

    def start(self, *, detach: bool = False) -> BrokerProcess:
        self.launch(detach=detach)
        return self

    @property
    def log_dir(self) -> Path:
        """Where the broker writes server.log, controller.log and state-change.log."""
        return Path(self.settings["log.dirs"].split(",")[0].strip())

    def broker_log(self, name: str = SERVER_LOG) -> str:
        """One of the broker's own logs, across its rotations (`log()` is its stdout and stderr)."""
        return read_log(self.log_dir, name)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async def describe(
        self, timeout: float = 2.0, *, security: ClientSecurity = PLAINTEXT_CLIENT
    ) -> DescribeClusterResponse | None:
        return await describe(self.port, timeout, security=security)


class PlannerProcess(ManagedProcess):
    """The planner sidecar (`python -m node.planner.main planner.properties`)."""

    module = "node.planner.main"
    properties_name = "planner.properties"
    log_name = "planner.log"

    def __init__(
        self,
        *,
        home: Path,
        settings: dict[str, str],
        port: int | None = None,
        log_path: Path | None = None,
        pid: int | None = None,
    ) -> None:
        settings = {
            "planner.snapshot.dir": str(home / "snapshots"),
            "planner.state.dir": str(home / "state"),
            **settings,
        }
        super().__init__(home=home, settings=settings, port=port, log_path=log_path, pid=pid)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, detach: bool = False, extra_args: list[str] | None = None) -> PlannerProcess:
        self.launch(detach=detach, extra_args=extra_args)
        return self

    def wait_for_log(self, text: str, timeout: float) -> None:
        """Until the planner's log holds `text`; raises TimeoutError (or RuntimeError if it exits)."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if not self.running:
                raise RuntimeError(f"the planner exited before logging {text!r}:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the planner did not log {text!r} within {timeout:g} s")
            time.sleep(0.1)


class ConsoleProcess(ManagedProcess):
    """The web console (`python -m node.ui.main --zookeeper-connect ... --listen ...`), which
    takes its settings as arguments rather than a properties file."""

    module = "node.ui.main"
    log_name = "keel-ui.log"

    def __init__(
        self,
        *,
        home: Path,
        zk_connect: str,
        command_config: Path | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        pid: int | None = None,
    ) -> None:
        super().__init__(home=home, settings={}, port=port, log_path=log_path, pid=pid)
        self.zk_connect = zk_connect
        self.command_config = command_config

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def arguments(self) -> list[str]:
        config = [] if self.command_config is None else ["--command-config", str(self.command_config)]
        return ["--zookeeper-connect", self.zk_connect, "--listen", f"127.0.0.1:{self.port}", *config]

    def start(self, *, detach: bool = False) -> ConsoleProcess:
        self.launch(detach=detach)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Until the console answers /healthz; raises TimeoutError (RuntimeError if it exits)."""
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "healthz", timeout=1.0):
                    return
            except (urllib.error.URLError, OSError):
                pass
            if not self.running:
                raise RuntimeError(f"keel-ui exited before it served:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"keel-ui did not answer within {timeout:g} s")
            time.sleep(0.1)


class LocalCluster:
    """Brokers on one ZooKeeper connect string, each under `home`."""

    def __init__(
        self,
        home: Path,
        zk_connect: str,
        *,
        session_timeout_ms: int = 6000,
        connection_timeout_ms: int | None = None,
        settings: dict[str, str] | None = None,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        """`connection_timeout_ms`: how long each broker and planner waits for its first
        ZooKeeper session (None: the session timeout); `settings`: properties every broker
        gets, under each broker's own; `security`: how this library's own checks reach the
        brokers (their listeners' protocol)."""
        self.home = home
        self.zk_connect = zk_connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.settings = settings or {}
        self.security = security
        self.all: list[BrokerProcess] = []
        self.planners: list[PlannerProcess] = []

    def new(
        self,
        broker_id: int,
        settings: dict[str, str] | None = None,
        *,
        port: int | None = None,
        home: Path | None = None,
        log_path: Path | None = None,
        pid: int | None = None,
        **overrides: str,
    ) -> BrokerProcess:
        """A broker not yet started. `settings` takes Kafka's dotted keys; keyword overrides
        spell them with underscores (`unclean_leader_election_enable="true"`)."""
        port = port if port is not None else free_ports(1)[0]
        broker = BrokerProcess(
            broker_id,
            home=home or self.home / f"broker-{broker_id}-{port}",
            port=port,
            log_path=log_path,
            pid=pid,
            settings={
                "zookeeper.connect": self.zk_connect,
                "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                **self._connection_timeout(),
                **self.settings,
                **(settings or {}),
                **{k.replace("_", "."): v for k, v in overrides.items()},
            },
        )
        self.all.append(broker)
        return broker

    def new_planner(
        self, settings: dict[str, str] | None = None, *, home: Path | None = None
    ) -> PlannerProcess:
        """A planner on this cluster's ZooKeeper, not yet started; `settings` over the defaults
        (local[2] Spark with a small driver, so that it fits beside the brokers)."""
        port = free_ports(1)[0]
        planner = PlannerProcess(
            home=home or self.home / f"planner-{port}",
            port=port,
            settings={
                "zookeeper.connect": self.zk_connect,
                "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                **self._connection_timeout(),
                "spark.master": "local[2]",
                "spark.driver.memory": "1g",
                # Tests ask for their first plan at once: warming up first would only delay it.
                "planner.warm.up.enable": "false",
                **(settings or {}),
            },
        )
        self.planners.append(planner)
        return planner

    def _connection_timeout(self) -> dict[str, str]:
        if self.connection_timeout_ms is None:
            return {}
        return {"zookeeper.connection.timeout.ms": str(self.connection_timeout_ms)}

    def start(self, *broker_ids: int) -> list[BrokerProcess]:
        return [self.new(i).start() for i in broker_ids]

    def by_id(self, broker_id: int) -> BrokerProcess:
        """The running broker with that id (the newest, after restarts)."""
        found = next((b for b in reversed(self.all) if b.broker_id == broker_id and b.running), None)
        if found is None:
            raise LookupError(f"broker {broker_id} is not running")
        return found

    def running(self) -> list[BrokerProcess]:
        """Brokers that can answer: alive and not paused."""
        return [b for b in self.all if b.running and not b.paused]

    async def views(self) -> dict[int, DescribeClusterResponse | None]:
        running = self.running()
        answers = await asyncio.gather(*(b.describe(security=self.security) for b in running))
        return {b.broker_id: a for b, a in zip(running, answers, strict=True)}

    async def agreed_controller(self) -> tuple[int, int] | None:
        """(controller id, epoch) once every running broker answers and names the same one."""
        views = await self.views()
        if not views or any(v is None for v in views.values()):
            return None
        named = {(v.controller_id, v.controller_epoch) for v in views.values() if v is not None}
        if len(named) != 1:
            return None
        (controller_id, epoch) = next(iter(named))
        return (controller_id, epoch) if controller_id in views else None

    async def wait_for_controller(self, timeout: float = 60.0) -> tuple[int, int]:
        """Until the running brokers agree on a controller; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while (agreed := await self.agreed_controller()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the brokers did not agree on a controller within {timeout:g} s")
            await asyncio.sleep(0.05)
        return agreed

    async def wait_for_full_metadata(self, timeout: float = 60.0) -> None:
        """Until the running brokers agree on a controller and each one's metadata lists every
        running broker. Agreeing on the controller is not enough to create topics at once: a
        broker that heard the controller's first UpdateMetadata before the last broker
        registered still counts fewer brokers, and refuses a replication factor of all of
        them (INVALID_REPLICATION_FACTOR) until the next one comes."""
        deadline = time.monotonic() + timeout
        await self.wait_for_controller(timeout)
        while True:
            views = await self.views()
            running = set(views)
            if all(v is not None and running <= {b.broker_id for b in v.brokers} for v in views.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the brokers' metadata did not list every broker within {timeout:g} s")
            await asyncio.sleep(0.05)

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop every broker in order with SIGTERM (killed if one lingers)."""
        for broker in self.all:
            broker.stop(timeout)

    def kill_all(self) -> None:
        for planner in self.planners:
            if planner.running:
                planner.kill()
        for broker in self.all:
            if broker.running:
                broker.kill()
