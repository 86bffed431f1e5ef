"""ZkBrokerRegistry: the BrokerRegistry port over ZooKeeper (spec §2.1): a broker's ephemeral
registration under `/brokers/ids`, made as Kafka's KafkaZkClient.registerBroker makes it,
and the registrations read back, by the controller, the brokers' handlers, the planner and
the console.

A registration's data watch reports its changes to whoever watches the cluster (the
controller, through ZkClusterStore); its creation and deletion are the `/brokers/ids`
children watch's to report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from actors.base.clock import Clock
from actors.base.ports import BrokerIdTakenError, BrokerInfo, RegisteredBroker
from node.zk import data, paths
from node.zk.client import NodeExists, NoNode, ZooKeeperClient
from node.zk.watches import ZNodeChangeHandler

log = logging.getLogger(__name__)

# How long a restarted broker waits for a dead predecessor's session to expire, in session
# timeouts: ZooKeeper expires sessions on tick boundaries, so allow half a timeout of slack.
_STALE_SESSION_WAIT = 1.5


class ZkBrokerRegistry:
    def __init__(
        self,
        zk: ZooKeeperClient,
        clock: Clock,
        data_handler: Callable[[int], ZNodeChangeHandler | None] = lambda _: None,
    ) -> None:
        self.zk = zk
        self._clock = clock
        # The handler a watched read arms on a registration (none: the read arms nothing).
        self._data_handler = data_handler
        self._registered_session: int | None = None

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

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        if watch:
            children = await self.zk.watch_children(paths.BROKER_IDS)
        else:
            children = await self.zk.children(paths.BROKER_IDS)
        ids = sorted(int(child) for child in children if child.isdigit())
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

    async def registered_broker(self, broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        """`watch` arms the registration's data watch by getData: none when the broker is not
        registered; its registration is reported by the `/brokers/ids` children watch."""
        path = paths.broker_id(broker_id)
        if watch:
            found = await self.zk.watch_data(path, self._data_handler(broker_id))
        else:
            found = await self.zk.get_or_none(path)
        if found is None:
            return None
        value, stat = found
        try:
            return RegisteredBroker(data.decode_broker(broker_id, value), int(stat.created_zxid))
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable registration: %s", e)
            return None
