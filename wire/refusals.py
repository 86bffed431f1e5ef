"""Log lines about refused requests and connections, rate-limited per kind: a client that
repeats what is refused, or a crowd of connections, is a few lines, not one each. Pure logic
(the logger and a clock), for the server's shell and the actors alike."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable


class RefusalLog:
    """Warnings about refused or closed connections, rate-limited per kind: at most `burst`
    lines of a kind per `interval_s`; the first line after a quiet spell says how many
    were not logged."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = 5,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._burst = burst
        self._interval_s = interval_s
        self._clock = clock
        self._window: dict[str, tuple[float, int]] = {}  # kind -> (window start, lines logged)
        self._suppressed: Counter[str] = Counter()

    def report(self, kind: str, message: str, *args: object) -> None:
        now = self._clock()
        start, logged = self._window.get(kind, (now, 0))
        if now - start >= self._interval_s:
            start, logged = now, 0
        if logged >= self._burst:
            self._suppressed[kind] += 1
            return
        self._window[kind] = (start, logged + 1)
        suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            message += " (and %d more like it not logged)"
            args = (*args, suppressed)
        self._log.warning(message, *args)
