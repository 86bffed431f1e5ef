"""Handle + task actors.

An actor's state is owned by one task that takes messages from its mailbox, so no locks are
needed. Other code holds an `ActorHandle` and posts with `tell` (no answer) or `ask` (awaits
the answer). A message that is asked is an `Ask[R]`: its class names the one type its answer
has, so `ask` returns an R and its caller checks nothing. The mailbox is a queue policy: a
bounded FIFO by default; the controller's event queue (actors/controller/event_manager.py)
is unbounded and pre-emptible.

A failing `ask` hands its exception to the caller and the actor carries on; a failing
`tell` has nobody to tell, so the actor crashes: it logs, reports to its supervisor and
fails whatever was still queued. `stop` drains the mailbox, failing each waiting `ask` with
`ActorStopped`, lets the message in hand finish, and ends the task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Generic, Protocol, TypeVar, cast

from actors.base.loop_slices import turn_if_held
from actors.base.service import cancel_and_wait

log = logging.getLogger(__name__)

M = TypeVar("M")
R = TypeVar("R")


class Ask(Generic[R]):
    """A message that wants an answer of type R. The actor's `receive` answers it with one
    (the type checker holds each `receive` branch to it only as far as `object`; the
    handle's typed methods are where the answer's type is used)."""

    __slots__ = ()


class ActorStopped(Exception):
    """The actor stopped (or crashed) before it handled the message."""


class Supervisor(Protocol):
    def actor_crashed(self, name: str, error: BaseException) -> None: ...


class Actor(Generic[M]):
    """Subclass and implement `receive`; its return value answers an `ask`."""

    async def on_start(self) -> None:
        """Runs on the actor's task before the first message."""

    async def receive(self, message: M) -> object:
        raise NotImplementedError

    async def on_stop(self) -> None:
        """Runs on the actor's task after the last message, also after a crash."""


@dataclasses.dataclass
class Envelope(Generic[M]):
    """A message in a mailbox, with the future its `ask` waits on (None: told)."""

    message: M
    reply: asyncio.Future[object] | None


# What a mailbox hands the actor's task to end it.
STOP = object()


class Mailbox(Protocol):
    """An actor's queue policy: how its envelopes wait, and what `take` hands on (an
    envelope, or STOP)."""

    async def put(self, item: object) -> None: ...

    def put_nowait(self, item: object) -> None: ...

    async def take(self) -> object: ...

    def drain(self) -> list[object]:
        """Remove and return everything queued."""
        ...


class BoundedMailbox:
    """The default policy: one FIFO of at most `size` envelopes; `tell` and `ask` wait for
    room, which pushes back on whoever posts."""

    def __init__(self, size: int) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue(size)

    async def put(self, item: object) -> None:
        await self._queue.put(item)

    def put_nowait(self, item: object) -> None:
        self._queue.put_nowait(item)

    async def take(self) -> object:
        return await self._queue.get()

    def drain(self) -> list[object]:
        items = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items


class ActorHandle(Generic[M]):
    def __init__(
        self,
        actor: Actor[M],
        *,
        name: str,
        mailbox_size: int = 1024,
        mailbox: Mailbox | None = None,
        supervisor: Supervisor | None = None,
    ) -> None:
        """`mailbox`: a queue policy other than the bounded FIFO of `mailbox_size`."""
        self.name = name
        self._actor = actor
        self._mailbox: Mailbox = mailbox if mailbox is not None else BoundedMailbox(mailbox_size)
        self._supervisor = supervisor
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._in_hand: Envelope[M] | None = None
        self.crash: BaseException | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"actor-{self.name}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stopping

    async def tell(self, message: M) -> None:
        """Post a message; waits for room when the mailbox is full."""
        self._check_open()
        await self._mailbox.put(Envelope(message, None))

    def tell_nowait(self, message: M) -> None:
        """Post a message from code that cannot wait (a callback): the mailbox must have
        room, as an unbounded one (`mailbox_size=0`) always has. Before `start` it waits
        in the mailbox for the task."""
        if self._stopping or (self._task is not None and self._task.done()):
            raise ActorStopped(f"actor {self.name} is not running")
        self._mailbox.put_nowait(Envelope(message, None))

    async def ask(self, message: Ask[R]) -> R:
        """Post a message and wait for the actor's answer (or its exception)."""
        self._check_open()
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        await self._mailbox.put(Envelope(cast(M, message), reply))
        return cast(R, await reply)

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            self._stopping = True
            return
        self._stopping = True
        self._fail_queued(f"actor {self.name} stopped")
        self._mailbox.put_nowait(STOP)
        await asyncio.shield(self._task)

    async def cancel(self) -> None:
        """Stop now: as `stop`, but the message in hand is cancelled too (its `ask`, if any,
        fails with ActorStopped)."""
        self._stopping = True
        self._fail_queued(f"actor {self.name} stopped")
        task = self._task
        if task is None or task.done():
            return
        await cancel_and_wait(task)
        in_hand = self._in_hand
        if in_hand is not None and in_hand.reply is not None and not in_hand.reply.done():
            in_hand.reply.set_exception(ActorStopped(f"actor {self.name} stopped"))

    async def join(self) -> None:
        """Until the actor's task has ended (a mailbox that hands it STOP ends it)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def _check_open(self) -> None:
        if self._stopping or self._task is None or self._task.done():
            raise ActorStopped(f"actor {self.name} is not running")

    def _fail_queued(self, reason: str) -> None:
        for envelope in self._mailbox.drain():
            if isinstance(envelope, Envelope) and envelope.reply is not None and not envelope.reply.done():
                envelope.reply.set_exception(ActorStopped(reason))

    async def _run(self) -> None:
        try:
            await self._actor.on_start()
            while True:
                # Messages queued behind one another are taken without the loop turning
                # (a queue's get does not wait when it holds one): turn it between them.
                await turn_if_held()
                if (envelope := await self._mailbox.take()) is STOP:
                    break
                assert isinstance(envelope, Envelope)
                await self._deliver(envelope)
        except Exception as e:
            self.crash = e
            self._stopping = True
            log.error("actor %s crashed: %s: %s", self.name, type(e).__name__, e, exc_info=e)
            self._fail_queued(f"actor {self.name} crashed: {e!r}")
            if self._supervisor is not None:
                self._supervisor.actor_crashed(self.name, e)
        finally:
            try:
                await self._actor.on_stop()
            except Exception as e:
                log.error("actor %s failed while stopping: %r", self.name, e)

    async def _deliver(self, envelope: Envelope[M]) -> None:
        reply = envelope.reply
        self._in_hand = envelope
        try:
            result = await self._actor.receive(envelope.message)
        except Exception as e:
            if reply is None:
                raise
            if not reply.done():
                reply.set_exception(e)
            return
        if reply is not None and not reply.done():
            reply.set_result(result)
