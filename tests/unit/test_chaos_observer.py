"""The chaos run's ZooKeeper observer stops when asked, even when the request to stop lands
just as a poll fails: a cancellation then is lost inside asyncio.wait_for (Python 3.11 returns
the inner result instead), and a 5-minute run hung after its heal waiting for the observer. It
records /controller each time it changes, its absences among them, for the controller-absent
check."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from aiozk.protocol.stat import Stat

from node.chaos.history import ControllerZnode, History
from node.chaos.observer import Observer
from node.zk import data


class FailingZooKeeper:
    """Every read fails, once `answer` is set."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.asked = asyncio.Event()

    async def get_many(self, paths: list[str]) -> list[object]:
        self.asked.set()
        await self.answer.wait()
        raise ConnectionError("no ZooKeeper server answers")


async def test_the_observer_stops_when_asked_as_a_poll_fails() -> None:
    zk = FailingZooKeeper()
    observer = Observer(SimpleNamespace(zk=zk), History(partitions=[("t", 0)]), time.monotonic)  # type: ignore[arg-type]
    observer.start()
    await asyncio.wait_for(zk.asked.wait(), 5)
    zk.answer.set()
    # One turn of the loop: the poll fails, and the stop lands before wait_for sees it.
    await asyncio.sleep(0)
    asked_to_stop = time.monotonic()
    await asyncio.wait_for(observer.stop(), 10)
    assert time.monotonic() - asked_to_stop < 1.0, "stop() waited for a loop that went on polling"
    await asyncio.sleep(0)
    assert observer._task is not None and observer._task.done()


class ScriptedZooKeeper:
    """Answers each read of /controller and /controller_epoch with `znodes`, as set."""

    def __init__(self) -> None:
        self.znodes: list[tuple[bytes | None, Stat] | None] = [None, None]

    async def get_many(self, paths: list[str]) -> list[tuple[bytes | None, Stat] | None]:
        return list(self.znodes)

    def controller(self, broker: int, epoch: int, zxid: int, age_s: float) -> None:
        """/controller held by `broker` since `age_s` ago, elected at `epoch` by the multi `zxid`."""
        created = Stat(created_zxid=zxid, last_modified_zxid=zxid, created=int((time.time() - age_s) * 1000))
        self.znodes = [
            (data.encode_controller(broker, 0), created),
            (data.encode_controller_epoch(epoch), Stat(created_zxid=1, last_modified_zxid=zxid)),
        ]


async def test_the_observer_records_each_controller_znode_and_each_absence() -> None:
    zk = ScriptedZooKeeper()
    now = [1.0]
    history = History()
    observer = Observer(SimpleNamespace(zk=zk), history, lambda: now[0])  # type: ignore[arg-type]
    zk.controller(1, 1, zxid=10, age_s=30.0)
    await observer.poll()
    now[0] = 1.1
    await observer.poll()
    zk.znodes[0] = None
    now[0] = 2.0
    await observer.poll()
    now[0] = 2.1
    await observer.poll()
    # Elected half a second before the poll that saw it: its creation dates it.
    zk.controller(2, 2, zxid=20, age_s=0.5)
    now[0] = 3.0
    await observer.poll()
    [first, gone, second] = history.controller_znodes
    assert (first.t, first.broker, first.since) == (1.0, 1, 0.0)
    assert gone == ControllerZnode(2.0, None, 2.0)
    assert (second.t, second.broker) == (3.0, 2) and abs(second.since - 2.5) < 0.2
    assert history.observed_until_s == 3.0
    assert any(e.detail == "/controller is absent (ZooKeeper)" for e in history.events)
    assert [(c.epoch, c.broker) for c in history.controllers] == [(1, 1), (2, 2)]
