"""Kafka's `queued.max.request.bytes` (its MemoryPool): the bytes of requests read and not yet
answered, over every connection of a process. Past the limit a connection reads no more (it is
muted) until other requests are answered and their bytes released. A frame larger than the
whole pool is let in alone. -1, Kafka's default, is no limit: then each connection holds at
most one frame (`socket.request.max.bytes`) and the read that brought it.
"""

from __future__ import annotations

import asyncio

NO_LIMIT = -1


class RequestMemoryPool:
    def __init__(self, max_bytes: int = NO_LIMIT) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        # Connections waiting for room, muted meanwhile.
        self.waiting = 0
        self._released: asyncio.Event | None = None

    async def reserve(self, size: int) -> int:
        """Wait until `size` bytes fit (or the pool is empty), then hold them; what is held,
        for `release`."""
        if self.max_bytes < 0 or size <= 0:
            return 0
        size = min(size, self.max_bytes)
        while self.used and self.used + size > self.max_bytes:
            if self._released is None:
                self._released = asyncio.Event()
            released = self._released
            self.waiting += 1
            try:
                await released.wait()
            finally:
                self.waiting -= 1
        self.used += size
        return size

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        if self._released is not None:
            # Every waiter looks again; the next release makes a new event.
            self._released.set()
            self._released = None


class HeldRequestBytes:
    """What one connection holds of the pool: the frame it is reading, until it is parsed.
    As Kafka releases a request's buffer once its handler returns (a delayed produce waits in
    purgatory, its buffer released), Keel releases it once the request is parsed: an acks=all
    produce that held its bytes while it waits for the followers would keep out their fetches
    once the pool is full, and wait for ever."""

    def __init__(self, pool: RequestMemoryPool) -> None:
        self._pool = pool
        self.held = 0

    async def hold(self, size: int) -> None:
        if self._pool.max_bytes >= 0:
            size = min(size, self._pool.max_bytes)  # a frame larger than the pool: the pool
        if size > self.held:
            self.held += await self._pool.reserve(size - self.held)

    def release(self) -> None:
        self._pool.release(self.held)
        self.held = 0
