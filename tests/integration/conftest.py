"""Real broker processes on a real ZooKeeper, each test under its own chroot; with
KEEL_TEST_SECURITY=sasl_ssl, on SASL_SSL with the authorizer on (tests/security_pass.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from node.cluster.local import ROOT, BrokerProcess, LocalCluster, PlannerProcess
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from tests import security_pass
from tests.security_pass import SecuredPass

SESSION_TIMEOUT_MS = 2000
# The short session makes failover quick; start-up may wait longer for its first session, which
# a loaded machine's ZooKeeper (it writes each new session to its log) has taken over 2 s to give.
CONNECTION_TIMEOUT_MS = 15000
__all__ = ["ROOT", "SESSION_TIMEOUT_MS", "BrokerProcess", "Brokers", "local_cluster"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    secured = security_pass.requested()
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)
            plain_only = item.get_closest_marker("plain_pass_only")
            if secured and plain_only is not None:
                item.add_marker(pytest.mark.skip(reason=f"secured pass: {plain_only.args[0]}"))


class SecuredCluster(LocalCluster):
    """A LocalCluster whose brokers and planners listen on SASL_SSL, with the authorizer on."""

    def __init__(self, *args: object, secured: SecuredPass, **kwargs: object) -> None:
        # Its own checks (status, settling) reach the brokers as the admin user.
        kwargs.setdefault("security", secured.client_security)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.secured = secured

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
        port = port if port is not None else free_ports(1)[0]
        secured = {**self.secured.broker_settings(port), **(settings or {})}
        return super().new(broker_id, secured, port=port, home=home, log_path=log_path, pid=pid, **overrides)

    def new_planner(
        self, settings: dict[str, str] | None = None, *, home: Path | None = None
    ) -> PlannerProcess:
        planner = super().new_planner(settings, home=home)
        # The port is the planner's own choice: its listener is set once it is known.
        planner.settings |= {**self.secured.planner_settings(planner.port), **(settings or {})}
        return planner


def local_cluster(home: Path, zk_connect: str, **kwargs: object) -> LocalCluster:
    """A LocalCluster on `zk_connect`, secured in the secured pass (its users written first)."""
    secured = security_pass.active()
    if secured is None:
        return LocalCluster(home, zk_connect, **kwargs)  # type: ignore[arg-type]
    secured.create_users(zk_connect)
    return SecuredCluster(home, zk_connect, secured=secured, **kwargs)


@pytest.fixture(scope="session", autouse=True)
def secured_pass(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPass | None]:
    """In the secured pass: the session's CA and users, and every client's default security
    the admin's (session-wide, since module-scoped fixtures start clusters too)."""
    if not security_pass.requested():
        yield None
        return
    secured = SecuredPass.create(tmp_path_factory.mktemp("secured-pass"))
    security_pass.activate(secured)
    with pytest.MonkeyPatch.context() as patch:
        for defaults, name, value in security_pass.client_defaults(secured.client_security):
            patch.setitem(defaults, name, value)
        yield secured
    security_pass.activate(None)


# The `brokers` fixture: the local-cluster library, on this test's ZooKeeper chroot.
Brokers = LocalCluster


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Brokers]:
    group = local_cluster(
        tmp_path,
        zk_connect,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        # Leadership stays where a test put it; the tests of the rebalance turn it on.
        settings={"auto.leader.rebalance.enable": "false"},
        connection_timeout_ms=CONNECTION_TIMEOUT_MS,
    )
    yield group
    group.kill_all()
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
