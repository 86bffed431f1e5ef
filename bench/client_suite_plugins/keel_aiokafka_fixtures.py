"""aiokafka's `tests/conftest.py`, aimed at a running Keel broker instead of its Docker image.

Loaded with `-p keel_aiokafka_fixtures` by `bench.client_suites` from a scratch directory.
The suite's conftest starts a Kafka container (`kafka_server`), makes SSL certificates in
another (`ssl_folder`) and execs Kafka's tools in it for ACLs, SCRAM users and keytabs
(`acl_manager`, `kafka_config`, `kerberos_utils`). Fixtures of a plugin lose to a conftest's
of the same name, so this plugin swaps them into the conftest module before pytest reads its
fixtures. `KEEL_KAFKA_BOOTSTRAP` (host:port) names the broker's Kafka listener; there is no
SSL or SASL listener and no container, so the tests that need one fail, saying so.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

# The conftest imports `docker` at its top (the package is not needed here) and names
# `docker.models.containers.Container` in a dataclass annotation.
_docker = types.ModuleType("docker")
_docker.models = types.SimpleNamespace(containers=types.SimpleNamespace(Container=object))  # type: ignore[attr-defined]
sys.modules.setdefault("docker", _docker)


class NoContainer:
    """Stands where the suite's helpers expect its Kafka container."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("no Docker container: this run aims at a running Keel broker")


class KeelServer:
    """What the suite reads of its `KafkaServer`: one PLAINTEXT listener."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.ssl_port = self.sasl_plain_port = self.sasl_ssl_port = None
        self.container = NoContainer()

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


@pytest.fixture(scope="session")
def docker() -> None:
    return None


@pytest.fixture(scope="session")
def kafka_image(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--docker-image"))


@pytest.fixture(scope="session")
def kafka_server() -> KeelServer:
    return KeelServer(os.environ["KEEL_KAFKA_BOOTSTRAP"])


@pytest.fixture(scope="session")
def ssl_folder() -> Path:
    # No certificates are made: the SSL tests fail on the missing files.
    return Path("tests/ssl_cert")


@pytest.fixture(scope="class")
def acl_manager() -> NoContainer:
    return NoContainer()


@pytest.fixture(scope="class")
def kafka_config() -> NoContainer:
    return NoContainer()


@pytest.fixture(scope="class")
def kerberos_utils() -> NoContainer:
    return NoContainer()


_OVERRIDES = {
    "docker": docker,
    "kafka_image": kafka_image,
    "kafka_server": kafka_server,
    "ssl_folder": ssl_folder,
    "acl_manager": acl_manager,
    "kafka_config": kafka_config,
    "kerberos_utils": kerberos_utils,
}


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """Before the fixture manager parses the suite's conftest, put these fixtures in it."""
    if Path(getattr(plugin, "__file__", None) or "").parts[-2:] == ("tests", "conftest.py"):
        for name, fixture in _OVERRIDES.items():
            setattr(plugin, name, fixture)
