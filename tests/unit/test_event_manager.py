"""The controller event manager: one queue, one event at a time, pre-emption exactly once."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from actors.controller.event_manager import QUEUE_TIME_RESET_S, ControllerEventManager
from actors.controller.events import (
    CallbackEvent,
    ControllerChange,
    ControllerState,
    Event,
    Expire,
    Reelect,
    Startup,
)
from tests.support import ManualClock, eventually
from wire.errors import NotController


@dataclasses.dataclass(frozen=True)
class Ask(CallbackEvent):
    state = ControllerState.MANUAL_LEADER_BALANCE


class Recorder:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.processed: list[Event] = []
        self.states: list[ControllerState] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.manager: ControllerEventManager | None = None
        self.cost_s = 0.0

    async def __call__(self, event: Event) -> None:
        assert self.manager is not None
        self.states.append(self.manager.state)
        await self.gate.wait()
        self.clock.advance(self.cost_s)
        if isinstance(event, Ask):
            event.reply.set_result("done")
        if isinstance(event, Expire):
            raise RuntimeError("handler bug")
        self.processed.append(event)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def recorder(clock: ManualClock) -> Recorder:
    return Recorder(clock)


@pytest.fixture
async def manager(recorder: Recorder, clock: ManualClock) -> ControllerEventManager:
    manager = ControllerEventManager(recorder, clock)
    recorder.manager = manager
    return manager


async def test_events_are_processed_in_order_one_at_a_time(
    manager: ControllerEventManager, recorder: Recorder
) -> None:
    events = [Startup(), ControllerChange(), Reelect()]
    for event in events:
        manager.put(event)
    manager.start()
    await eventually(lambda: _done(recorder, 3), timeout=2, message="events not processed")
    assert recorder.processed == events
    assert recorder.states == [ControllerState.CONTROLLER_CHANGE] * 3
    assert manager.state == ControllerState.IDLE
    await manager.close()


async def _done(recorder: Recorder, count: int) -> bool:
    return len(recorder.processed) >= count


async def test_clear_and_put_preempts_everything_queued_exactly_once(
    manager: ControllerEventManager, recorder: Recorder
) -> None:
    loop = asyncio.get_running_loop()
    recorder.gate.clear()
    manager.start()
    in_hand = manager.put(Startup())
    await in_hand.await_processing()
    waiting = Ask(reply=loop.create_future())
    queued = [manager.put(ControllerChange()), manager.put(waiting)]
    later = manager.clear_and_put(Reelect())
    assert all(q.preempted and q.spent for q in queued)
    with pytest.raises(NotController, match="pre-empted"):
        await waiting.reply
    recorder.gate.set()
    await later.await_processing()
    await eventually(lambda: _done(recorder, 2), timeout=2, message="events not processed")
    assert recorder.processed == [Startup(), Reelect()], "pre-empted events are never processed"
    for q in queued:
        q.preempt()  # a second pre-emption is a no-op
    assert manager.queue_size == 0
    await manager.close()


async def test_a_callback_event_that_is_processed_answers_its_caller(manager: ControllerEventManager) -> None:
    manager.start()
    event = Ask(reply=asyncio.get_running_loop().create_future())
    manager.put(event)
    assert await asyncio.wait_for(event.reply, 2) == "done"
    await manager.close()


async def test_a_failing_event_is_logged_and_the_queue_goes_on(
    manager: ControllerEventManager, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    manager.start()
    manager.put(Expire())
    manager.put(Startup())
    await eventually(lambda: _done(recorder, 1), timeout=2, message="the queue stopped after an error")
    assert recorder.processed == [Startup()]
    assert "uncaught error processing Expire" in caplog.text
    assert manager.state == ControllerState.IDLE
    await manager.close()


async def test_queue_time_is_measured_on_the_injected_clock(
    manager: ControllerEventManager, recorder: Recorder, clock: ManualClock
) -> None:
    recorder.cost_s = 0.5  # each event takes 500 ms of clock time
    manager.put(ControllerChange())
    manager.put(ControllerChange())
    manager.start()
    await eventually(lambda: _done(recorder, 2), timeout=2, message="events not processed")
    histogram = manager.queue_time
    assert (histogram.count, histogram.min_ms, histogram.max_ms) == (2, 0.0, 500.0)
    clock.advance(QUEUE_TIME_RESET_S + 1)
    manager.put(ControllerChange())
    await eventually(lambda: _done(recorder, 3), timeout=2, message="event not processed")
    assert histogram.count == 1, "the histogram resets after a long idle spell"
    await manager.close()


async def test_close_preempts_the_queue_and_later_puts_are_answered(
    manager: ControllerEventManager, recorder: Recorder
) -> None:
    recorder.gate.clear()
    manager.start()
    manager.put(Startup())
    await asyncio.sleep(0)
    queued = manager.put(ControllerChange())
    closing = asyncio.create_task(manager.close())
    await asyncio.sleep(0)
    assert queued.preempted
    recorder.gate.set()
    await closing
    late = Ask(reply=asyncio.get_running_loop().create_future())
    assert manager.put(late).preempted
    with pytest.raises(NotController):
        await late.reply
    assert recorder.processed == [Startup()]


async def test_a_session_expiry_while_closing_does_not_preempt_the_shutdown(
    manager: ControllerEventManager, recorder: Recorder
) -> None:
    """Found by the simulation (seed 495): a broker stopping while cut off from ZooKeeper
    renewed its expired session mid-shutdown; the Expire put by `clear_and_put` pre-empted
    the queued ShutdownEventThread, so the event thread never ended and the stop hung."""
    recorder.gate.clear()
    manager.start()
    manager.put(Startup())
    await asyncio.sleep(0)
    closing = asyncio.create_task(manager.close())
    await asyncio.sleep(0)
    expire = manager.clear_and_put(Expire())
    assert expire.preempted, "nothing new is processed once closing"
    recorder.gate.set()
    await asyncio.wait_for(closing, 1)
    assert recorder.processed == [Startup()]
