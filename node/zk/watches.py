"""Watches as Kafka's ZooKeeperClient keeps them: one handler per znode (ZNodeChangeHandler) or
per znode's children (ZNodeChildChangeHandler), and a watch armed only by the read whose answer
the handler's owner acts on (ZooKeeperClient's `watch_existence`, `watch_data`, `watch_children`).

ZooKeeper's watches are one-shot, and what arms one depends on the read:

- `exists` arms a watch whether or not the znode is there: on a missing one it fires at the
  creation (Kafka's registerZNodeChangeHandlerAndCheckExistence);
- `getData` arms one only on an existing znode (it fires at a change or the deletion); on a
  missing one it fails with NoNode and arms nothing, so a later creation is never heard;
- `getChildren` arms a children watch (a child created or deleted, or the znode deleted).

Each reading method registers the handler before it sends the read that arms the watch, so a
change after the answer fires the watch and one before it is in the answer. A notification
carries no state: whoever hears it reads again through those methods, which re-arms the watch.

A creation handler (Kafka's handlers of `/admin/reassign_partitions` and
`/admin/preferred_replica_election`) is told only of creations. A change or deletion of its
znode uses its watch up all the same, after which a creation would go unheard; so on those the
registry re-arms the watch itself by checking existence again, and reports a creation that
happened meanwhile (a znode with another czxid than the last one read). It reports once per
arming read, as a plain watch fires once: after a report it ignores what its znode does until
its owner reads it again (which the report asks for).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiozk import protocol
from aiozk.protocol.stat import Stat

log = logging.getLogger(__name__)

CREATED = protocol.WatchEvent.CREATED
DELETED = protocol.WatchEvent.DELETED
DATA_CHANGED = protocol.WatchEvent.DATA_CHANGED
CHILDREN_CHANGED = protocol.WatchEvent.CHILDREN_CHANGED

Callback = Callable[[], None]


@dataclasses.dataclass(frozen=True)
class ZNodeChangeHandler:
    """Kafka's ZNodeChangeHandler: what each kind of notification about one znode calls."""

    path: str
    on_created: Callback | None = None
    on_data_changed: Callback | None = None
    on_deleted: Callback | None = None


@dataclasses.dataclass(frozen=True)
class ZNodeCreationHandler:
    """A ZNodeChangeHandler told only of creations, whose watch outlives changes and deletions
    (see the module's docstring)."""

    path: str
    on_created: Callback


@dataclasses.dataclass(frozen=True)
class ZNodeChildChangeHandler:
    """Kafka's ZNodeChildChangeHandler; also told when the znode itself goes, which uses up
    its children watch as well."""

    path: str
    on_children_changed: Callback


AnyHandler = ZNodeChangeHandler | ZNodeCreationHandler | ZNodeChildChangeHandler


class WatchRegistry:
    """One client's handlers by (normalised) path, and the aiozk callbacks that call them.
    `exists` re-arms a watch by path as the caller spelled it (`handler.path`)."""

    def __init__(self, session: Any, exists: Callable[[str], Awaitable[Stat | None]]) -> None:
        self._session = session
        self._exists = exists
        self._znodes: dict[str, ZNodeChangeHandler | ZNodeCreationHandler] = {}
        self._children: dict[str, ZNodeChildChangeHandler] = {}
        # The czxid of each znode as its last arming read found it (None: missing), and
        # whether a creation handler may still report (armed by a read since its last report).
        self._czxids: dict[str, int | None] = {}
        self._armed: set[str] = set()
        self._rechecks: set[asyncio.Task[None]] = set()
        # One callable per event type, so that registering a path again adds nothing to aiozk.
        self._on_znode = {
            e: functools.partial(self._znode_event, e) for e in (CREATED, DATA_CHANGED, DELETED)
        }
        self._on_children = {
            e: functools.partial(self._children_event, e) for e in (CHILDREN_CHANGED, DELETED)
        }

    def register(self, key: str, handler: AnyHandler) -> None:
        """Register `handler` for `key`, replacing the one there (one per path and kind, as in
        Kafka's ZooKeeperClient)."""
        if isinstance(handler, ZNodeChildChangeHandler):
            self._children[key] = handler
            callbacks = self._on_children
        else:
            self._znodes[key] = handler
            callbacks = self._on_znode
        for event_type, callback in callbacks.items():
            if _handles(handler, event_type):
                self._session.add_watch_callback(event_type, key, callback)

    def armed_by_read(self, key: str, stat: Stat | None) -> None:
        """What a read that armed the watch on `key` (`exists`) found: from its answer on, a
        creation handler reports again."""
        self._czxids[key] = None if stat is None else int(stat.created_zxid)
        self._armed.add(key)

    def close(self) -> None:
        for task in self._rechecks:
            task.cancel()

    def _znode_event(self, event_type: int, key: str) -> None:
        handler = self._znodes.get(key)
        if isinstance(handler, ZNodeCreationHandler):
            if key not in self._armed:
                return  # reported since the last read, which its owner is to repeat
            if event_type == CREATED:
                self._report_creation(key, handler)
            else:
                self._recheck(key, handler)
        elif handler is not None:
            callback = {
                CREATED: handler.on_created,
                DATA_CHANGED: handler.on_data_changed,
                DELETED: handler.on_deleted,
            }[event_type]
            if callback is not None:
                callback()

    def _children_event(self, _event_type: int, key: str) -> None:
        handler = self._children.get(key)
        if handler is not None:
            handler.on_children_changed()

    def _recheck(self, key: str, handler: ZNodeCreationHandler) -> None:
        task = asyncio.get_running_loop().create_task(self._recheck_existence(key, handler))
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    async def _recheck_existence(self, key: str, handler: ZNodeCreationHandler) -> None:
        try:
            stat = await self._exists(handler.path)
        except Exception as e:
            # aiozk re-arms every registered path's watch when it connects again.
            log.warning("could not re-arm the watch on %s: %r", handler.path, e)
            return
        if key not in self._armed:
            return
        czxid = None if stat is None else int(stat.created_zxid)
        previous, self._czxids[key] = self._czxids.get(key), czxid
        if czxid is not None and czxid != previous:
            self._report_creation(key, handler)

    def _report_creation(self, key: str, handler: ZNodeCreationHandler) -> None:
        self._armed.discard(key)
        handler.on_created()


def _handles(handler: AnyHandler, event_type: int) -> bool:
    if isinstance(handler, ZNodeChangeHandler):
        return {
            CREATED: handler.on_created,
            DATA_CHANGED: handler.on_data_changed,
            DELETED: handler.on_deleted,
        }[event_type] is not None
    return True
