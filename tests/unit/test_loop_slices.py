"""Long work in slices: the loop turns once the work has held it for the budget, and not
before; a pass of one slice never yields; on the simulation's virtual time, which stands still
while a step runs, nothing yields at all."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

from actors.base import loop_slices
from actors.base.loop_slices import BUDGET_S, SLICE, sliced, turn_if_held
from node.sim.loop import VirtualTimeLoop
from tests.support import turns_while


async def _count_turns_during(work) -> int:  # type: ignore[no-untyped-def]
    """How many times another task ran while `work` (a coroutine) did."""
    return (await turns_while(work))[1]


def _hold(seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


async def test_a_pass_that_holds_the_loop_past_the_budget_lets_it_turn() -> None:
    async def work() -> None:
        async for _ in sliced(list(range(10)), 1):
            _hold(BUDGET_S)  # each slice takes the whole budget

    assert await _count_turns_during(work()) >= 5


async def test_a_pass_shorter_than_the_budget_does_not_yield(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget no pass here can reach, however the machine schedules this process.
    monkeypatch.setattr(loop_slices, "BUDGET_S", 60.0)

    async def work() -> None:
        async for _ in sliced(list(range(10_000)), 100):
            pass

    assert await _count_turns_during(work()) == 0


async def test_a_single_slice_never_yields() -> None:
    async def work() -> None:
        async for part in sliced(list(range(5)), 10):
            assert list(part) == [0, 1, 2, 3, 4]
            _hold(BUDGET_S * 2)

    assert await _count_turns_during(work()) == 0


async def test_slices_cover_every_item_in_order() -> None:
    seen: list[int] = []
    async for part in sliced(list(range(1234)), 100):
        seen += part
    assert seen == list(range(1234))


def test_virtual_time_never_yields() -> None:
    async def work() -> int:
        async def held() -> None:
            for _ in range(20):
                _hold(BUDGET_S / 4)
                await turn_if_held()

        return await _count_turns_during(held())

    loop = VirtualTimeLoop()
    try:
        assert loop.run_until_complete(work()) == 0
    finally:
        loop.close()


def test_a_loop_that_was_sliced_is_not_kept_once_dropped() -> None:
    """The map of each loop's turns is keyed weakly, and what it holds for a loop must not
    reference the loop: else every loop (one per seed of the simulation, one per test) and
    all it references stayed for good, about 0.9 MB a seed."""

    async def slices() -> None:
        async for _ in sliced(list(range(3 * SLICE)), SLICE):
            await turn_if_held()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(slices())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None, "the loop outlived its last reference"
