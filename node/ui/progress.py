"""How far each reassignment in progress has copied, from successive looks at the bytes it
still has to copy (`node/clients/replica_sizes.bytes_to_copy`, the figure `keel reassign
list` shows): the largest figure seen is its total, the drop since then is what was copied,
and the rate is over the last seconds of looks, as the planner's executor measures its own
(`RateWindow`, `seconds_left`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from node.planner.moves import RateWindow, seconds_left

# Seconds of looks the rate is measured over: long enough to smooth one look's noise, short
# enough that a throttle change shows within a few seconds.
RATE_WINDOW_S = 10.0

Partition = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class CopyProgress:
    copied: int
    total: int
    rate: float | None
    seconds_left: float | None

    @property
    def fraction(self) -> float:
        return 1.0 if self.total <= 0 else min(1.0, self.copied / self.total)


@dataclasses.dataclass
class _Tracked:
    total: int
    window: RateWindow


class ProgressTracker:
    """Progress per reassigning partition; a partition no longer reassigning is forgotten,
    so one reassigned again starts from its new total."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self._window_s = window_s
        self._tracked: dict[Partition, _Tracked] = {}

    def observe(self, remaining: Mapping[Partition, int], now: float) -> dict[Partition, CopyProgress]:
        """`remaining`: each reassigning partition's bytes still to copy, looked at `now`."""
        self._tracked = {tp: t for tp, t in self._tracked.items() if tp in remaining}
        progress = {}
        for tp, left in remaining.items():
            tracked = self._tracked.get(tp)
            if tracked is None:
                tracked = self._tracked[tp] = _Tracked(left, RateWindow(self._window_s))
            tracked.total = max(tracked.total, left)
            copied = tracked.total - left
            tracked.window.add(now, copied)
            rate = tracked.window.rate()
            progress[tp] = CopyProgress(
                copied, tracked.total, rate, seconds_left(tracked.total, copied, rate)
            )
        return progress
