"""What a plan is asked to do, checked against the snapshot's brokers and topics."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

GOALS = ("rebalance", "remove-brokers", "heal", "leaders")
BALANCES = ("count", "bytes")


class PlanError(ValueError):
    """A request that cannot be planned; the message says why, in one line."""


@dataclasses.dataclass(frozen=True)
class PlanRequest:
    goals: tuple[str, ...] = ("rebalance",)
    # The target broker set; None = the live brokers (less remove_brokers).
    brokers: tuple[int, ...] | None = None
    remove_brokers: tuple[int, ...] = ()
    topics: tuple[str, ...] | None = None
    balance: str = "count"
    # Relative weights of the brokers (missing = 1); replica targets are proportional to them.
    capacity: Mapping[int, float] | None = None

    def __post_init__(self) -> None:
        if not self.goals:
            raise PlanError("no goal given (one or more of " + ", ".join(GOALS) + ")")
        for goal in self.goals:
            if goal not in GOALS:
                raise PlanError(f"unknown goal {goal!r} (one of " + ", ".join(GOALS) + ")")
        if self.balance not in BALANCES:
            raise PlanError(f"unknown balance {self.balance!r} (count or bytes)")
        if self.balance == "bytes" and not self.full_balance:
            raise PlanError("--balance bytes goes with goal rebalance or remove-brokers")
        if "remove-brokers" in self.goals and not self.remove_brokers:
            raise PlanError("goal remove-brokers needs the brokers to remove")
        if self.brokers is not None and set(self.brokers) & set(self.remove_brokers):
            raise PlanError("a broker is both a target and one to remove")
        for broker, weight in (self.capacity or {}).items():
            if not weight > 0:
                raise PlanError(f"capacity of broker {broker} is not positive")

    @property
    def moves_data(self) -> bool:
        return any(g in self.goals for g in ("rebalance", "remove-brokers", "heal"))

    @property
    def full_balance(self) -> bool:
        return "rebalance" in self.goals or "remove-brokers" in self.goals


@dataclasses.dataclass(frozen=True)
class Brokers:
    """The snapshot's brokers as the plan sees them."""

    racks: dict[int, str | None]
    alive: dict[int, bool]
    capacity: dict[int, float]


def target_brokers(request: PlanRequest, brokers: Brokers) -> list[int]:
    """The brokers the plan places replicas on; PlanError for a broker that cannot be one."""
    for broker in request.remove_brokers:
        if broker not in brokers.alive:
            raise PlanError(f"broker {broker} does not exist")
    if request.brokers is None:
        targets = [b for b, up in brokers.alive.items() if up and b not in request.remove_brokers]
    else:
        for broker in request.brokers:
            if broker not in brokers.alive:
                raise PlanError(f"broker {broker} does not exist")
            if not brokers.alive[broker]:
                raise PlanError(f"broker {broker} is not alive")
        targets = [b for b in request.brokers if b not in request.remove_brokers]
    if not targets:
        raise PlanError("no live target broker")
    return sorted(set(targets))


def check_topics(request: PlanRequest, known: Iterable[str]) -> None:
    if request.topics is None:
        return
    present = set(known)
    missing = sorted(set(request.topics) - present)
    if missing:
        raise PlanError("unknown topic " + ", ".join(missing))
