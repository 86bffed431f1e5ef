"""The event loop's lag: measured on a real loop held on purpose by a blocking call of known
length, kept as a maximum over the last minute, exported under its name, and logged past the
threshold at most once per interval."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import uvloop
from prometheus_client import generate_latest

from node.metrics.http import registry_of
from node.metrics.loop_lag import LAG_MAX, LoopLagMonitor, WindowedMax

_INTERVAL_S = 0.005
_HOLD_S = 0.3
# The least a hold is measured as: less one interval (it may begin just after a tick), and
# less the clock's resolution (uvloop's loop time counts whole milliseconds).
_LEAST_S = _HOLD_S - _INTERVAL_S - 0.002


async def _until(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(_INTERVAL_S)


async def _measured_hold() -> float:
    monitor = LoopLagMonitor(interval_s=_INTERVAL_S, warn_threshold_s=10)
    monitor.start()
    try:
        # A tick has run, so the next is due within one interval of the hold's start.
        await _until(lambda: len(monitor._lag._buckets) > 0, 5, "the first tick")
        time.sleep(_HOLD_S)  # noqa: ASYNC251 (holds the loop on purpose, as a long step would)
        await _until(lambda: monitor.max_lag_s() >= _LEAST_S, 5, "the hold to be measured")
        return monitor.max_lag_s()
    finally:
        monitor.stop()


async def test_a_blocked_loop_is_measured_at_least_as_long_as_it_was_held() -> None:
    lag = await _measured_hold()
    # At least the hold less one interval (it may have begun just after a tick); the upper bound
    # only allows for a loaded machine.
    assert _LEAST_S <= lag < _HOLD_S + 1.0


def test_the_brokers_loop_measures_a_hold_too() -> None:
    lag = uvloop.run(_measured_hold())  # brokers and the planner run on uvloop
    assert _LEAST_S <= lag < _HOLD_S + 1.0


def test_the_maximum_covers_the_last_minute_only() -> None:
    monitor = LoopLagMonitor()
    monitor.record(0.9, now=10.2)
    monitor.record(0.1, now=40.0)
    assert monitor.max_lag_s(now=60.0) == pytest.approx(0.9)
    assert monitor.max_lag_s(now=70.5) == pytest.approx(0.1)
    monitor.record(0.05, now=101.0)
    assert monitor.max_lag_s(now=101.0) == pytest.approx(0.05)
    assert len(monitor._lag._buckets) == 1


def test_a_long_hold_is_logged_once_per_interval_with_what_came_since(
    caplog: pytest.LogCaptureFixture,
) -> None:
    collections = WindowedMax()
    monitor = LoopLagMonitor(warn_threshold_s=0.5, warn_every_s=10, collections=collections)
    with caplog.at_level(logging.WARNING, logger="node.metrics.loop_lag"):
        monitor.record(0.6, now=100.0)
        collections.record(0.42)
        monitor.record(0.7, now=101.0)
        monitor.record(0.4, now=102.0)  # under the threshold: not counted
        monitor.record(0.55, now=111.0)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("the event loop was held for 600 ms (1 time(s) over 500 ms")
    assert lines[1].startswith("the event loop was held for 550 ms (2 time(s) over 500 ms")
    assert "the longest 700 ms" in lines[1]
    # Which holds the collector made: none before the first line, 420 ms by the second.
    assert "the garbage collector's longest collection in the last minute 0 ms" in lines[0]
    assert "the garbage collector's longest collection in the last minute 420 ms" in lines[1]


def test_the_maximum_is_exported_under_its_name() -> None:
    monitor = LoopLagMonitor()
    monitor.record(0.25, now=time.monotonic())
    text = generate_latest(registry_of(monitor)).decode()
    assert f"{LAG_MAX} " in text
    (line,) = [line for line in text.splitlines() if line.startswith(f"{LAG_MAX} ")]
    assert float(line.split()[1]) == pytest.approx(0.25)
