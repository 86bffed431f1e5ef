"""Fixtures shared by the tiers: one real ZooKeeper per test session, a chroot per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.cluster.zookeeper import EmbeddedZooKeeper


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(Path(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chroot() -> str:
    """A fresh ZooKeeper chroot, so no test sees another's data."""
    return f"/keel-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_connect(zookeeper: EmbeddedZooKeeper, chroot: str) -> str:
    return zookeeper.connect_string + chroot
