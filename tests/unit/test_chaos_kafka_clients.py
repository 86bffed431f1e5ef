"""The chaos workload's Kafka producer is replaced whatever aiokafka's stop() does: returns,
never returns, or raises (a CancelledError of its own included)."""

from __future__ import annotations

import asyncio
import time

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


class _Producer:
    """What `_close_producer` touches of an AIOKafkaProducer; `stop` waits for `answered`, as
    aiokafka's does for a produce request a broker leaves unanswered."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self._message_accumulator = _Accumulator()
        self.client = _Client()
        self.answered = asyncio.Event()
        self.raises = raises

    async def stop(self) -> None:
        if self.raises is not None:
            raise self.raises
        await self.answered.wait()
        await self.client.close()


async def test_a_producer_that_stops_is_closed_and_its_batches_failed() -> None:
    producer = _Producer()
    producer.answered.set()
    assert await kafka_clients._close_producer(producer) is None
    assert producer._message_accumulator.failed_with is not None
    assert producer.client.closed


async def test_a_producer_whose_stop_hangs_is_left_behind_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_clients, "CLOSE_BOUND_S", 0.05)
    producer = _Producer()
    started = time.monotonic()
    why = await asyncio.wait_for(kafka_clients._close_producer(producer), 2.0)
    assert why == "not stopped within 0.05 s"
    assert time.monotonic() - started < 1.0
    assert producer.client.closed, "its connections are closed even so"


@pytest.mark.parametrize("raised", [asyncio.CancelledError(), RuntimeError("sender gone")])
async def test_a_producer_whose_stop_raises_is_left_behind_and_the_task_goes_on(
    raised: BaseException,
) -> None:
    producer = _Producer(raises=raised)
    why = await kafka_clients._close_producer(producer)
    assert why is not None and why.startswith(f"stop() raised {type(raised).__name__}")
    assert producer.client.closed


async def test_a_cancellation_of_the_workloads_own_task_still_ends_it() -> None:
    producer = _Producer()
    closing = asyncio.ensure_future(kafka_clients._close_producer(producer))
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
