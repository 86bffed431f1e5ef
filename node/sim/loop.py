"""Simulated time: an asyncio event loop whose clock is virtual and which never blocks.

When no callback is ready, the loop moves its clock straight to the next timer instead of
waiting for it, so an hour of timeouts, retries and long polls runs in a blink, and the order
of everything that happens depends only on the code and the seed, never on the machine.
`asyncio.sleep`, `wait_for` and `loop.call_later` all run on it unchanged; `SimClock` is the
`Clock` port (actors/clock.py) over the same virtual time, for the actors that take one.

There is no I/O: the selector is a stand-in that only advances time. A loop with nothing
ready and nothing scheduled would wait forever; here that is a bug in the simulation, and it
raises `Deadlock`.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# Where the virtual clock starts: an arbitrary, fixed point, so that traces are comparable.
EPOCH_S = 1_000_000.0
# The wall clock at EPOCH_S (1 Jan 2024), for timestamps written to ZooKeeper and logs.
WALL_AT_EPOCH_MS = 1_704_067_200_000


# The simulated process a task belongs to (a broker id; None for the simulation itself and
# its clients). A task inherits it from the context it is created in, so everything a broker
# starts is its own, and `VirtualTimeLoop.kill` can end it all at once, as `kill -9` would.
NODE: contextvars.ContextVar[int | None] = contextvars.ContextVar("sim_node", default=None)


class Deadlock(RuntimeError):
    """Nothing is ready and nothing is scheduled: the simulation can never move again."""


class _TimeOnlySelector(selectors.BaseSelector):
    """Registers nothing and polls nothing: `select(timeout)` moves the clock on by `timeout`."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        raise RuntimeError("the simulated loop does no I/O")

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        raise KeyError(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("nothing is ready and nothing is scheduled")
        if timeout > 0:
            self._loop.advance_to_next_timer(timeout)
        return []

    def get_map(self) -> dict[Any, selectors.SelectorKey]:
        return self._map

    def close(self) -> None:
        pass


class VirtualTimeLoop(asyncio.BaseEventLoop):
    """The event loop of a simulation: one thread, virtual time, no I/O."""

    def __init__(self, start_s: float = EPOCH_S) -> None:
        super().__init__()
        self._now = start_s
        self._selector = _TimeOnlySelector(self)
        # Timers due at the same instant run in the order they were made, as on any loop.
        self._clock_resolution = 1e-9
        # Per node, its unfinished tasks in the order they were made (a dict, not a set: a
        # set's order follows addresses, and cancellations must come in the same order).
        self._tasks: dict[int, dict[asyncio.Task[Any], None]] = {}

    def create_task(  # type: ignore[override]  # typeshed's loop takes any coroutine-like object
        self, coro: Any, *, name: str | None = None, context: Any = None
    ) -> asyncio.Task[Any]:
        task = super().create_task(coro, name=name, context=context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None:
            tasks = self._tasks.setdefault(node, {})
            tasks[task] = None
            task.add_done_callback(lambda t: tasks.pop(t, None))
        return task

    def kill(self, node: int) -> None:
        """Cancel every task of `node`: what a process killed mid-way leaves undone."""
        for task in list(self._tasks.pop(node, {})):
            task.cancel()

    def time(self) -> float:
        return self._now

    def advance_to_next_timer(self, timeout: float) -> None:
        """Move the clock to when the earliest timer is due (at least `timeout` on)."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        due = scheduled[0].when() if scheduled else self._now + timeout
        self._now = max(self._now + timeout, due)

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        # Nothing to wake: the loop never sleeps on I/O.
        pass

    def close(self) -> None:
        super().close()
        self._selector.close()


class SimClock:
    """The Clock port on the simulated loop's virtual time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def monotonic(self) -> float:
        return self._loop.time()

    def wall_ms(self) -> int:
        return WALL_AT_EPOCH_MS + round((self._loop.time() - EPOCH_S) * 1000)

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self._loop.call_later(max(delay_s, 0.0), callback)


def run_simulated(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh virtual-time loop, then close the loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        _cancel_remaining(loop)
        loop.close()


def _cancel_remaining(loop: VirtualTimeLoop) -> None:
    """Cancel what is still running (fetchers, senders of brokers left up) and let it end."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


__all__ = ["NODE", "Deadlock", "SimClock", "VirtualTimeLoop", "run_simulated"]
