"""Fixtures shared by the tiers: one real ZooKeeper per test session, a chroot per test, and
one SparkSession per test session (started by the first test that asks for it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from node.cluster.zookeeper import EmbeddedZooKeeper

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The planner's SparkSession on two local cores, shared by every test that plans."""
    from node.planner.session import spark_session

    session = spark_session("local[2]", {"spark.driver.memory": "2g"})
    yield session
    session.stop()
