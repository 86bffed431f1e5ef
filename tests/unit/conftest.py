"""The controller harness's fixture, for the unit tests that run KafkaControllers on the
in-memory ZooKeeper (a test module that needs a cluster set up its own way defines its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.controllers import ControllerCluster


@pytest.fixture
async def cluster() -> AsyncIterator[ControllerCluster]:
    cluster = ControllerCluster()
    yield cluster
    await cluster.stop()
