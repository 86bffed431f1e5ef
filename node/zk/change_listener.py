"""Kafka's ZkNodeChangeNotificationListener: follow the sequential notifications under one
path (`<root>/<prefix><seq>`) and hand each one's data to a handler, once, in order.

The children watch only wakes the task that reads, and each pass re-arms it by the listing it
works from (`ZooKeeperClient.watch_children`), so a notification written after that listing
fires it again; a new ZooKeeper session (whose watches are gone) wakes it too, and it catches
up on whatever was written in between. A notification is handled at most once per listener
and only after the ones before it; those older than 15 minutes are deleted (Kafka's
changeExpirationMs), by whichever listener sees them first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from actors.base.clock import Clock
from actors.base.service import Service
from node.zk.client import NoNode, ZooKeeperClient
from node.zk.watches import ZNodeChildChangeHandler

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# After a failed pass (ZooKeeper away), before the next.
_RETRY_S = 1.0

Handler = Callable[[bytes | None], Awaitable[None]]


class ChangeNotificationListener(Service):
    def __init__(self, zk: ZooKeeperClient, root: str, prefix: str, handler: Handler, clock: Clock) -> None:
        super().__init__(f"changes-{root}")
        self._zk = zk
        self._root = root
        self._prefix = prefix
        self._handler = handler
        self._clock = clock
        self._wake = asyncio.Event()
        self._handler_of_root = ZNodeChildChangeHandler(root, self._wake.set)
        self._last_seen = -1

    async def startup(self) -> None:
        """Arm the watch and note the newest notification, before the caller reads the state
        the notifications are about: a change after the listing fires the watch, one before
        it is in what the caller reads."""
        self._zk.watch_session(self)
        names = await self._names()
        if names:
            self._last_seen = self._sequence(names[-1])
        self.start()

    async def shutdown(self) -> None:
        await self.stop()

    # --- SessionWatcher ---

    async def before_new_session(self) -> None:
        return None

    def after_new_session(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._process_new()
            except Exception:
                log.exception("processing the notifications under %s failed", self._root)
                self._wake.set()
                await asyncio.sleep(_RETRY_S)

    async def _names(self) -> list[str]:
        children = await self._zk.watch_children(self._root, self._handler_of_root)
        return sorted(c for c in children if c.startswith(self._prefix))

    def _sequence(self, name: str) -> int:
        return int(name[len(self._prefix) :])

    async def _process_new(self) -> None:
        names = await self._names()
        for name in names:
            if self._sequence(name) <= self._last_seen:
                continue
            value = await self._zk.get_or_none(f"{self._root}/{name}")
            if value is not None:
                await self._handler(value[0])
            # Only once handled: a failed handler leaves it to the next pass.
            self._last_seen = self._sequence(name)
        await self._purge(names)

    async def _purge(self, names: list[str]) -> None:
        horizon = self._clock.wall_ms() - CHANGE_EXPIRATION_MS
        for name in names:
            if self._sequence(name) > self._last_seen:
                break
            path = f"{self._root}/{name}"
            value = await self._zk.get_or_none(path)
            if value is None:
                continue
            if int(value[1].created) >= horizon:
                break  # in creation order: the rest are newer
            with contextlib.suppress(NoNode):
                await self._zk.delete(path)
