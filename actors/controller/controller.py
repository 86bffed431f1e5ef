"""KafkaController: election, failover and resignation, run one event at a time.

Every broker runs one. ZooKeeper watches and session changes only enqueue events; `process`
dispatches each to one `_on_<event>` method. Election follows spec §2.2: read `/controller`;
if nobody holds it, create it and bump `/controller_epoch` in one multi-op conditional on
the epoch's version. A
ControllerMovedError anywhere means another broker won, so this one maybe-resigns; any other
error while taking over makes it give the role up (triggerControllerMove).
"""

from __future__ import annotations

import logging
from typing import assert_never

from actors.clock import Clock
from actors.controller.context import ControllerContext
from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import (
    ControllerChange,
    ControllerEvent,
    ControllerState,
    Event,
    Expire,
    Reelect,
    RegisterBrokerAndReelect,
    ShutdownEventThread,
    Startup,
)
from actors.ports import BrokerInfo, ClusterStore, ControllerEpoch, ControllerMovedError

log = logging.getLogger(__name__)


class KafkaController:
    def __init__(self, broker_info: BrokerInfo, store: ClusterStore, clock: Clock) -> None:
        self.broker_id = broker_info.broker_id
        self._broker_info = broker_info
        self._store = store
        self.context = ControllerContext()
        self.event_manager = ControllerEventManager(self._process_event, clock)
        self.active_controller_id = -1
        # The epoch of the active controller as last seen by this broker (any broker).
        self.known_controller_epoch = 0
        self.broker_epoch = -1
        self._controller_watch = _ControllerWatch(self.event_manager)

    # --- public API: called by the broker; everything else happens on the event queue ---

    def startup(self, broker_epoch: int) -> None:
        self.broker_epoch = broker_epoch
        self._store.watch_controller(self._controller_watch)
        self._store.watch_session(self)
        self.event_manager.put(Startup())
        self.event_manager.start()

    async def shutdown(self) -> None:
        await self.event_manager.close()
        if self.is_active:
            await self._on_controller_resignation()
        self.active_controller_id = -1

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def state(self) -> ControllerState:
        return self.event_manager.state

    # --- SessionWatcher (spec §2.5) ---

    async def before_new_session(self) -> None:
        queued = self.event_manager.clear_and_put(Expire())
        await queued.await_processing()

    def after_new_session(self) -> None:
        self.event_manager.put(RegisterBrokerAndReelect())

    # --- event processing ---

    async def _process_event(self, event: Event) -> None:
        assert isinstance(event, ControllerEvent)
        try:
            await self._dispatch(event)
        except ControllerMovedError as e:
            log.info("controller moved to another broker while processing %s: %s", type(event).__name__, e)
            await self._maybe_resign()

    async def _dispatch(self, event: ControllerEvent) -> None:
        match event:
            case Startup():
                await self._on_startup()
            case ControllerChange():
                await self._maybe_resign()
            case Reelect():
                await self._on_reelect()
            case Expire():
                await self._on_expire()
            case RegisterBrokerAndReelect():
                await self._on_register_broker_and_reelect()
            case ShutdownEventThread():
                pass
            case _:
                assert_never(event)

    async def _on_startup(self) -> None:
        await self._elect(await self._read_active_controller())

    async def _on_reelect(self) -> None:
        await self._elect(await self._maybe_resign())

    async def _on_expire(self) -> None:
        # Resignation is idempotent, so it runs whether or not this broker was controller.
        was_active = self.is_active
        self.active_controller_id = -1
        await self._on_controller_resignation(log_line=was_active)

    async def _on_register_broker_and_reelect(self) -> None:
        self.broker_epoch = await self._store.register_broker(self._broker_info)
        log.info("broker %d registered again with broker epoch %d", self.broker_id, self.broker_epoch)
        await self._on_reelect()

    # --- election (spec §2.2) ---

    async def _read_active_controller(self) -> ControllerEpoch | None:
        """Re-arm the `/controller` watch and read who holds it, and the epoch, in one round trip."""
        view = await self._store.read_controller()
        self.active_controller_id = -1 if view.controller_id is None else view.controller_id
        if view.epoch is not None and view.controller_id is not None:
            self.known_controller_epoch = view.epoch.epoch
        return view.epoch

    async def _elect(self, seen_epoch: ControllerEpoch | None) -> None:
        """Run right after `_read_active_controller`, whose answer it takes rather than reading
        it again: the epoch write is fenced by the version seen, so a stale read only loses."""
        if self.active_controller_id != -1:
            log.debug("broker %d sees broker %d as controller", self.broker_id, self.active_controller_id)
            return
        try:
            won = await self._store.register_controller_and_increment_epoch(self.broker_id, seen_epoch)
        except ControllerMovedError:
            log.debug("broker %d lost the election", self.broker_id)
            await self._maybe_resign()
            return
        self.context.epoch = won.epoch
        self.context.epoch_zk_version = won.zk_version
        self.active_controller_id = self.broker_id
        self.known_controller_epoch = won.epoch
        log.info("broker %d is controller at epoch %d", self.broker_id, won.epoch)
        try:
            await self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception as e:
            log.error("broker %d failed to take over as controller: %r", self.broker_id, e)
            await self._trigger_controller_move()

    async def _maybe_resign(self) -> ControllerEpoch | None:
        was_active = self.is_active
        epoch = await self._read_active_controller()
        if was_active and not self.is_active:
            await self._on_controller_resignation()
        return epoch

    async def _trigger_controller_move(self) -> None:
        """Give the role up after an unexpected error, so that another broker can take it."""
        await self._read_active_controller()
        if not self.is_active:
            return
        epoch_zk_version = self.context.epoch_zk_version
        self.active_controller_id = -1
        await self._on_controller_resignation()
        try:
            await self._store.delete_controller(epoch_zk_version)
        except ControllerMovedError:
            log.info("broker %d: /controller already belongs to another broker", self.broker_id)

    # --- failover and resignation (spec §4) ---

    async def _on_controller_failover(self) -> None:
        brokers = await self._store.registered_brokers()
        self.context.live_broker_epochs = {b.info.broker_id: b.broker_epoch for b in brokers}

    async def _on_controller_resignation(self, *, log_line: bool = True) -> None:
        if log_line:
            log.info("broker %d resigned as controller", self.broker_id)
        self.context.reset()


class _ControllerWatch:
    """`/controller` watch callbacks: they only enqueue (spec §2.2)."""

    def __init__(self, event_manager: ControllerEventManager) -> None:
        self._event_manager = event_manager

    def controller_changed(self) -> None:
        self._event_manager.put(ControllerChange())

    def controller_deleted(self) -> None:
        self._event_manager.put(Reelect())
