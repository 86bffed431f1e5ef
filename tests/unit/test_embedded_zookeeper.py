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


def test_a_port_offered_again_is_not_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two brokers made one after the other must get different ports, even when the same
    # candidate comes up again.
    first, second = embedded.free_ports(2)
    monkeypatch.setattr(embedded, "_HANDED_OUT", {first})
    monkeypatch.setattr(embedded, "_port_candidates", lambda: iter([first, first, second]))
    assert embedded.free_ports(1) == [second]


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    (free,) = embedded.free_ports(1)
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    with embedded.socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(embedded, "_port_candidates", lambda: iter([busy, free]))
        assert embedded.free_ports(1) == [free]


def test_free_ports_lie_below_the_ephemeral_range() -> None:
    """A port inside the range can become some outgoing connection's source port before its
    listener binds it (a ZooKeeper member's connection to another kept a broker from
    listening for a whole chaos run)."""
    low, _ = (int(x) for x in embedded._EPHEMERAL_RANGE.read_text().split())
    assert low - embedded.LISTEN_PORTS_LOW >= 1000, "this machine leaves room below its range"
    ports = embedded.free_ports(50)
    assert all(embedded.LISTEN_PORTS_LOW <= p < low for p in ports), ports


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = embedded.free_ports(20) + embedded.free_ports(20)
    assert len(set(ports)) == 40
    for port in ports[:5]:
        with embedded.socket.socket() as s:
            s.bind(("127.0.0.1", port))
