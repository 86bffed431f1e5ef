"""Self-healing: a broker gone for longer than `planner.self.healing.broker.failure.threshold.ms`
has its replicas re-created elsewhere by a `heal` plan.

The planner feeds the healer what ZooKeeper shows (the registered brokers, from the
`/brokers/ids` watch, and the brokers that hold replicas) and whether it holds
`/keel/planner`; those calls only enqueue. One task decides, on the Clock port's time: a
broker absent from the registrations is gone from the moment this planner first sees it
so (ZooKeeper keeps no time of deletion); once it has been gone for the threshold and this
planner is the active one, `on_heal(brokers)` plans and executes the heal. If a broker of
that plan comes back before its moves finish, the plan is cancelled. A planner that does
not hold `/keel/planner` tracks the absences but never acts, so only one heals.

Like Cruise Control's broker-failure self-healing, with its 30-minute default threshold.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from actors.base.clock import Cancellable, Clock
from actors.base.runtime import Actor, ActorHandle, Ask

log = logging.getLogger(__name__)

# How long to wait before trying a heal again when it could not start (another plan
# running, the planner could not plan).
RETRY_S = 30.0


class BrokerAbsences:
    """Which brokers are gone, since when, and which of them are due for healing."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.gone: dict[int, float] = {}
        self.known: set[int] = set()
        self.healed: set[int] = set()
        self.holders: set[int] | None = None

    def observe(
        self, registered: Iterable[int], now: float, holders: Iterable[int] | None = None
    ) -> set[int]:
        """Take in the registered brokers (and those holding replicas, when known); returns
        the brokers that came back."""
        live = set(registered)
        if holders is not None:
            self.holders = set(holders)
        self.known |= live | (self.holders or set())
        returned = {b for b in self.gone if b in live}
        for broker in returned:
            del self.gone[broker]
            self.healed.discard(broker)
        for broker in self.known - live:
            self.gone.setdefault(broker, now)
        return returned

    def _holds_replicas(self, broker: int) -> bool:
        return self.holders is None or broker in self.holders

    def _waiting(self) -> dict[int, float]:
        """Gone, not healed yet, and holding replicas (when that is known)."""
        return {
            b: since for b, since in self.gone.items() if b not in self.healed and self._holds_replicas(b)
        }

    def targets(self) -> dict[int, float]:
        """The gone brokers self-healing is for: those holding replicas, and those it healed
        (which hold none since). A broker that left holding no replica has nothing to heal."""
        return {b: since for b, since in self.gone.items() if b in self.healed or self._holds_replicas(b)}

    def due(self, now: float) -> set[int]:
        return {b for b, since in self._waiting().items() if now - since >= self.threshold_s}

    def next_due_in(self, now: float) -> float | None:
        """Seconds until the next broker is due (0 if one is), or None if none waits."""
        waiting = self._waiting()
        if not waiting:
            return None
        return max(0.0, min(waiting.values()) + self.threshold_s - now)


class ExecutorView(Protocol):
    def status(self) -> dict[str, object]: ...

    async def cancel(self) -> dict[str, object]: ...


@dataclasses.dataclass(frozen=True)
class _Seen:
    registered: frozenset[int]
    holders: frozenset[int] | None


@dataclasses.dataclass(frozen=True)
class _Active:
    active: bool


@dataclasses.dataclass(frozen=True)
class _Check:
    pass


@dataclasses.dataclass(frozen=True)
class _Settle(Ask[None]):
    """Answered once everything put before it is handled."""


_Event = _Seen | _Active | _Check | _Settle


class SelfHealer(Actor[_Event]):
    def __init__(
        self,
        clock: Clock,
        executor: ExecutorView,
        *,
        threshold_ms: int,
        on_heal: Callable[[set[int]], Awaitable[object]],
        enabled: bool = True,
        retry_s: float = RETRY_S,
    ) -> None:
        self._clock = clock
        self._executor = executor
        self.threshold_ms = threshold_ms
        self._on_heal = on_heal
        self.enabled = enabled
        self._retry_s = retry_s
        self._absences = BrokerAbsences(threshold_ms / 1000)
        self._active = False
        # Unbounded: fed by the planner's callbacks, which cannot wait.
        self._handle = ActorHandle(self, name="self-healing", mailbox_size=0)
        self._timer: Cancellable | None = None
        self._retry_at: float | None = None
        # The heal plan last started and the brokers it heals.
        self._heal_plan: str | None = None
        self._heal_brokers: set[int] = set()
        self._last: dict[str, object] = {}

    # --- fed by the planner (enqueue only) ---

    def brokers_changed(self, registered: Iterable[int], *, holders: Iterable[int] | None = None) -> None:
        """The brokers registered under /brokers/ids, and those holding replicas if known."""
        self._handle.tell_nowait(
            _Seen(frozenset(registered), None if holders is None else frozenset(holders))
        )

    def set_active(self, active: bool) -> None:
        """Whether this planner holds /keel/planner."""
        self._handle.tell_nowait(_Active(active))

    # --- the actor ---

    def start(self) -> None:
        self._handle.start()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        # Now, not after the event in hand: a heal being planned may take Spark a while.
        await self._handle.cancel()

    async def settled(self) -> None:
        """Until every event enqueued so far is handled (for tests and orderly stops)."""
        await self._handle.ask(_Settle())

    async def receive(self, message: _Event) -> object:
        if isinstance(message, _Settle):
            return None
        try:
            await self._handle_event(message)
        except Exception:
            log.exception("self-healing: handling %s failed", message)
        return None

    async def _handle_event(self, event: _Seen | _Active | _Check) -> None:
        now = self._clock.monotonic()
        match event:
            case _Seen(registered, holders):
                before = set(self._absences.gone)
                returned = self._absences.observe(registered, now, holders)
                for broker in sorted(set(self._absences.gone) - before):
                    log.info(
                        "self-healing: broker %d is gone; its replicas are re-created elsewhere "
                        "if it is still gone in %.0f s%s",
                        broker,
                        self._absences.threshold_s,
                        "" if self.enabled else " (self-healing is off)",
                    )
                if returned:
                    await self._on_return(returned)
            case _Active(active):
                self._active = active
            case _Check():
                pass
        await self._heal_if_due(now)
        self._schedule(now)

    async def _on_return(self, returned: set[int]) -> None:
        log.info("self-healing: broker(s) %s are back", sorted(returned))
        if not returned & self._heal_brokers or self._heal_plan is None:
            return
        status = self._executor.status()
        if status.get("plan_id") == self._heal_plan and status.get("state") == "running":
            log.info(
                "self-healing: cancelling heal plan %s, broker(s) %s returned before its moves finished",
                self._heal_plan,
                sorted(returned & self._heal_brokers),
            )
            await self._executor.cancel()
            self._last = {**self._last, "state": "cancelled", "returned": sorted(returned)}
        self._heal_brokers -= returned

    async def _heal_if_due(self, now: float) -> None:
        if not self.enabled or not self._active:
            return
        if self._retry_at is not None and now < self._retry_at:
            return
        due = self._absences.due(now)
        if not due:
            return
        self._retry_at = None
        before = self._executor.status()
        if before.get("state") == "running":
            log.info(
                "self-healing: broker(s) %s are due, but plan %s is running; trying again in %.0f s",
                sorted(due),
                before.get("plan_id"),
                self._retry_s,
            )
            self._retry_at = now + self._retry_s
            return
        log.info(
            "self-healing: broker(s) %s gone for %.0f s or more: planning a heal",
            sorted(due),
            self._absences.threshold_s,
        )
        try:
            await self._on_heal(set(due))
        except Exception as e:
            log.warning(
                "self-healing: the heal of broker(s) %s did not start: %s; trying again in %.0f s",
                sorted(due),
                e,
                self._retry_s,
            )
            self._retry_at = now + self._retry_s
            self._last = {"brokers": sorted(due), "state": "not started", "error": str(e)}
            return
        self._absences.healed |= due
        after = self._executor.status()
        started = after.get("plan_id") != before.get("plan_id") and after.get("state") == "running"
        self._heal_plan = str(after.get("plan_id")) if started else None
        self._heal_brokers = set(due) if started else set()
        self._last = {
            "brokers": sorted(due),
            "plan_id": self._heal_plan,
            "state": "running" if started else "nothing to move",
            "at_ms": self._clock.wall_ms(),
        }
        log.info(
            "self-healing: %s",
            f"heal plan {self._heal_plan} started for broker(s) {sorted(due)}"
            if started
            else f"nothing to move for broker(s) {sorted(due)}",
        )

    def _schedule(self, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        delays = [d for d in (self._absences.next_due_in(now),) if d is not None]
        if self._retry_at is not None:
            delays.append(max(0.0, self._retry_at - now))
        if delays and self.enabled and self._active:
            self._timer = self._clock.call_later(max(min(delays), 0.001), self._wake)

    def _wake(self) -> None:
        self._handle.tell_nowait(_Check())

    # --- status ---

    def status(self) -> dict[str, object]:
        now = self._clock.monotonic()
        threshold = self._absences.threshold_s
        last = dict(self._last)
        executing = self._executor.status()
        if last.get("plan_id") is not None and executing.get("plan_id") == last["plan_id"]:
            last["state"] = executing.get("state")
        return {
            "enabled": self.enabled,
            "active": self._active,
            "threshold_ms": self.threshold_ms,
            "gone": [
                {
                    "broker": b,
                    "gone_for_s": round(now - since, 3),
                    "heal_in_s": None
                    if b in self._absences.healed
                    else round(max(0.0, since + threshold - now), 3),
                }
                for b, since in sorted(self._absences.targets().items())
            ],
            "gone_without_replicas": sorted(set(self._absences.gone) - set(self._absences.targets())),
            "last_heal": last,
        }
