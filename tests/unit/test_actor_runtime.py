"""The handle + task actor runtime."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from actors.base.runtime import STOP, Actor, ActorHandle, ActorStopped, Ask, Envelope


@dataclasses.dataclass(frozen=True)
class Add(Ask[int]):
    """Add `value`; the answer is the new total."""

    value: int
    fail: bool = False


class Counter(Actor[Add]):
    def __init__(self) -> None:
        self.total = 0
        self.log: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.stopped = False

    async def receive(self, message: Add) -> object:
        await self.gate.wait()
        if message.fail:
            raise ValueError(f"bad {message.value}")
        self.total += message.value
        self.log.append(message.value)
        return self.total

    async def on_stop(self) -> None:
        self.stopped = True


class Supervisor:
    def __init__(self) -> None:
        self.crashes: list[tuple[str, BaseException]] = []

    def actor_crashed(self, name: str, error: BaseException) -> None:
        self.crashes.append((name, error))


async def test_messages_are_handled_in_order_and_ask_gets_the_answer_typed() -> None:
    actor = Counter()
    handle = ActorHandle(actor, name="counter")
    handle.start()
    for i in range(1, 4):
        await handle.tell(Add(i))
    total: int = await handle.ask(Add(10))  # typed by the message: no cast, no check
    assert total == 16
    assert actor.log == [1, 2, 3, 10]
    await handle.stop()


async def test_a_failing_ask_raises_in_the_caller_and_the_actor_goes_on() -> None:
    handle = ActorHandle(Counter(), name="counter")
    handle.start()
    with pytest.raises(ValueError, match="bad 1"):
        await handle.ask(Add(1, fail=True))
    assert await handle.ask(Add(2)) == 2
    await handle.stop()


async def test_a_failing_tell_crashes_the_actor_reports_it_and_fails_queued_asks() -> None:
    actor, supervisor = Counter(), Supervisor()
    handle = ActorHandle(actor, name="counter", supervisor=supervisor)
    handle.start()
    actor.gate.clear()
    await handle.tell(Add(7, fail=True))
    waiting = asyncio.create_task(handle.ask(Add(1)))
    await asyncio.sleep(0)
    actor.gate.set()
    with pytest.raises(ActorStopped, match="crashed"):
        await waiting
    assert [(name, str(error)) for name, error in supervisor.crashes] == [("counter", "bad 7")]
    assert actor.stopped and not handle.running
    with pytest.raises(ActorStopped):
        await handle.tell(Add(1))


async def test_stop_drains_the_mailbox_failing_waiting_asks_and_finishes_the_message_in_hand() -> None:
    actor = Counter()
    handle = ActorHandle(actor, name="counter")
    handle.start()
    actor.gate.clear()
    in_hand = asyncio.create_task(handle.ask(Add(1)))
    await asyncio.sleep(0)
    queued = [asyncio.create_task(handle.ask(Add(100))) for _ in range(3)]
    await asyncio.sleep(0)
    stopping = asyncio.create_task(handle.stop())
    await asyncio.sleep(0)
    actor.gate.set()
    await stopping
    assert await in_hand == 1
    for task in queued:
        with pytest.raises(ActorStopped, match="counter stopped"):
            await task
    assert actor.log == [1] and actor.stopped


async def test_a_full_mailbox_makes_tell_wait() -> None:
    actor = Counter()
    handle = ActorHandle(actor, name="counter", mailbox_size=2)
    handle.start()
    actor.gate.clear()
    await handle.tell(Add(1))
    await asyncio.sleep(0)  # the actor takes the first message and blocks on the gate
    await handle.tell(Add(2))
    await handle.tell(Add(3))
    blocked = asyncio.create_task(handle.tell(Add(4)))
    for _ in range(10):  # loop turns enough for the tell to finish, were there room
        await asyncio.sleep(0)
    assert not blocked.done(), "a third queued message must wait for room"
    actor.gate.set()
    await blocked
    assert await handle.ask(Add(0)) == 10
    await handle.stop()


class _NewestFirst:
    """A queue policy of a test's own: the newest message first, and STOP once empty."""

    def __init__(self) -> None:
        self.items: list[object] = []

    async def put(self, item: object) -> None:
        self.put_nowait(item)

    def put_nowait(self, item: object) -> None:
        self.items.append(item)

    async def take(self) -> object:
        return self.items.pop() if self.items else STOP

    def drain(self) -> list[object]:
        drained, self.items = self.items, []
        return drained


async def test_the_mailbox_policy_decides_what_the_actor_takes_and_when_its_task_ends() -> None:
    actor, mailbox = Counter(), _NewestFirst()
    handle = ActorHandle(actor, name="counter", mailbox=mailbox)
    for i in (1, 2, 3):
        await mailbox.put(Envelope(Add(i), None))
    handle.start()
    await handle.join()
    assert actor.log == [3, 2, 1] and actor.stopped and not handle.running


async def test_cancel_stops_at_once_failing_the_ask_in_hand_and_those_queued() -> None:
    actor = Counter()
    handle = ActorHandle(actor, name="counter")
    handle.start()
    actor.gate.clear()
    in_hand = asyncio.create_task(handle.ask(Add(1)))
    await asyncio.sleep(0)
    queued = asyncio.create_task(handle.ask(Add(2)))
    await asyncio.sleep(0)
    await handle.cancel()  # the gate never opens: stop() would wait for ever
    for task in (in_hand, queued):
        with pytest.raises(ActorStopped, match="counter stopped"):
            await task
    assert actor.log == [] and actor.stopped and not handle.running


async def test_tell_nowait_waits_in_the_mailbox_until_start_and_is_refused_after_stop() -> None:
    actor = Counter()
    handle = ActorHandle(actor, name="counter", mailbox_size=0)
    for _ in range(2000):  # unbounded: never full
        handle.tell_nowait(Add(1))
    handle.start()
    assert await handle.ask(Add(0)) == 2000
    await handle.stop()
    with pytest.raises(ActorStopped):
        handle.tell_nowait(Add(1))
