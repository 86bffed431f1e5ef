"""What the embedded ZooKeeper launcher needs before it can start anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cluster import zookeeper as embedded


def test_missing_java_is_reported_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(embedded.JavaMissing, match="Java 17 or newer"):
        embedded.java_binary()


def test_the_classpath_comes_from_the_pyspark_wheel() -> None:
    jars = embedded.classpath().split(":")
    names = [jar.rsplit("/", 1)[-1] for jar in jars]
    assert any(name.startswith("zookeeper-3.") for name in names)
    assert any(name.startswith("zookeeper-jute-") for name in names)
    assert all("/pyspark/jars/" in jar for jar in jars)


def test_only_one_or_three_servers() -> None:
    with pytest.raises(ValueError, match="1 or 3"):
        embedded.EmbeddedZooKeeper(Path("/tmp"), servers=2)


class ScriptedSocket:
    """A probe socket whose kernel-chosen port comes from a script."""

    def __init__(self, ports: list[int]) -> None:
        self._port = ports.pop(0)

    def bind(self, address: tuple[str, int]) -> None:
        assert address == ("127.0.0.1", 0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    def close(self) -> None:
        pass


def test_a_port_the_kernel_offers_again_is_not_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel may offer a just-closed port again: two brokers made one after the other
    # must still get different ports.
    offered = [61001, 61001, 61001, 61002]
    monkeypatch.setattr(embedded.socket, "socket", lambda: ScriptedSocket(offered))
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    assert embedded.free_ports(1) == [61001]
    assert embedded.free_ports(1) == [61002]
    assert offered == []


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = embedded.free_ports(20) + embedded.free_ports(20)
    assert len(set(ports)) == 40
    for port in ports[:5]:
        with embedded.socket.socket() as s:
            s.bind(("127.0.0.1", port))
