"""The chaos run's ZooKeeper observer stops when asked, even when the request to stop lands
just as a poll fails: a cancellation then is lost inside asyncio.wait_for (Python 3.11 returns
the inner result instead), and a 5-minute run hung after its heal waiting for the observer."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from node.chaos.history import History
from node.chaos.observer import Observer


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
