"""Real broker processes on a real ZooKeeper, each test under its own chroot."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from node.cluster.local import ROOT, BrokerProcess, LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper

SESSION_TIMEOUT_MS = 2000
__all__ = ["ROOT", "SESSION_TIMEOUT_MS", "BrokerProcess", "Brokers"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


# The `brokers` fixture: the local-cluster library, on this test's ZooKeeper chroot.
Brokers = LocalCluster


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Brokers]:
    group = LocalCluster(
        tmp_path,
        zk_connect,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        # Leadership stays where a test put it; the tests of the rebalance turn it on.
        settings={"auto.leader.rebalance.enable": "false"},
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
