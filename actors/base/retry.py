"""Waiting to try again, one way for every sender and client: the pauses of
`wire.retry.Backoff` (Kafka's `retry.backoff.ms` growing to `retry.backoff.max.ms`, with
jitter), taken on the `Clock` port so that a test's or a simulation's clock drives every wait,
and bounded by one deadline for the whole operation, retries included.

A pause that would pass the deadline is not taken: the attempts end there, as Kafka's admin
client and controlled shutdown end theirs, rather than waking after the caller gave up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from actors.base.clock import Clock, SystemClock
from wire.retry import Backoff

T = TypeVar("T")


async def sleep(clock: Clock, delay_s: float) -> None:
    """Pause for `delay_s` on `clock`: real time on the system clock, hand-driven time on a
    test's or a simulation's."""
    if delay_s <= 0:
        await asyncio.sleep(0)
        return
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    timer = clock.call_later(delay_s, wake)
    try:
        await woken
    finally:
        timer.cancel()


class Retry:
    """The pauses between the attempts of one operation: each longer than the last, none past
    the deadline (`timeout_s` from now; None: no deadline, as for a controller's sender that
    retries until the broker answers or is removed)."""

    def __init__(
        self, clock: Clock | None = None, backoff: Backoff | None = None, *, timeout_s: float | None = None
    ) -> None:
        self.clock = clock or SystemClock()
        self.backoff = backoff or Backoff()
        self.deadline = None if timeout_s is None else self.clock.monotonic() + timeout_s
        self.failures = 0

    def remaining_s(self) -> float | None:
        """Seconds left before the deadline (at least 0), None without one."""
        return None if self.deadline is None else max(self.deadline - self.clock.monotonic(), 0.0)

    async def pause(self) -> bool:
        """After a failed attempt: wait before the next one and say True, or say False at once
        when the pause would pass the deadline (no time is left for another attempt)."""
        self.failures += 1
        delay = self.backoff.next_delay()
        left = self.remaining_s()
        if left is not None and delay >= left:
            return False
        await sleep(self.clock, delay)
        return True

    def succeeded(self) -> None:
        """After an attempt that worked: the next failure starts from the shortest pause."""
        self.failures = 0
        self.backoff.reset()


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    retry: Retry,
    *,
    retriable: Callable[[Exception], bool],
    on_failure: Callable[[Exception, int], None] | None = None,
) -> T:
    """`attempt()` until it returns. A retriable error is reported to `on_failure` (with the
    count of failures so far) and tried again after `retry.pause()`; any other error, or a
    retriable one once the deadline leaves no time, is raised."""
    while True:
        try:
            result = await attempt()
        except Exception as e:
            if not retriable(e):
                raise
            if on_failure is not None:
                on_failure(e, retry.failures + 1)
            if not await retry.pause():
                raise
            continue
        retry.succeeded()
        return result
