"""The chaos workload's Kafka producer and group members are replaced whatever aiokafka's
stop() does: returns, never returns, or raises (a CancelledError of its own included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from node.chaos import kafka_clients


class _Accumulator:
    def __init__(self) -> None:
        self.failed_with: BaseException | None = None

    def fail_all(self, exception: BaseException) -> None:
        self.failed_with = exception


class _Client:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class _Stoppable:
    """`stop` waits for `answered`, as aiokafka's waits for a produce request or a LeaveGroup
    a broker leaves unanswered, then closes the connections."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.connections = _Client()
        self.answered = asyncio.Event()
        self.raises = raises

    async def stop(self) -> None:
        if self.raises is not None:
            raise self.raises
        await self.answered.wait()
        await self.connections.close()


class _Producer(_Stoppable):
    """What `_close_producer` touches of an AIOKafkaProducer."""

    def __init__(self, raises: BaseException | None = None) -> None:
        super().__init__(raises)
        self._message_accumulator = _Accumulator()
        self.client = self.connections


class _Consumer(_Stoppable):
    """What `_close_consumer` touches of an AIOKafkaConsumer."""

    def __init__(self, raises: BaseException | None = None) -> None:
        super().__init__(raises)
        self._client = self.connections


Close = Callable[[Any], Awaitable[str | None]]
KINDS = [
    pytest.param(_Producer, kafka_clients._close_producer, id="producer"),
    pytest.param(_Consumer, kafka_clients._close_consumer, id="member"),
]


@pytest.mark.parametrize(("kind", "close"), KINDS)
async def test_a_client_that_stops_is_closed(kind: type[_Stoppable], close: Close) -> None:
    client = kind()
    client.answered.set()
    assert await close(client) is None
    assert client.connections.closed


async def test_a_stopped_producers_retried_batches_are_failed_first() -> None:
    producer = _Producer()
    producer.answered.set()
    await kafka_clients._close_producer(producer)
    assert producer._message_accumulator.failed_with is not None


@pytest.mark.parametrize(("kind", "close"), KINDS)
async def test_a_client_whose_stop_hangs_is_left_behind_within_the_bound(
    monkeypatch: pytest.MonkeyPatch, kind: type[_Stoppable], close: Close
) -> None:
    monkeypatch.setattr(kafka_clients, "CLOSE_BOUND_S", 0.05)
    client = kind()
    started = time.monotonic()
    why = await asyncio.wait_for(close(client), 2.0)
    assert why == "not stopped within 0.05 s"
    assert time.monotonic() - started < 1.0
    assert client.connections.closed, "its connections are closed even so"


@pytest.mark.parametrize(("kind", "close"), KINDS)
@pytest.mark.parametrize("raised", [asyncio.CancelledError(), RuntimeError("sender gone")])
async def test_a_client_whose_stop_raises_is_left_behind_and_the_task_goes_on(
    kind: type[_Stoppable], close: Close, raised: BaseException
) -> None:
    client = kind(raises=raised)
    why = await close(client)
    assert why is not None and why.startswith(f"stop() raised {type(raised).__name__}")
    assert client.connections.closed


@pytest.mark.parametrize(("kind", "close"), KINDS)
async def test_a_cancellation_of_the_workloads_own_task_still_ends_it(
    kind: type[_Stoppable], close: Close
) -> None:
    closing = asyncio.ensure_future(close(kind()))
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
