"""The one lifecycle of long-running work (actors/base/service.py), on the simulation's
virtual loop so that periods pass at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from actors.base.service import Periodic, Service, Worker
from node.sim.loop import run_simulated


class _Counting(Service):
    def __init__(self) -> None:
        super().__init__("counting")
        self.rounds = 0
        self.ended = False

    async def run(self) -> None:
        try:
            while True:
                self.rounds += 1
                await asyncio.sleep(1)
        finally:
            self.ended = True


def test_a_service_runs_from_start_until_stop_which_waits_for_it_to_end() -> None:
    async def main() -> None:
        service = _Counting()
        assert not service.running
        service.start()
        service.start()  # once only
        await asyncio.sleep(2.5)
        assert service.running and service.rounds == 3
        await service.stop()
        assert service.ended and not service.running and service.stopped
        await service.stop()  # again: nothing to do
        await asyncio.sleep(5)
        assert service.rounds == 3

    run_simulated(main())


def test_a_service_stopped_before_it_started_never_runs() -> None:
    async def main() -> None:
        service = _Counting()
        await service.stop()
        service.start()
        await asyncio.sleep(1)
        assert service.rounds == 0 and not service.running

    run_simulated(main())


def test_a_service_whose_work_ends_or_fails_is_no_longer_running_and_a_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def done() -> None:
        return None

    async def fails() -> None:
        raise RuntimeError("out of luck")

    async def main() -> None:
        finished, failed = Worker("finished", done), Worker("failed", fails)
        finished.start()
        failed.start()
        await asyncio.sleep(0.1)
        assert not finished.running and not failed.running

    with caplog.at_level(logging.ERROR, logger="actors.base.service"):
        run_simulated(main())
    assert [r.getMessage() for r in caplog.records] == ["failed ended by an error"]


def test_periodic_work_runs_after_each_pause_and_a_failed_run_is_followed_by_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[float] = []

    async def work() -> None:
        runs.append(asyncio.get_running_loop().time())
        if len(runs) == 2:
            raise OSError("disk hiccup")

    async def main() -> None:
        start = asyncio.get_running_loop().time()
        job = Periodic("checkpoint", 10.0, work)
        job.start()
        await asyncio.sleep(35)
        await job.stop()
        assert [round(t - start) for t in runs] == [10, 20, 30]

    with caplog.at_level(logging.ERROR, logger="actors.base.service"):
        run_simulated(main())
    assert [r.getMessage() for r in caplog.records] == ["periodic checkpoint failed"]


def test_a_caller_cancelled_while_it_waits_for_a_stop_is_cancelled_still() -> None:
    """A timeout around `stop` ends the wait: the service's own cancellation is not the
    caller's to swallow."""

    class SlowToStop(Service):
        async def run(self) -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(5)  # a slow clean-up
                raise

    async def main() -> None:
        service = SlowToStop("slow")
        service.start()
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1):
                await service.stop()
        assert loop.time() - started == pytest.approx(1)

    run_simulated(main())
