"""The clock port: actors ask it for time instead of reading the wall clock, so tests can
drive time by hand. It also schedules: `call_later` runs a callback once, later, as Kafka's
KafkaScheduler runs the controller's periodic tasks; the callback should only enqueue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, for timestamps written to ZooKeeper."""
        ...

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        """Run `callback` once, `delay_s` seconds from now, unless cancelled first."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(delay_s, callback)
