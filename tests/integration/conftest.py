"""Real broker processes on a real ZooKeeper, each test under its own chroot."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from wire.api import DescribeClusterResponse
from wire.errors import WireError

ROOT = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT_MS = 2000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


class BrokerProcess:
    """One `python -m node.broker.main` process with its own properties, port and log file."""

    def __init__(self, broker_id: int, zk_connect: str, home: Path, overrides: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.port = free_ports(1)[0]
        self.home = home / f"broker-{broker_id}-{self.port}"
        self.home.mkdir(parents=True)
        self.log_path = self.home / "broker.log"
        self.properties = self.home / "server.properties"
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "log.dirs": str(self.home / "data"),
            # Leadership stays where a test put it; the tests of the rebalance turn it on.
            "auto.leader.rebalance.enable": "false",
            **overrides,
        }
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self) -> BrokerProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "node.broker.main", str(self.properties)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            if sig in (signal.SIGSTOP, signal.SIGCONT):
                self.paused = sig == signal.SIGSTOP

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async def describe(self, timeout: float = 2.0) -> DescribeClusterResponse | None:
        try:
            async with KeelAdminClient(f"127.0.0.1:{self.port}", timeout=timeout) as admin:
                return await admin.describe_cluster()
        except WireError:
            return None


class Brokers:
    def __init__(self, zk_connect: str, home: Path) -> None:
        self.zk_connect = zk_connect
        self.home = home
        self.all: list[BrokerProcess] = []

    def new(self, broker_id: int, **overrides: str) -> BrokerProcess:
        broker = BrokerProcess(
            broker_id, self.zk_connect, self.home, {k.replace("_", "."): v for k, v in overrides.items()}
        )
        self.all.append(broker)
        return broker

    def start(self, *broker_ids: int) -> list[BrokerProcess]:
        return [self.new(i).start() for i in broker_ids]

    def by_id(self, broker_id: int) -> BrokerProcess:
        return next(b for b in reversed(self.all) if b.broker_id == broker_id and b.running)

    def running(self) -> list[BrokerProcess]:
        """Brokers that can answer: alive and not paused."""
        return [b for b in self.all if b.running and not b.paused]

    async def views(self) -> dict[int, DescribeClusterResponse | None]:
        running = self.running()
        answers = await asyncio.gather(*(b.describe() for b in running))
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

    def stop_all(self) -> None:
        for broker in self.all:
            if broker.running:
                broker.signal(signal.SIGCONT)
                broker.signal(signal.SIGKILL)
                broker.wait(10)


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Brokers]:
    group = Brokers(zk_connect, tmp_path)
    yield group
    group.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for broker in group.all:
            sys.stderr.write(f"\n--- broker {broker.broker_id} log ---\n{broker.log()[-4000:]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def kazoo(zookeeper: EmbeddedZooKeeper, chroot: str) -> Iterator[KazooClient]:
    """An independent ZooKeeper client, for checking and poking state from outside."""
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.connect_string + chroot)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
