"""Long-running work, one mechanism for all of it: a `Service` is a component's background
work on one task, started once and stopped once; `Periodic` is Kafka's KafkaScheduler job.

The actor runtime (runtime.py) serves messages; a service runs a loop of its own: a fetcher
following its leader, a sender draining a broker's queue, a listener woken by its watch, the
broker's periodic maintenance. Each used to create its task and cancel it its own way; here
they share one lifecycle:

- `start` creates the task, in the caller's context (a simulated broker's tasks are its own,
  and end with it); a second `start` does nothing.
- `stop` cancels the task and waits for it to end; it is safe before `start` and more than
  once, and a service stopped before it started never runs.
- `run` is the work (`Worker` runs a coroutine function as one). A service whose `run`
  returns (a fetcher nothing follows any more) is no longer `running`; one whose `run`
  raises is logged, as a task nobody awaits would not be.

Time is the event loop's, which a simulation's loop makes virtual.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Service:
    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None
        self._stop_requested = False

    async def run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        if self._task is None and not self._stop_requested:
            self._task = asyncio.create_task(self._main(), name=self.name)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def stopped(self) -> bool:
        """Whether `stop` was called: work in hand as it was may see it and end."""
        return self._stop_requested

    async def stop(self) -> None:
        self._stop_requested = True
        task = self._task
        if task is None or task.done():
            return
        await cancel_and_wait(task)

    async def _main(self) -> None:
        try:
            await self.run()
        except Exception:
            log.exception("%s ended by an error", self.name)


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel `task` and wait until it has ended. Its cancellation is not the caller's: a
    caller cancelled while it waits (a timeout around a stop) is cancelled still."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


class Worker(Service):
    """A loop written as one coroutine function (`work`), run as a service."""

    def __init__(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        super().__init__(name)
        self._work = work

    async def run(self) -> None:
        await self._work()


class Periodic(Service):
    """`work` every `interval_s` seconds (after each pause) until stopped. A failed run is
    logged and followed by the next, never the end of the job, as in Kafka's scheduler."""

    def __init__(self, name: str, interval_s: float, work: Callable[[], Awaitable[None]]) -> None:
        super().__init__(name)
        self.interval_s = interval_s
        self._work = work

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self._work()
            except Exception:
                log.exception("periodic %s failed", self.name)
