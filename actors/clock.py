"""The clock port: actors ask it for time instead of reading the wall clock, so tests can
drive time by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch, for timestamps written to ZooKeeper."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000
