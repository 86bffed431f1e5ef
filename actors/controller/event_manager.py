"""The controller's event queue: one FIFO, one task, one event at a time.

This is Kafka's ControllerEventManager, as an actor of the runtime (actors/base/runtime.py)
with a queue policy of its own. All controller state is touched only by the actor's task.
The queue is unbounded, as Kafka's is, because its producers are ZooKeeper watch callbacks
that cannot wait, and watches fire once per arming, so they cannot flood it.
`clear_and_put` pre-empts everything queued (session expiry, shutdown); every queued event
is spent exactly once, either processed or pre-empted.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from actors.base.clock import Clock
from actors.base.runtime import STOP, Actor, ActorHandle, Envelope
from actors.controller.events import ControllerState, Event, ShutdownEventThread

log = logging.getLogger(__name__)

# Kafka's eventQueueTimeTimeoutMs: the queue-time histogram resets after this much idleness.
QUEUE_TIME_RESET_S = 300.0
_RECENT_SAMPLES = 1024


class QueuedEvent:
    """An event in the queue with its enqueue time; spent exactly once."""

    def __init__(self, event: Event, enqueued_at: float) -> None:
        self.event = event
        self.enqueued_at = enqueued_at
        self.spent = False
        self.preempted = False
        self._started = asyncio.Event()

    def begin(self) -> bool:
        """Claim the event for processing; False if it was already spent."""
        if self.spent:
            return False
        self.spent = True
        self._started.set()
        return True

    def preempt(self) -> None:
        if self.spent:
            return
        self.spent = True
        self.preempted = True
        self._started.set()
        self.event.preempt()

    async def await_processing(self) -> None:
        """Returns once processing began (or the event was pre-empted)."""
        await self._started.wait()


class QueueTimeHistogram:
    """EventQueueTimeMs: count, min, max and recent percentiles of time spent queued."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.min_ms = 0.0
        self.max_ms = 0.0
        self._recent: collections.deque[float] = collections.deque(maxlen=_RECENT_SAMPLES)

    def record(self, ms: float) -> None:
        self.min_ms = ms if self.count == 0 else min(self.min_ms, ms)
        self.max_ms = max(self.max_ms, ms)
        self.count += 1
        self._recent.append(ms)

    @property
    def recent(self) -> collections.deque[float]:
        """The recent queue times, for an exporter's percentiles."""
        return self._recent

    def percentile(self, q: float) -> float:
        if not self._recent:
            return 0.0
        ordered = sorted(self._recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class EventQueue:
    """The controller's queue policy (a `Mailbox`): one unbounded FIFO, as Kafka's is, because
    its producers are ZooKeeper watch callbacks that cannot wait, and watches fire once per
    arming, so they cannot flood it. `take` hands on only events not yet spent, and ends the
    actor's task at a shutdown; `preempt_all` pre-empts everything queued but a shutdown."""

    def __init__(self) -> None:
        self._queue: collections.deque[Envelope[QueuedEvent]] = collections.deque()
        self._wakeup = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def queued(self) -> tuple[QueuedEvent, ...]:
        return tuple(envelope.message for envelope in self._queue)

    def put_nowait(self, item: object) -> None:
        assert isinstance(item, Envelope)
        self._queue.append(item)
        self._wakeup.set()

    async def put(self, item: object) -> None:
        self.put_nowait(item)

    async def take(self) -> object:
        while True:
            while not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            envelope = self._queue.popleft()
            queued = envelope.message
            if isinstance(queued.event, ShutdownEventThread):
                queued.begin()
                return STOP
            if queued.begin():
                return envelope

    def drain(self) -> list[object]:
        drained: list[object] = list(self._queue)
        self._queue.clear()
        return drained

    def preempt_all(self) -> None:
        """A queued shutdown is the one event not pre-empted: a session expiry during
        `close` would otherwise leave the event thread waiting for ever, and `close` with it."""
        drained = list(self._queue)
        self._queue.clear()
        for envelope in drained:
            if isinstance(envelope.message.event, ShutdownEventThread):
                self._queue.append(envelope)
            else:
                envelope.message.preempt()


class ControllerEventManager(Actor[QueuedEvent]):
    """An actor of the runtime whose mailbox is the `EventQueue`: events are put, never
    asked (a caller that wants an answer puts an event that carries its reply), and each
    is processed on the actor's task, whose error is logged rather than the end of it."""

    def __init__(
        self,
        process: Callable[[Event], Awaitable[None]],
        clock: Clock,
        *,
        name: str = "controller-event-thread",
    ) -> None:
        self._process = process
        self._clock = clock
        self._queue = EventQueue()
        self._handle = ActorHandle(self, name=name, mailbox=self._queue)
        self._shutting_down = False
        self._last_dequeue_at: float | None = None
        self.state = ControllerState.IDLE
        self.queue_time = QueueTimeHistogram()

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        """Whether `close` has begun: no event put from now on is processed."""
        return self._shutting_down

    def queued(self) -> tuple[QueuedEvent, ...]:
        """The events waiting, in order (for observers: metrics, the simulation's checks)."""
        return self._queue.queued()

    def start(self) -> None:
        self._handle.start()

    def put(self, event: Event) -> QueuedEvent:
        queued = QueuedEvent(event, self._clock.monotonic())
        if self._shutting_down:
            # Nobody will process it: answer its caller now rather than leave it hanging.
            queued.preempt()
            return queued
        self._queue.put_nowait(Envelope(queued, None))
        return queued

    def clear_and_put(self, event: Event) -> QueuedEvent:
        """Pre-empt everything queued, in order, then enqueue `event`."""
        self._queue.preempt_all()
        return self.put(event)

    async def close(self) -> None:
        """Pre-empt what is queued and stop once the event in hand is done."""
        if self._shutting_down:
            return
        self.clear_and_put(ShutdownEventThread())
        self._shutting_down = True
        await self._handle.join()

    async def receive(self, message: QueuedEvent) -> object:
        now = self._clock.monotonic()
        if self._last_dequeue_at is not None and now - self._last_dequeue_at > QUEUE_TIME_RESET_S:
            self.queue_time.reset()
        self._last_dequeue_at = now
        self.queue_time.record((now - message.enqueued_at) * 1000.0)
        self.state = message.event.state
        try:
            await self._process(message.event)
        except Exception:
            # Kafka's loop catches and logs every throwable; the queue must keep going.
            log.exception("uncaught error processing %s", type(message.event).__name__)
        finally:
            self.state = ControllerState.IDLE
        return None
