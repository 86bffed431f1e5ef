"""zookeeper.max.in.flight.requests: a bulk read or write keeps at most its window of requests
outstanding, starts each in a turn of the loop of its own, answers in order, and ends at the
first failure as `asyncio.gather` does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from node.zk.in_flight import windowed


class _Requests:
    """Requests answered when the test says so, counting how many are outstanding."""

    def __init__(self) -> None:
        self.outstanding = 0
        self.most = 0
        self.started: list[int] = []
        self.answers: dict[int, asyncio.Future[int]] = {}

    def call(self, n: int) -> Callable[[], Awaitable[int]]:
        async def request() -> int:
            self.started.append(n)
            self.outstanding += 1
            self.most = max(self.most, self.outstanding)
            self.answers[n] = asyncio.get_running_loop().create_future()
            try:
                return await self.answers[n]
            finally:
                self.outstanding -= 1

        return request

    def answer(self, n: int, value: int | None = None, error: Exception | None = None) -> None:
        if error is not None:
            self.answers[n].set_exception(error)
        else:
            self.answers[n].set_result(n * 10 if value is None else value)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_at_most_the_window_is_outstanding_and_answers_come_in_order() -> None:
    requests = _Requests()
    run = asyncio.create_task(windowed((requests.call(n) for n in range(25)), 10))
    await _until(lambda: len(requests.started) == 10)
    assert requests.outstanding == 10
    # Answered out of order: each answer lets one more start.
    for n in reversed(range(10)):
        requests.answer(n)
    await _until(lambda: len(requests.started) == 20)
    for n in range(10, 25):
        await _until(lambda n=n: n in requests.answers)  # type: ignore[misc]
        requests.answer(n)
    assert await run == [n * 10 for n in range(25)]
    assert requests.most == 10


async def test_each_start_has_a_turn_of_the_loop_of_its_own() -> None:
    requests = _Requests()
    run = asyncio.create_task(windowed((requests.call(n) for n in range(3)), 10))
    turns = 0
    while len(requests.started) < 3:
        await asyncio.sleep(0)
        turns += 1
    assert turns >= 3
    for n in range(3):
        requests.answer(n)
    assert await run == [0, 10, 20]


async def test_the_first_failure_ends_the_operation_and_nothing_more_starts() -> None:
    requests = _Requests()
    run = asyncio.create_task(windowed((requests.call(n) for n in range(30)), 2))
    await _until(lambda: len(requests.started) == 2)
    requests.answer(0, error=RuntimeError("refused"))
    with pytest.raises(RuntimeError, match="refused"):
        await run
    assert requests.started == [0, 1]
    # The one started goes on, and its own failure is not left unretrieved.
    requests.answer(1, error=RuntimeError("later"))
    await _until(lambda: requests.outstanding == 0)


async def test_an_empty_operation_answers_nothing() -> None:
    assert await windowed((), 10) == []
