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
