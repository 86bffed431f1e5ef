"""One retry policy for every client: exponential backoff with jitter (Kafka's
`retry.backoff.ms` growing to `retry.backoff.max.ms`, each pause spread by ±20 %).

Pure: it says how long to pause; the caller sleeps. Whether an error is worth retrying is
the error's own property (`WireError.retriable`, `is_retriable(code)`).
"""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        initial_s: float = 0.1,
        max_s: float = 1.0,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < initial_s <= max_s or multiplier < 1 or not 0 <= jitter < 1:
            raise ValueError("backoff needs 0 < initial <= max, multiplier >= 1, 0 <= jitter < 1")
        self.initial_s = initial_s
        self.max_s = max_s
        self._multiplier = multiplier
        self._jitter = jitter
        self._rand = rand
        self._attempts = 0

    def next_delay(self) -> float:
        """The pause before the next attempt; each call grows the base up to `max_s`."""
        base = min(self.initial_s * self._multiplier**self._attempts, self.max_s)
        self._attempts += 1
        return base * (1 + self._jitter * (2 * self._rand() - 1))

    def reset(self) -> None:
        """After a success the next failure starts from `initial_s` again."""
        self._attempts = 0
