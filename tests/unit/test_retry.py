"""The one retry policy (backoff with jitter), retriable errors as a property of the error
class, and the one connection pool, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from actors.base.retry import Retry, retrying
from tests.support import ManualClock, eventually
from wire.api import ApiVersionsRequest, ApiVersionsResponse, Response
from wire.endpoint import Endpoint, parse_bootstrap
from wire.envelope import ParsedRequest
from wire.errors import (
    ErrorCode,
    FrameError,
    NetworkException,
    NotController,
    NotLeaderOrFollower,
    StaleBrokerEpoch,
    WireError,
    is_retriable,
)
from wire.pool import ConnectionPool
from wire.retry import Backoff
from wire.server import RpcServer


async def answer(request: ParsedRequest) -> Response:
    return ApiVersionsResponse()


@pytest.fixture
async def server() -> AsyncIterator[RpcServer]:
    server = RpcServer(answer, "127.0.0.1", 0, max_frame_size=1024)
    await server.start()
    yield server
    await server.close()


def test_backoff_grows_to_its_ceiling_and_resets() -> None:
    backoff = Backoff(0.1, 1.0, jitter=0.0)
    assert [round(backoff.next_delay(), 3) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.1)


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 0.08), (0.5, 0.1), (1.0, 0.12)])
def test_backoff_jitter_spreads_each_pause(rand: float, expected: float) -> None:
    assert Backoff(0.1, 1.0, jitter=0.2, rand=lambda: rand).next_delay() == pytest.approx(expected)


def test_backoff_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(2.0, 1.0)


def test_retriable_is_the_error_class_property() -> None:
    assert NotLeaderOrFollower().retriable and NetworkException().retriable and NotController().retriable
    assert not StaleBrokerEpoch().retriable
    assert not FrameError().retriable, "a broken byte stream is not cured by sending again"
    assert is_retriable(ErrorCode.NOT_ENOUGH_REPLICAS) and is_retriable(ErrorCode.LEADER_NOT_AVAILABLE)
    assert not is_retriable(ErrorCode.TOPIC_ALREADY_EXISTS) and not is_retriable(12345)


def test_bootstrap_and_listener_parsing() -> None:
    assert parse_bootstrap("a:1, [::1]:2") == [Endpoint.plaintext("a", 1), Endpoint.plaintext("::1", 2)]
    for bad in ("a", "a:x", "a:70000", " , "):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)
    listener = Endpoint.parse_listener("internal://:9093", {"INTERNAL": "PLAINTEXT"})
    assert listener == Endpoint("INTERNAL", "PLAINTEXT", "", 9093)
    assert str(Endpoint.plaintext("h", 1)) == "PLAINTEXT://h:1"


async def test_pool_reuses_a_connection_and_reconnects_after_a_drop(server: RpcServer) -> None:
    endpoint = Endpoint.plaintext("127.0.0.1", server.port)
    pool = ConnectionPool(client_id="t", request_timeout=5, connect_timeout=5)
    try:
        first = await pool.get(endpoint)
        assert await pool.get(endpoint) is first
        assert isinstance(await pool.send(endpoint, ApiVersionsRequest()), ApiVersionsResponse)
        await first.close()
        second = await pool.get(endpoint)
        assert second is not first and not second.closed
    finally:
        await pool.close()


async def test_pool_drops_the_connection_on_a_wire_error() -> None:
    pool = ConnectionPool(client_id="t", request_timeout=1, connect_timeout=1)
    nobody = Endpoint.plaintext("127.0.0.1", 1)
    with pytest.raises(NetworkException, match="cannot connect"):
        await pool.send(nobody, ApiVersionsRequest())
    await pool.close()


# --- waiting between attempts, on the Clock port (actors/base/retry.py) ---


def fixed(delay_s: float) -> Backoff:
    return Backoff(delay_s, delay_s, multiplier=1, jitter=0)


async def test_a_pause_waits_for_the_clock_not_for_real_time() -> None:
    clock = ManualClock()
    paused = asyncio.create_task(Retry(clock, fixed(5.0)).pause())
    await eventually(lambda: asyncio.sleep(0, clock.pending() == [5.0]), timeout=2, message="no pause")
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not paused.done(), "woken before its time"
    clock.advance(0.1)
    assert await asyncio.wait_for(paused, 2) is True


async def test_a_pause_that_would_pass_the_deadline_is_not_taken() -> None:
    clock = ManualClock()
    retry = Retry(clock, fixed(1.0), timeout_s=2.5)
    for _ in range(2):
        pause = asyncio.create_task(retry.pause())
        await eventually(lambda: asyncio.sleep(0, bool(clock.pending())), timeout=2, message="no pause")
        clock.advance(1.0)
        assert await pause
    assert retry.remaining_s() == pytest.approx(0.5)
    assert await retry.pause() is False, "a third pause would end past the deadline"
    assert clock.pending() == [], "nothing was scheduled for it"


async def test_retrying_tries_again_after_retriable_errors_only() -> None:
    clock = ManualClock()
    failures: list[int] = []
    outcomes: list[Exception | str] = [NotController("moved"), NotController("moved"), "done"]

    async def attempt() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async with paused_time(clock):
        result = await retrying(
            attempt,
            Retry(clock, fixed(1.0)),
            retriable=lambda e: isinstance(e, WireError) and e.retriable,
            on_failure=lambda e, n: failures.append(n),
        )
        assert (result, failures) == ("done", [1, 2])
        with pytest.raises(StaleBrokerEpoch):
            await retrying(
                lambda: _raise(StaleBrokerEpoch("old")),
                Retry(clock, fixed(1.0)),
                retriable=lambda e: isinstance(e, WireError) and e.retriable,
            )


async def test_retrying_raises_the_last_error_once_the_deadline_leaves_no_time() -> None:
    clock = ManualClock()
    attempts = 0

    async def attempt() -> None:
        nonlocal attempts
        attempts += 1
        clock.advance(1.0)  # each attempt takes a second
        raise NotController("no controller yet")

    async with paused_time(clock):
        with pytest.raises(NotController):
            await retrying(attempt, Retry(clock, fixed(0.5), timeout_s=3.0), retriable=lambda e: True)
    # At 1 s the first fails and pauses to 1.5 s; the second fails at 2.5 s, and a pause
    # would end at the deadline.
    assert attempts == 2


@contextlib.asynccontextmanager
async def paused_time(clock: ManualClock) -> AsyncIterator[None]:
    """Moves `clock` to each pause's end as soon as one is taken."""

    async def drive() -> None:
        while True:
            await asyncio.sleep(0)
            if clock.pending():
                clock.advance(clock.pending()[0])

    driver = asyncio.create_task(drive())
    try:
        yield
    finally:
        driver.cancel()


async def _raise(error: Exception) -> None:
    raise error
