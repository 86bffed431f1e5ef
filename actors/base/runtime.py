"""Handle + task actors.

An actor's state is owned by one task that takes messages from a bounded mailbox, so no
locks are needed. Other code holds an `ActorHandle` and posts with `tell` (no answer) or
`ask` (awaits the answer). A message that is asked is an `Ask[R]`: its class names the one
type its answer has, so `ask` returns an R and its caller checks nothing.

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
class _Envelope(Generic[M]):
    message: M
    reply: asyncio.Future[object] | None


_STOP = object()


class ActorHandle(Generic[M]):
    def __init__(
        self,
        actor: Actor[M],
        *,
        name: str,
        mailbox_size: int = 1024,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.name = name
        self._actor = actor
        self._mailbox: asyncio.Queue[_Envelope[M] | object] = asyncio.Queue(mailbox_size)
        self._supervisor = supervisor
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
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
        await self._mailbox.put(_Envelope(message, None))

    async def ask(self, message: Ask[R]) -> R:
        """Post a message and wait for the actor's answer (or its exception)."""
        self._check_open()
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        await self._mailbox.put(_Envelope(cast(M, message), reply))
        return cast(R, await reply)

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            self._stopping = True
            return
        self._stopping = True
        self._fail_queued(f"actor {self.name} stopped")
        self._mailbox.put_nowait(_STOP)
        await asyncio.shield(self._task)

    def _check_open(self) -> None:
        if self._stopping or self._task is None or self._task.done():
            raise ActorStopped(f"actor {self.name} is not running")

    def _fail_queued(self, reason: str) -> None:
        while not self._mailbox.empty():
            envelope = self._mailbox.get_nowait()
            if isinstance(envelope, _Envelope) and envelope.reply is not None and not envelope.reply.done():
                envelope.reply.set_exception(ActorStopped(reason))

    async def _run(self) -> None:
        try:
            await self._actor.on_start()
            while True:
                # Messages queued behind one another are taken without the loop turning
                # (a queue's get does not wait when it holds one): turn it between them.
                await turn_if_held()
                if (envelope := await self._mailbox.get()) is _STOP:
                    break
                assert isinstance(envelope, _Envelope)
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

    async def _deliver(self, envelope: _Envelope[M]) -> None:
        reply = envelope.reply
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
