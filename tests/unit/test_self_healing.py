"""Self-healing's timing on a hand-driven clock: a broker gone past the threshold is healed
once, only by the active planner; one that returns in time is not, and one that returns
while its heal runs has the heal cancelled."""

from __future__ import annotations

import pytest

from node.planner.healing import BrokerAbsences, SelfHealer
from tests.support import ManualClock

THRESHOLD_MS = 60_000


class FakeExecutor:
    def __init__(self) -> None:
        self.state: dict[str, object] = {}
        self.plans = 0
        self.cancelled = 0

    def status(self) -> dict[str, object]:
        return dict(self.state)

    async def cancel(self) -> dict[str, object]:
        self.cancelled += 1
        self.state["state"] = "cancelled"
        return self.status()

    def run(self) -> None:
        self.plans += 1
        self.state = {"plan_id": f"heal-{self.plans}", "state": "running"}


class Heals:
    def __init__(self, executor: FakeExecutor) -> None:
        self.calls: list[set[int]] = []
        self.executor = executor
        self.fail_with: Exception | None = None

    async def __call__(self, brokers: set[int]) -> None:
        self.calls.append(brokers)
        if self.fail_with is not None:
            raise self.fail_with
        self.executor.run()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def heals(executor: FakeExecutor) -> Heals:
    return Heals(executor)


@pytest.fixture
async def healer(clock: ManualClock, executor: FakeExecutor, heals: Heals):  # type: ignore[no-untyped-def]
    h = SelfHealer(clock, executor, threshold_ms=THRESHOLD_MS, on_heal=heals, retry_s=10)
    h.start()
    h.set_active(True)
    h.brokers_changed({1, 2, 3, 4})
    await h.settled()
    yield h
    await h.close()


async def advance(clock: ManualClock, healer: SelfHealer, seconds: float) -> None:
    """Let the healer take in what was fed so far, then move the clock."""
    await healer.settled()
    clock.advance(seconds)
    await healer.settled()


def test_absences_are_timed_from_when_the_broker_is_first_seen_gone() -> None:
    absences = BrokerAbsences(60)
    absences.observe({1, 2, 3}, 0)
    absences.observe({1, 2}, 10)
    absences.observe({1}, 30)
    assert absences.due(69) == set()
    assert absences.due(70) == {3}
    assert absences.next_due_in(70) == 0.0
    assert absences.due(90) == {2, 3}
    assert absences.observe({1, 2}, 91) == {2}
    assert absences.due(91) == {3}
    absences.healed.add(3)
    assert absences.due(200) == set() and absences.next_due_in(200) is None


def test_a_broker_known_only_from_its_replicas_counts_and_one_holding_none_is_not_healed() -> None:
    absences = BrokerAbsences(60)
    absences.observe({1, 2}, 0, holders={1, 2, 5})
    assert absences.due(60) == {5}
    absences.observe({1}, 60, holders={1, 5})  # broker 2 was emptied before it left
    assert absences.due(200) == {5}


async def test_a_broker_gone_past_the_threshold_is_healed_once(
    clock: ManualClock, healer: SelfHealer, heals: Heals
) -> None:
    healer.brokers_changed({1, 2, 3})
    await healer.settled()
    await advance(clock, healer, 59)
    assert heals.calls == []
    await advance(clock, healer, 1)
    assert heals.calls == [{4}]
    await advance(clock, healer, 600)
    healer.brokers_changed({1, 2, 3})
    await healer.settled()
    assert heals.calls == [{4}]
    status = healer.status()
    assert status["last_heal"] == {
        "brokers": [4],
        "plan_id": "heal-1",
        "state": "running",
        "at_ms": 1_060_000,
    }
    assert status["gone"] == [{"broker": 4, "gone_for_s": 660.0, "heal_in_s": None}]


async def test_a_broker_back_within_the_threshold_is_not_healed(
    clock: ManualClock, healer: SelfHealer, heals: Heals
) -> None:
    healer.brokers_changed({1, 2, 3})
    await advance(clock, healer, 30)
    healer.brokers_changed({1, 2, 3, 4})
    await healer.settled()
    await advance(clock, healer, 600)
    assert heals.calls == []
    assert clock.pending() == []


async def test_a_broker_back_while_its_heal_runs_cancels_the_heal(
    clock: ManualClock, healer: SelfHealer, heals: Heals, executor: FakeExecutor
) -> None:
    healer.brokers_changed({1, 2, 3})
    await healer.settled()
    await advance(clock, healer, 60)
    assert executor.status()["state"] == "running"
    healer.brokers_changed({1, 2, 3, 4})
    await healer.settled()
    assert executor.cancelled == 1
    assert healer.status()["last_heal"]["state"] == "cancelled"  # type: ignore[index]
    # Gone again later: a new absence, a new heal.
    healer.brokers_changed({1, 2, 3})
    await healer.settled()
    await advance(clock, healer, 60)
    assert heals.calls == [{4}, {4}]


async def test_a_heal_that_finished_is_not_cancelled_when_the_broker_returns(
    clock: ManualClock, healer: SelfHealer, executor: FakeExecutor
) -> None:
    healer.brokers_changed({1, 2, 3})
    await advance(clock, healer, 60)
    executor.state["state"] = "complete"
    healer.brokers_changed({1, 2, 3, 4})
    await healer.settled()
    assert executor.cancelled == 0


async def test_only_the_active_planner_heals(clock: ManualClock, healer: SelfHealer, heals: Heals) -> None:
    healer.set_active(False)
    healer.brokers_changed({1, 2, 3})
    await advance(clock, healer, 120)
    assert heals.calls == []
    # Becoming the active planner, it heals at once what is overdue.
    healer.set_active(True)
    await healer.settled()
    assert heals.calls == [{4}]


async def test_a_heal_waits_for_a_running_plan_and_retries_after_a_failure(
    clock: ManualClock, healer: SelfHealer, heals: Heals, executor: FakeExecutor
) -> None:
    executor.state = {"plan_id": "rebalance", "state": "running"}
    healer.brokers_changed({1, 2, 3})
    await advance(clock, healer, 60)
    assert heals.calls == []
    executor.state["state"] = "complete"
    heals.fail_with = RuntimeError("no snapshot yet")
    await advance(clock, healer, 10)
    assert heals.calls == [{4}]
    assert healer.status()["last_heal"]["state"] == "not started"  # type: ignore[index]
    heals.fail_with = None
    await advance(clock, healer, 10)
    assert heals.calls == [{4}, {4}]
    assert executor.status() == {"plan_id": "heal-1", "state": "running"}


async def test_self_healing_off_only_watches(
    clock: ManualClock, executor: FakeExecutor, heals: Heals
) -> None:
    healer = SelfHealer(clock, executor, threshold_ms=THRESHOLD_MS, on_heal=heals, enabled=False)
    healer.start()
    healer.set_active(True)
    healer.brokers_changed({1, 2})
    healer.brokers_changed({1})
    await healer.settled()
    await advance(clock, healer, 600)
    assert heals.calls == []
    assert healer.status()["gone"] == [{"broker": 2, "gone_for_s": 600.0, "heal_in_s": 0.0}]
    await healer.close()


async def test_status_lists_as_healing_targets_only_brokers_that_hold_replicas(
    clock: ManualClock, executor: FakeExecutor, heals: Heals
) -> None:
    """Broker 3 registered but never held a replica: when it leaves, it is gone with nothing to
    heal, not a broker counted down to a heal that never comes."""
    healer = SelfHealer(clock, executor, threshold_ms=THRESHOLD_MS, on_heal=heals, retry_s=10)
    healer.start()
    healer.set_active(True)
    healer.brokers_changed({1, 2, 3}, holders={1, 2})
    healer.brokers_changed({1}, holders={1, 2})
    await advance(clock, healer, 30)
    status = healer.status()
    assert status["gone"] == [{"broker": 2, "gone_for_s": 30.0, "heal_in_s": 30.0}]
    assert status["gone_without_replicas"] == [3]
    await advance(clock, healer, 30)
    assert heals.calls == [{2}]
    # Healed, broker 2 holds no replica any more, and is still shown as the broker healed.
    healer.brokers_changed({1}, holders={1})
    await healer.settled()
    status = healer.status()
    assert status["gone"] == [{"broker": 2, "gone_for_s": 60.0, "heal_in_s": None}]
    assert status["gone_without_replicas"] == [3]
    await healer.close()
