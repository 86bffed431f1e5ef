"""Kafka's KafkaScheduler for the broker's periodic work (ISR expiration, checkpoints,
retention, flushes, the scrub): each job on its own interval, and a failed run logged and
followed by the next, never the end of the job. The simulation runs the same loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def every(interval_s: float, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` every `interval_s` seconds (after each pause) until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await work()
        except Exception:
            log.exception("periodic %s failed", getattr(work, "__name__", "task"))
