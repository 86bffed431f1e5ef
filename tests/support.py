"""Helpers shared by every test tier: waiting for conditions, never for wall-clock time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from actors.base.ports import TopicAdminStore

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], *, timeout: float, message: str, interval: float = 0.02
) -> T:
    """Await `probe()` until it returns something truthy; fail with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{message} (not within {timeout:g} s; last value: {last!r})")


def eventually_sync(probe: Callable[[], T], *, timeout: float, message: str, interval: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{message} (not within {timeout:g} s; last value: {last!r})")


class ManualClock:
    """A Clock that moves only when told to; what is scheduled runs when `advance` passes it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.scheduled: list[ScheduledCall] = []

    def monotonic(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return int(self.now * 1000)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = sorted((c for c in self.scheduled if c.due <= self.now), key=lambda c: c.due)
        self.scheduled = [c for c in self.scheduled if c.due > self.now]
        for call in due:
            if not call.cancelled:
                call.callback()

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> ScheduledCall:
        call = ScheduledCall(self.now + delay_s, callback)
        self.scheduled.append(call)
        return call

    def pending(self) -> list[float]:
        """When the calls still to run are due, in seconds from now."""
        return sorted(c.due - self.now for c in self.scheduled if not c.cancelled)


class ScheduledCall:
    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


async def open_connection(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to a broker: over TLS in the secured pass (tests/security_pass.py),
    though not authenticated, so only ApiVersions is answered on it there."""
    from tests import security_pass

    secured = security_pass.active()
    tls = None if secured is None else secured.client_security.tls_context()
    return await asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)


def run_command(
    module: str,
    *args: str,
    timeout: float = 120,
    stdin: str | bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Keel's commands (`node.cli.main` is `keel`) as a process from the repository's
    root, the way a person runs it: the one runner every tier uses. In the secured pass
    (tests/security_pass.py), `keel` authenticates as the admin user: a test's own
    `--command-config`, given later, wins."""
    from node.cluster.local import ROOT
    from tests import security_pass

    secured = security_pass.active()
    if module == "node.cli.main" and secured is not None:
        args = ("--command-config", str(secured.client_config), *args)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=stdin.decode() if isinstance(stdin, bytes) else stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **env} if env is not None else None,
        check=False,
    )


def keel(*args: str, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`keel ARGS` as a process."""
    return run_command("node.cli.main", *args, timeout=timeout, stdin=stdin)


async def turns_while(work: Awaitable[T]) -> tuple[T, int]:
    """`work`'s result, and how many times another task ran while it did: how often the loop
    turned in the meantime (actors/base/loop_slices.py)."""
    turns = 0
    done = False

    async def other() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(other())
    await asyncio.sleep(0)
    before = turns
    try:
        result = await work
    finally:
        done = True
        await counter
    return result, turns - before


def topic_admin(store: object) -> TopicAdminStore:
    """The TopicAdminStore on the same session as `store`: the fake's on a FakeClusterStore,
    ZooKeeper's on a ZkClusterStore's client."""
    from node.sim.zookeeper import FakeClusterStore, FakeTopicAdminStore
    from node.zk.store import ZkClusterStore
    from node.zk.topic_admin_store import ZkTopicAdminStore

    if isinstance(store, FakeClusterStore):
        return FakeTopicAdminStore(store)
    assert isinstance(store, ZkClusterStore), store
    return ZkTopicAdminStore(store.zk)
