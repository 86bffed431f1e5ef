"""Simulated time: an asyncio event loop whose clock is virtual and which never blocks.

When no callback is ready, the loop moves its clock straight to the next timer instead of
waiting for it, so an hour of timeouts, retries and long polls runs in a blink, and the order
of everything that happens depends only on the code and the seed, never on the machine.
`asyncio.sleep`, `wait_for` and `loop.call_later` all run on it unchanged; `SimClock` is the
`Clock` port (actors/base/clock.py) over the same virtual time, for the actors that take one.

There is no I/O: the selector is a stand-in that only advances time. A loop with nothing
ready and nothing scheduled would wait forever; here that is a bug in the simulation, and it
raises `Deadlock`.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import heapq
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


# BaseEventLoop's thresholds for rebuilding the timers' heap without the cancelled ones, and
# its longest wait in the selector (the clock moves at most this far in one turn).
_MIN_SCHEDULED_TIMERS = 100
_MAX_CANCELLED_SHARE = 0.5
_MAXIMUM_SELECT_TIMEOUT = 24 * 3600
# Finished tasks are swept from the per-node registry after this many more are made.
_SWEEP_EVERY = 1000


class Deadlock(RuntimeError):
    """Nothing is ready and nothing is scheduled: the simulation can never move again."""


class _TimeOnlySelector(selectors.BaseSelector):
    """Registers nothing and polls nothing: the loop never waits on I/O (`_run_once` below
    moves its clock itself rather than asking a selector to sleep)."""

    def __init__(self) -> None:
        self._map: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        raise RuntimeError("the simulated loop does no I/O")

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        raise KeyError(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return []

    def get_map(self) -> dict[Any, selectors.SelectorKey]:
        return self._map

    def close(self) -> None:
        pass


class _Handle(asyncio.Handle):
    """A callback to run soon, made without asking the loop for its debug mode (a run makes
    tens of thousands of these per simulated second, and the loop never runs in debug)."""

    __slots__ = ()

    def __init__(
        self,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context | None,
    ) -> None:
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None


class _Timer(asyncio.TimerHandle):
    """A callback due at a time, made as `_Handle` is."""

    __slots__ = ()

    def __init__(
        self,
        when: float,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context | None,
    ) -> None:
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None
        self._when = when
        self._scheduled = False


class VirtualTimeLoop(asyncio.BaseEventLoop):
    """The event loop of a simulation: one thread, virtual time, no I/O.

    It runs callbacks and timers exactly as `asyncio.BaseEventLoop` does (the same FIFO of
    ready callbacks, the same heap of timers, the same clean-up of cancelled ones), so a seed
    takes the same course; only the work around them is leaner. The timers' heap holds
    `(when, timer)` pairs, compared on `when` in C; two timers due at the same instant compare
    as `TimerHandle`s do (neither is less), so the heap orders them as the stock loop would.
    """

    def __init__(self, start_s: float = EPOCH_S) -> None:
        super().__init__()
        self._now = start_s
        self._selector = _TimeOnlySelector()
        # Timers due at the same instant run in the order the heap gives them, as on any loop.
        self._clock_resolution = 1e-9
        # Per node, its tasks in the order they were made (a dict, not a set: a set's order
        # follows addresses, and cancellations must come in the same order). Finished ones
        # are swept out now and then rather than each by a done callback.
        self._tasks: dict[int, dict[asyncio.Task[Any], None]] = {}
        self._tasks_made = 0
        self._sweep_at = _SWEEP_EVERY

    # --- scheduling (BaseEventLoop's, without the debug checks) ---

    def call_soon(  # type: ignore[override]  # the same signature, typeshed's is narrower
        self, callback: Callable[..., object], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        timer = _Timer(when, callback, args, self, context)
        heapq.heappush(self._scheduled, (when, timer))
        timer._scheduled = True
        return timer

    def create_task(  # type: ignore[override]  # typeshed's loop takes any coroutine-like object
        self, coro: Any, *, name: str | None = None, context: Any = None
    ) -> asyncio.Task[Any]:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=self, name=name, context=context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None:
            self._tasks.setdefault(node, {})[task] = None
            self._tasks_made += 1
            if self._tasks_made >= self._sweep_at:
                self._sweep_finished_tasks()
        return task

    def _sweep_finished_tasks(self) -> None:
        for node, tasks in self._tasks.items():
            self._tasks[node] = {t: None for t in tasks if not t.done()}
        self._tasks_made = sum(len(tasks) for tasks in self._tasks.values())
        self._sweep_at = self._tasks_made + _SWEEP_EVERY

    def kill(self, node: int) -> None:
        """Cancel every task of `node`: what a process killed mid-way leaves undone."""
        for task in list(self._tasks.pop(node, {})):
            task.cancel()

    def time(self) -> float:
        return self._now

    # --- one turn of the loop ---

    def _run_once(self) -> None:
        """`BaseEventLoop._run_once` on virtual time: where that one would wait in its
        selector for the earliest timer, this one moves the clock to it."""
        scheduled: list[tuple[float, asyncio.TimerHandle]] = self._scheduled  # type: ignore[has-type]
        ready: collections.deque[asyncio.Handle] = self._ready  # type: ignore[attr-defined]
        count = len(scheduled)
        cancelled: int = self._timer_cancelled_count  # type: ignore[has-type]
        if count > _MIN_SCHEDULED_TIMERS and cancelled / count > _MAX_CANCELLED_SHARE:
            # Many cancelled timers (long polls answered early): rebuild the heap without them.
            kept = []
            for entry in scheduled:
                if entry[1]._cancelled:
                    entry[1]._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            self._scheduled = scheduled = kept
            self._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][1]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(scheduled)[1]._scheduled = False  # type: ignore[attr-defined]

        if not ready and not self._stopping:  # type: ignore[attr-defined]
            if not scheduled:
                raise Deadlock("nothing is ready and nothing is scheduled")
            # The stock loop would sleep min(when - now, a day) in its selector; the clock
            # moves on by as much, and at least to the timer.
            when = scheduled[0][0]
            timeout = min(max(0, when - self._now), _MAXIMUM_SELECT_TIMEOUT)
            if timeout > 0:
                self._now = max(self._now + timeout, when)

        end_time = self._now + self._clock_resolution
        while scheduled:
            if scheduled[0][0] >= end_time:
                break
            timer = heapq.heappop(scheduled)[1]
            timer._scheduled = False  # type: ignore[attr-defined]
            ready.append(timer)

        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()

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
