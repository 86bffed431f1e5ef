"""How long something held the process's event loop: its lag, measured and exported.

Everything a broker or the planner does runs on one asyncio loop, and so does its ZooKeeper
session: aiozk sends its heartbeats from that loop, and reads ZooKeeper's answers there. A
step that holds the loop for seconds holds the session too, and ZooKeeper expires a session
it has not heard from within `zookeeper.session.timeout.ms` (Kafka's JVM runs its ZooKeeper
client on threads of its own, so a long controller step there does not). Each process
therefore measures the lag: a callback asks to run every `interval_s`, and how late it runs
is how long the loop was held (less at most one interval: the hold may have begun just after
a run).

The most over the last minute is exported as `keel_eventloop_lag_max_seconds` (the name
Prometheus's Node.js clients give the same gauge, under Keel's prefix), and a lag past the
threshold is logged, one line at most every `warn_every_s`, with how many holds that long
came since the last line.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from node.metrics.names import Exposition

log = logging.getLogger(__name__)

LAG_MAX = "keel_eventloop_lag_max_seconds"
GC_PAUSE_MAX = "keel_gc_pause_max_seconds"

# Often enough that a hold is measured to within 20 ms; cheap enough (50 callbacks a second)
# to run in every process all the time.
DEFAULT_INTERVAL_S = 0.02
# The window of the exported maximum, and its buckets: a maximum per second of the window.
WINDOW_S = 60.0
# A hold this long is a twelfth of a 6 s session timeout: worth a line in server.log.
DEFAULT_WARN_THRESHOLD_S = 0.5
DEFAULT_WARN_EVERY_S = 10.0


class WindowedMax:
    """The most of the values recorded over the last `window_s` seconds: a maximum per second,
    oldest first."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._buckets: collections.deque[list[float]] = collections.deque()

    def record(self, value: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        second = float(int(now))
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] = max(buckets[-1][1], value)
        else:
            buckets.append([second, value])
        while buckets and buckets[0][0] <= now - self._window_s:
            buckets.popleft()

    def max(self, now: float | None = None) -> float:
        """0 with nothing recorded in the window."""
        horizon = (time.monotonic() if now is None else now) - self._window_s
        return max((value for second, value in self._buckets if second > horizon), default=0.0)


# The garbage collector's collections, each of which holds the loop for as long as it runs
# (node/broker/gc_tuning.py records them; a process that does not tune it records none).
COLLECTIONS = WindowedMax()


class LoopLagMonitor(Collector):
    """Started on the process's running loop (`start`), stopped with it (`stop`); also the
    collector of the process's registry for its one gauge."""

    def __init__(
        self,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        window_s: float = WINDOW_S,
        warn_threshold_s: float = DEFAULT_WARN_THRESHOLD_S,
        warn_every_s: float = DEFAULT_WARN_EVERY_S,
        collections: WindowedMax = COLLECTIONS,
    ) -> None:
        """`collections`: the garbage collector's collections, whose longest over the last
        minute each warning names, so that a hold the collector made shows as such."""
        self._collections = collections
        self._interval_s = interval_s
        self._warn_threshold_s = warn_threshold_s
        self._warn_every_s = warn_every_s
        self._lag = WindowedMax(window_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._last_warning: float | None = None
        self._over_since_warning = 0
        self._worst_since_warning = 0.0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._schedule(self._loop.time())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + self._interval_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.record(max(0.0, now - self._due), now)
        self._schedule(now)

    def record(self, lag_s: float, now: float) -> None:
        """One measured lag at `now` (the loop's clock)."""
        self._lag.record(lag_s, now)
        if lag_s >= self._warn_threshold_s:
            self._warn(lag_s, now)

    def _warn(self, lag_s: float, now: float) -> None:
        self._over_since_warning += 1
        self._worst_since_warning = max(self._worst_since_warning, lag_s)
        if self._last_warning is not None and now - self._last_warning < self._warn_every_s:
            return
        log.warning(
            "the event loop was held for %.0f ms (%d time(s) over %.0f ms since the last such line, "
            "the longest %.0f ms; the garbage collector's longest collection in the last minute "
            "%.0f ms): ZooKeeper heartbeats and requests waited as long",
            lag_s * 1000,
            self._over_since_warning,
            self._warn_threshold_s * 1000,
            self._worst_since_warning * 1000,
            self._collections.max() * 1000,
        )
        self._last_warning = now
        self._over_since_warning = 0
        self._worst_since_warning = 0.0

    def max_lag_s(self, now: float | None = None) -> float:
        """The most lag measured over the last window (0 with none); `now` on the loop's clock
        (asyncio's is `time.monotonic`'s)."""
        if now is None:
            now = self._loop.time() if self._loop is not None else time.monotonic()
        return self._lag.max(now)

    def export(self, out: Exposition) -> None:
        out.keel_gauge(
            LAG_MAX,
            "The longest the event loop ran a periodic check late over the last minute: how long "
            "one step held the loop, ZooKeeper heartbeats included",
            self.max_lag_s(),
        )
        out.keel_gauge(
            GC_PAUSE_MAX,
            "The longest collection of the cyclic garbage collector over the last minute: it "
            "holds the event loop as long",
            self._collections.max(),
        )

    def collect(self) -> Iterator[Metric]:
        out = Exposition()
        self.export(out)
        return out.families()
