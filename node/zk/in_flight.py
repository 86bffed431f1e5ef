"""Bulk ZooKeeper work with a bounded window in flight: Kafka's
`zookeeper.max.in.flight.requests` (default 10).

A bulk read or write is many requests, each of up to a thousand operations (multiReads of
1,000 reads, multi-ops of 500 partitions). Sent all at once, they are all encoded in one turn
of the event loop, and their answers all parsed in a few more, while the session's heartbeat
waits behind them in ZooKeeper's queue for this session: at 200k partitions that is seconds,
and a session of 6 s expires. Kafka's ZooKeeperClient blocks a request until fewer than
`zookeeper.max.in.flight.requests` are unanswered; here a bulk operation starts its next
request once fewer than that many of its own are, each start (its encoding and send) in a
turn of the loop of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_IN_FLIGHT_REQUESTS = 10


async def windowed(calls: Iterable[Callable[[], Awaitable[T]]], window: int) -> list[T]:
    """Each call's result, in order, with at most `window` of them outstanding. The first
    failure seen is raised and no further call starts, as with `asyncio.gather`: those
    already started finish on their own."""
    started: list[asyncio.Future[T]] = []
    outstanding: set[asyncio.Future[T]] = set()
    for call in calls:
        while len(outstanding) >= window:
            done, outstanding = await asyncio.wait(outstanding, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                future.result()
        future = asyncio.ensure_future(call())
        future.add_done_callback(_retrieve)
        started.append(future)
        outstanding.add(future)
        await asyncio.sleep(0)  # this request's encoding and send in this turn, the next's in the next
    return list(await asyncio.gather(*started))


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A failure after another already ended the operation is not left "never retrieved".
    if not future.cancelled():
        future.exception()
