"""Long work on the event loop, cut into slices between which the loop turns.

A broker's one event loop also carries its ZooKeeper session: aiozk sends the heartbeats
and reads ZooKeeper's answers on it (node/metrics/loop_lag.py measures how long it is held).
A pass over 200k partitions done in one step holds the session for as long, and a session of
6 s expires. Such passes (the controller's over partitions and its requests' states, a
broker's over a LeaderAndIsr's or an UpdateMetadata's states), and the controller's queue of
events, go slice by slice: after a slice, once the loop has not turned for `BUDGET_S`, the
work yields one turn (`asyncio.sleep(0)`), in which timers, answers and heartbeats run, then
goes on where it stopped. Nothing else of the actor doing it runs meanwhile (the controller's
event queue and the replica manager take one message at a time), so what it computes is the
same.

Whether the loop turned is seen, not guessed: a callback asked for at the last check runs at
the loop's next turn. So the simulation, whose virtual time stands still while a step runs,
never yields here, and replays a seed as before; and a pass of one slice never yields.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

# Items per slice: a few milliseconds at most of the passes that use it (a partition state
# applied, a partition state built for a request).
SLICE = 500
# How long the loop may go without turning before the work in hand yields.
BUDGET_S = 0.02


class _Turns:
    """When the loop last turned, as far as one loop's checks have seen. It keeps no reference
    to its loop: it is the value of a weak map keyed by that loop, and a value that held its
    key would keep the loop, and all it references, for ever (the simulation runs a loop per
    seed, the tests one per test)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._since = loop.time()
        self._turned = False
        loop.call_soon(self._turn)

    def _turn(self) -> None:
        self._turned = True

    def _restart(self, loop: asyncio.AbstractEventLoop) -> None:
        self._since = loop.time()
        self._turned = False
        loop.call_soon(self._turn)

    async def turn_if_held(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._turned:  # the loop turned since the last check: count from here
            self._restart(loop)
        elif loop.time() - self._since >= BUDGET_S:
            await asyncio.sleep(0)
            self._restart(loop)


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def turn_if_held() -> None:
    """One turn of the loop if it has not turned for BUDGET_S; else nothing."""
    loop = asyncio.get_running_loop()
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = _Turns(loop)
    await turns.turn_if_held(loop)


async def sliced(items: Sequence[T], size: int = SLICE) -> AsyncIterator[Sequence[T]]:
    """`items` in slices of `size`, the loop turning between two if it has been held."""
    for start in range(0, len(items), size):
        if start:
            await turn_if_held()
        yield items[start : start + size]


async def each(items: Iterable[T], size: int = SLICE) -> AsyncIterator[T]:
    """`items` one by one, the loop turning after every `size` of them if it has been held:
    for a pass that is not over a sequence, or that does a little per item."""
    for count, item in enumerate(items, 1):
        if count % size == 0:
            await turn_if_held()
        yield item
