"""ZkClusterStore: the ClusterStore port over ZooKeeper, as Kafka's KafkaZkClient does it.

Every controller write is fenced: a multi-op whose first op checks the version of
`/controller_epoch` this controller wrote when elected (spec §2.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiozk.protocol.stat import Stat

from actors.clock import Clock
from actors.ports import (
    BrokerIdTakenError,
    BrokerInfo,
    ControllerEpoch,
    ControllerMovedError,
    ControllerView,
    ControllerWatcher,
    RegisteredBroker,
    SessionWatcher,
)
from node.zk import data, paths
from node.zk.client import (
    CREATED,
    DATA_CHANGED,
    DELETED,
    BadVersion,
    NodeExists,
    NoNode,
    ZooKeeperClient,
)

log = logging.getLogger(__name__)

# How long a restarted broker waits for a dead predecessor's session to expire, in session
# timeouts: ZooKeeper expires sessions on tick boundaries, so allow half a timeout of slack.
_STALE_SESSION_WAIT = 1.5


class ZkClusterStore:
    def __init__(self, zk: ZooKeeperClient, clock: Clock) -> None:
        self.zk = zk
        self._clock = clock
        self._registered_session: int | None = None

    # --- controller (spec §2.2) ---

    async def controller_id(self) -> int | None:
        # The exists-watch fires on creation, change and deletion alike.
        _exists, value = await asyncio.gather(
            self.zk.exists(paths.CONTROLLER, watch=True),
            self.zk.get_or_none(paths.CONTROLLER),
        )
        return self._decode_controller(value)

    async def controller_epoch(self) -> ControllerEpoch | None:
        return self._decode_epoch(await self.zk.get_or_none(paths.CONTROLLER_EPOCH))

    async def read_controller(self) -> ControllerView:
        # One gather of plain requests: each is written to the socket in this order when its
        # task first runs, and ZooKeeper answers one session's requests in order.
        _, controller, epoch = await asyncio.gather(
            self.zk.exists(paths.CONTROLLER, watch=True),
            self.zk.get_or_none(paths.CONTROLLER),
            self.zk.get_or_none(paths.CONTROLLER_EPOCH),
        )
        return ControllerView(self._decode_controller(controller), self._decode_epoch(epoch))

    @staticmethod
    def _decode_controller(value: tuple[bytes | None, Stat] | None) -> int | None:
        if value is None:
            return None
        try:
            return data.decode_controller(value[0])
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable /controller: %s", e)
            return None

    @staticmethod
    def _decode_epoch(value: tuple[bytes | None, Stat] | None) -> ControllerEpoch | None:
        if value is None:
            return None
        return ControllerEpoch(data.decode_controller_epoch(value[0]), value[1].version)

    async def _controller_epoch_or_create(self) -> ControllerEpoch:
        current = await self.controller_epoch()
        if current is not None:
            return current
        with contextlib.suppress(NodeExists):
            await self.zk.create(paths.CONTROLLER_EPOCH, data.encode_controller_epoch(0))
        current = await self.controller_epoch()
        assert current is not None, "/controller_epoch vanished right after its creation"
        return current

    async def register_controller_and_increment_epoch(
        self, broker_id: int, seen: ControllerEpoch | None = None
    ) -> ControllerEpoch:
        current = seen or await self._controller_epoch_or_create()
        new_epoch = current.epoch + 1
        results = await self.zk.multi(
            [
                self.zk.create_op(
                    paths.CONTROLLER, data.encode_controller(broker_id, self._clock.wall_ms()), ephemeral=True
                ),
                self.zk.set_op(
                    paths.CONTROLLER_EPOCH, data.encode_controller_epoch(new_epoch), current.zk_version
                ),
            ]
        )
        error = next((r for r in results if isinstance(r, NodeExists | BadVersion)), None)
        if error is None and not any(isinstance(r, Exception) for r in results):
            return ControllerEpoch(new_epoch, results[1].stat.version)
        if error is None:
            raise next(r for r in results if isinstance(r, Exception))
        # The multi may have succeeded with its answer lost (spec §2.2 step 2d).
        view = await self.read_controller()
        holder, epoch = view.controller_id, view.epoch
        if holder == broker_id and epoch is not None and epoch.epoch == new_epoch:
            return epoch
        raise ControllerMovedError(f"broker {holder} won the election at epoch {epoch and epoch.epoch}")

    async def delete_controller(self, epoch_zk_version: int) -> None:
        results = await self.zk.multi(
            [self.zk.check_op(paths.CONTROLLER_EPOCH, epoch_zk_version), self.zk.delete_op(paths.CONTROLLER)]
        )
        if isinstance(results[0], Exception):
            raise ControllerMovedError(f"/controller_epoch is past version {epoch_zk_version}")
        if isinstance(results[1], Exception) and not isinstance(results[1], NoNode):
            raise results[1]

    async def force_delete_controller(self) -> int | None:
        """Unfenced delete of `/controller`, as `zookeeper-shell delete /controller`."""
        holder = await self.controller_id()
        with contextlib.suppress(NoNode):
            await self.zk.delete(paths.CONTROLLER)
        return holder

    def watch_controller(self, watcher: ControllerWatcher) -> None:
        self.zk.add_watch(CREATED, paths.CONTROLLER, lambda _: watcher.controller_changed())
        self.zk.add_watch(DATA_CHANGED, paths.CONTROLLER, lambda _: watcher.controller_changed())
        self.zk.add_watch(DELETED, paths.CONTROLLER, lambda _: watcher.controller_deleted())

    def watch_session(self, watcher: SessionWatcher) -> None:
        self.zk.watch_session(watcher)

    # --- brokers (spec §2.1) ---

    async def register_broker(self, info: BrokerInfo) -> int:
        path = paths.broker_id(info.broker_id)
        deadline = self._clock.monotonic() + self.zk.session_timeout_s * _STALE_SESSION_WAIT
        waited = False
        while True:
            session = self.zk.session_id
            results = await self.zk.multi(
                [
                    self.zk.create_op(path, None, ephemeral=True),
                    self.zk.set_op(path, data.encode_broker(info, self._clock.wall_ms()), 0),
                ]
            )
            if not any(isinstance(r, Exception) for r in results):
                self._registered_session = session
                return int(results[1].stat.created_zxid)
            if not isinstance(results[0], NodeExists):
                raise next(r for r in results if isinstance(r, Exception))
            existing = await self.zk.get_or_none(path)
            if existing is None:
                continue
            owner = existing[1].ephemeral_owner
            if owner == session:
                # Our own create whose answer was lost.
                self._registered_session = session
                return int(existing[1].created_zxid)
            if owner == self._registered_session:
                # Left over from this client's own expired session: replace it.
                log.info("replacing %s left by expired session 0x%x", path, owner)
                with contextlib.suppress(NoNode):
                    await self.zk.delete(path, existing[1].version)
                continue
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                raise BrokerIdTakenError(f"broker.id {info.broker_id} is already registered")
            if not waited:
                log.info(
                    "%s is held by session 0x%x; waiting up to %.1f s for it to expire",
                    path,
                    owner,
                    remaining,
                )
                waited = True
            await self.zk.wait_for_deletion(path, remaining)

    async def registered_brokers(self) -> list[RegisteredBroker]:
        ids = sorted(int(child) for child in await self.zk.children(paths.BROKER_IDS) if child.isdigit())
        values = await asyncio.gather(*(self.zk.get_or_none(paths.broker_id(i)) for i in ids))
        brokers = []
        for broker_id, value in zip(ids, values, strict=True):
            if value is None:
                continue
            try:
                info = data.decode_broker(broker_id, value[0])
            except data.ZNodeDataError as e:
                log.warning("ignoring unreadable registration: %s", e)
                continue
            brokers.append(RegisteredBroker(info, int(value[1].created_zxid)))
        return brokers

    # --- cluster set-up (spec §1) ---

    async def ensure_persistent_paths(self) -> None:
        await self.zk.create_all_if_missing(paths.PERSISTENT_PATHS)

    async def get_or_create_cluster_id(self) -> str:
        value = await self.zk.get_or_none(paths.CLUSTER_ID)
        if value is None:
            # Losing the race to another broker is fine: read what it wrote.
            with contextlib.suppress(NodeExists):
                await self.zk.create(paths.CLUSTER_ID, data.encode_cluster_id(data.new_cluster_id()))
            value = await self.zk.get_or_none(paths.CLUSTER_ID)
            assert value is not None
        return data.decode_cluster_id(value[0])
