"""PlanExecutor against a controller in memory, driven one look (`tick`) at a time:
batches per broker, two steps for a partition whose replicas all move, throttles set and
removed, resuming after a restart, cancelling, and plans that cannot start."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from actors.base.clock import SystemClock
from node.planner.executor import PlanExecutionError, PlanExecutor, PlanInProgress
from node.planner.moves import MoveState
from node.planner.plan_state import MemoryPlanRecord, PlanFile
from tests.support import ManualClock, eventually
from tests.unit.plan_cluster import FakeController
from wire.errors import ErrorCode

TOPIC, BROKER = 2, 4


def executor(
    controller: FakeController,
    tmp_path: Path,
    clock: ManualClock,
    record: MemoryPlanRecord,
    *,
    limit: int = 2,
    throttle: int = 1000,
) -> PlanExecutor:
    return PlanExecutor(
        lambda: controller,
        max_moves_per_broker=limit,
        throttle_bytes_per_s=throttle,
        state_dir=str(tmp_path),
        clock=clock,
        record=record,
        size_source_factory=controller.size_source,
        autorun=False,
    )


def entries(plan: Mapping[tuple[str, int], tuple[int, ...]]) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in plan.items()]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def record() -> MemoryPlanRecord:
    return MemoryPlanRecord()


async def test_moves_go_in_batches_within_the_limit_per_broker(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    current = {("a", p): (1, 2) for p in range(6)}
    plan = {("a", p): (4 + p % 2, 2) for p in range(6)}  # broker 1 gives 6, 4 and 5 take 3 each
    controller = FakeController(current)
    ex = executor(controller, tmp_path, clock, record, limit=2)
    await ex.start("p1", entries(plan), {tp: 10 for tp in plan})
    rounds = 0
    while ex.running:
        await ex.tick()
        assert max(controller.in_flight_per_broker().values(), default=0) <= 2
        controller.complete()
        rounds += 1
    assert rounds == 4  # 2 + 2 + 2 moves, then a last look that sees them done
    assert [len(s) for s in controller.submitted] == [2, 2, 2]
    assert {tp: controller.replicas(tp) for tp in plan} == plan
    status = ex.status()
    assert status["state"] == "complete"
    assert (status["moves_done"], status["moves_total"]) == (6, 6)
    assert status["bytes_copied"] == status["bytes_total"] == 60
    assert record.value is not None and record.value["state"] == "complete"


async def test_throttles_follow_the_moves_in_flight_and_are_removed_at_the_end(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2), ("b", 0): (2, 3)})
    plan = {("a", 0): (4, 2), ("a", 1): (5, 2), ("b", 0): (2, 6)}
    ex = executor(controller, tmp_path, clock, record, limit=1, throttle=1000)
    await ex.start("p1", entries(plan), {tp: 10 for tp in plan})
    for broker in (1, 2, 3, 4, 5, 6):
        assert controller.throttle_config(BROKER, str(broker)) == {
            "leader.replication.throttled.rate": "1000",
            "follower.replication.throttled.rate": "1000",
        }
    await ex.tick()  # a-0 (1 → 4) and b-0 (3 → 6) fit; a-1 waits for broker 1
    assert controller.throttle_config(TOPIC, "a") == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:4",
    }
    assert controller.throttle_config(TOPIC, "b") == {
        "leader.replication.throttled.replicas": "0:2,0:3",
        "follower.replication.throttled.replicas": "0:6",
    }
    controller.complete()
    await ex.tick()
    assert controller.throttle_config(TOPIC, "a") == {
        "leader.replication.throttled.replicas": "1:1,1:2",
        "follower.replication.throttled.replicas": "1:5",
    }
    assert controller.throttle_config(TOPIC, "b") == {}
    controller.complete()
    await ex.tick()
    assert not ex.running
    for broker in (1, 2, 3, 4, 5, 6):
        assert controller.throttle_config(BROKER, str(broker)) == {}
    assert controller.throttle_config(TOPIC, "a") == {}


async def test_a_topic_deleted_under_the_plan_does_not_hold_back_the_moves_after_it(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """Chaos seed 816: the throttle list of a topic deleted mid-plan could not be removed
    (UNKNOWN_TOPIC_OR_PARTITION), every later move waited on that, and the plan never ended.
    A topic that no longer exists has no throttle to set or remove."""
    controller = FakeController({("gone", 0): (1, 2), ("a", 0): (1, 2)})
    plan = {("gone", 0): (3, 2), ("a", 0): (4, 2)}
    ex = executor(controller, tmp_path, clock, record, limit=1, throttle=1000)
    await ex.start("p1", entries(plan), {tp: 10 for tp in plan})
    await ex.tick()  # one move from broker 1 at a time: gone-0 first
    assert controller.ongoing() == {("gone", 0): (3, 2)}
    controller.delete_topic("gone")
    await ex.tick()
    assert controller.ongoing() == {("a", 0): (4, 2)}, "a-0 held back behind the deleted topic"
    controller.complete()
    await ex.tick()
    assert not ex.running
    assert {m.tp: m.state for m in ex.moves()} == {("gone", 0): MoveState.FAILED, ("a", 0): MoveState.DONE}


async def test_no_throttle_sets_no_config(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2)})
    ex = executor(controller, tmp_path, clock, record, throttle=-1)
    await ex.start("p1", entries({("a", 0): (3, 2)}))
    await ex.tick()
    controller.complete()
    await ex.tick()
    assert ex.status()["state"] == "complete"
    assert controller.configs == []
    # A plan's own throttle applies to it alone.
    await ex.start("p2", entries({("a", 0): (4, 2)}), throttle_bytes_per_s=700)
    assert controller.throttle_config(BROKER, "4")["leader.replication.throttled.rate"] == "700"
    assert ex.status()["throttle_bytes_per_s"] == 700 and ex.throttle_bytes_per_s == -1


async def test_a_partition_whose_replicas_all_move_goes_in_two_steps(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2, 3)})
    controller.sizes[(4, ("a", 0))] = 30
    ex = executor(controller, tmp_path, clock, record)
    await ex.start("p1", entries({("a", 0): (4, 5, 6)}), {("a", 0): 100})
    await ex.tick()
    assert controller.submitted == [{("a", 0): (1, 4, 5)}]
    assert ex.status()["bytes_copied"] == 30
    controller.complete()
    await ex.tick()
    assert controller.submitted[-1] == {("a", 0): (4, 5, 6)}
    assert ex.status()["bytes_copied"] == 200
    controller.complete()
    await ex.tick()
    assert ex.status()["state"] == "complete"
    assert controller.replicas(("a", 0)) == (4, 5, 6)


async def test_progress_rate_and_time_left(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2)})
    ex = executor(controller, tmp_path, clock, record)
    await ex.start("p1", entries({("a", 0): (3, 2)}), {("a", 0): 1000})
    await ex.tick()
    clock.advance(2)
    controller.sizes[(3, ("a", 0))] = 200
    await ex.tick()
    status = ex.status()
    assert (status["bytes_copied"], status["bytes_total"]) == (200, 1000)
    assert status["rate_bytes_per_s"] == 100.0
    assert status["seconds_left"] == 8.0
    assert status["in_flight"] == [{"topic": "a", "partition": 0, "replicas": [3, 2]}]


async def test_a_restarted_executor_resumes_skipping_what_is_done_and_watching_what_is_in_flight(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    current = {("a", p): (1, 2) for p in range(5)}
    plan = {("a", p): (3, 2) for p in range(5)}
    controller = FakeController(current)
    first = executor(controller, tmp_path, clock, record, limit=2)
    await first.start("p1", entries(plan), {tp: 10 for tp in plan})
    await first.tick()  # a-0 and a-1 in flight
    await first.close()  # the planner stops here
    controller.complete(("a", 0))  # one completes while no planner runs

    # Restarted with another default throttle: the plan keeps its own.
    second = executor(controller, tmp_path, clock, record, limit=2, throttle=5000)
    assert await second.resume()
    assert controller.throttle_config(BROKER, "3")["follower.replication.throttled.rate"] == "1000"
    submitted_before = len(controller.submitted)
    await second.tick()
    states = {m.partition: m.state for m in second.moves()}
    assert states[0] is MoveState.DONE
    assert states[1] is MoveState.IN_FLIGHT
    # a-1 is watched, not sent again; one more starts beside it.
    assert controller.submitted[submitted_before:] == [{("a", 2): (3, 2)}]
    while second.running:
        controller.complete()
        await second.tick()
    assert second.status()["state"] == "complete"
    assert {tp: controller.replicas(tp) for tp in plan} == plan


async def test_a_standby_with_its_own_state_dir_takes_over_the_plan_of_a_planner_that_died(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """The standby has none of the plan on its disk: it resumes from the copy in ZooKeeper,
    sends no move twice, and ends the plan; the dead planner, back, finds it ended."""
    current = {("a", p): (1, 2) for p in range(4)}
    plan = {("a", p): (3, 2) for p in range(4)}
    controller = FakeController(current)
    active = executor(controller, tmp_path / "active", clock, record, limit=2)
    await active.start("p1", entries(plan), {tp: 10 for tp in plan})
    await active.tick()  # a-0 and a-1 in flight; then kill -9: nothing more is saved
    controller.complete(("a", 0))

    standby = executor(controller, tmp_path / "standby", clock, record, limit=2, throttle=5000)
    assert await standby.resume()
    assert controller.throttle_config(BROKER, "3")["follower.replication.throttled.rate"] == "1000"
    submitted_before = len(controller.submitted)
    await standby.tick()
    states = {m.partition: m.state for m in standby.moves()}
    # a-1 is pending in the copy, in flight in the journal written before it was sent:
    # watched, not sent again.
    assert (states[0], states[1]) == (MoveState.DONE, MoveState.IN_FLIGHT)
    while standby.running:
        controller.complete()
        await standby.tick()
    resent = [tp for batch in controller.submitted[submitted_before:] for tp in batch]
    assert sorted(resent) == [("a", 2), ("a", 3)], "a move was sent twice"
    assert standby.status()["state"] == "complete"
    assert {tp: controller.replicas(tp) for tp in plan} == plan
    assert controller.throttle_config(BROKER, "3") == {}
    assert record.value is not None and record.value["state"] == "complete"

    back = executor(controller, tmp_path / "active", clock, record, limit=2)
    submitted_before = len(controller.submitted)
    assert not await back.resume()
    assert back.status()["state"] == "complete"
    assert controller.submitted[submitted_before:] == []
    # A planner that never executed it shows it too, once active: the cluster's last plan.
    other = executor(controller, tmp_path / "third", clock, record, limit=2)
    assert not await other.resume()
    assert (other.status()["plan_id"], other.status()["state"], other.status()["moves_done"]) == (
        "p1",
        "complete",
        4,
    )
    assert controller.submitted[submitted_before:] == []


async def test_a_standby_does_not_send_again_a_move_done_after_the_last_copy_of_the_plan(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """ZooKeeper's copy lags the plan by up to five seconds: a move sent and completed within
    them, then moved elsewhere by someone else, shows in the copy as not started. The journal
    written beside the copy tells the standby it is done, and it is not sent again."""
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    active = executor(controller, tmp_path / "active", clock, record, limit=1)
    await active.start("p1", entries({("a", 0): (3, 2), ("a", 1): (4, 2)}))
    await active.tick()  # a-0 sent; the copy, written at the start, has it pending
    controller.complete(("a", 0))
    clock.advance(1)
    await active.tick()  # a-0 found done, a-1 sent
    shared = await record.read_plan()
    assert shared is not None and [m["state"] for m in shared["moves"]] == ["pending", "pending"]  # type: ignore[attr-defined]
    # Then kill -9, and an operator moves a-0 elsewhere.
    await controller.alter_partition_reassignments({("a", 0): (5, 2)})
    controller.complete(("a", 0))

    standby = executor(controller, tmp_path / "standby", clock, record, limit=1)
    submitted_before = len(controller.submitted)
    assert await standby.resume()
    while standby.running:
        controller.complete()
        clock.advance(1)
        await standby.tick()
    assert controller.submitted[submitted_before:] == [], "a move was sent again"
    assert {m.partition: m.state for m in standby.moves()} == {0: MoveState.DONE, 1: MoveState.DONE}
    assert controller.replicas(("a", 0)) == (5, 2)


async def test_a_restarted_planner_resumes_from_its_own_copy_when_it_is_more_recent_than_zookeepers(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """Its state dir is saved every second, ZooKeeper's copy every five: a move that failed in
    between stays failed, not sent again from the older copy."""
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    controller.refuse[("a", 0)] = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    first = executor(controller, tmp_path, clock, record)
    await first.start("p1", entries({("a", 0): (9, 2), ("a", 1): (3, 2)}))
    await first.tick()  # a-0 refused, a-1 in flight
    clock.advance(1)
    await first.tick()
    shared = await record.read_plan()
    assert shared is not None and [m["state"] for m in shared["moves"]] == ["pending", "pending"]  # type: ignore[attr-defined]

    controller.refuse.clear()
    restarted = executor(controller, tmp_path, clock, record)
    submitted_before = len(controller.submitted)
    assert await restarted.resume()
    await restarted.tick()
    assert {m.partition: m.state for m in restarted.moves()}[0] is MoveState.FAILED
    assert controller.submitted[submitted_before:] == []


async def test_zookeepers_copy_of_the_plan_follows_within_five_seconds_of_a_change(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    ex = executor(controller, tmp_path, clock, record, limit=1)
    await ex.start("p1", entries({("a", 0): (3, 2), ("a", 1): (3, 2)}))

    async def copied_states() -> list[object]:
        shared = await record.read_plan()
        assert shared is not None
        return [m["state"] for m in shared["moves"]]  # type: ignore[attr-defined]

    clock.advance(1)
    await ex.tick()
    assert await copied_states() == ["pending", "pending"], "copied again within five seconds"
    clock.advance(4)
    await ex.tick()  # nothing changed since the last save, but the copy is behind it
    assert await copied_states() == ["in_flight", "pending"]
    controller.complete()
    await ex.tick()
    clock.advance(1)
    await ex.tick()
    assert await copied_states() == ["in_flight", "pending"]
    while ex.running:
        controller.complete()
        clock.advance(1)
        await ex.tick()
    assert await copied_states() == ["done", "done"], "the end is copied at once"


async def test_a_running_plan_nobody_holds_refuses_new_plans_until_an_active_planner_stops_it(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """/keel/plan names a running plan with no readable copy anywhere: a new plan waits for
    the takeover (it would leave the other half done), and the takeover reports it stopped."""
    controller = FakeController({("a", 0): (1, 2)})
    record.value = {"version": 1, "plan_id": "gone", "state": "running"}
    ex = executor(controller, tmp_path, clock, record)
    with pytest.raises(PlanInProgress, match="gone"):
        await ex.start("p2", entries({("a", 0): (3, 2)}))
    assert controller.submitted == []
    assert not await ex.resume()
    assert record.value is not None and (record.value["plan_id"], record.value["state"]) == ("gone", "failed")
    await ex.start("p2", entries({("a", 0): (3, 2)}))
    assert ex.running


async def test_a_plan_that_zookeeper_no_longer_names_is_not_resumed(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2)})
    first = executor(controller, tmp_path, clock, record)
    await first.start("p1", entries({("a", 0): (3, 2)}))
    await first.close()
    record.value = {"version": 1, "plan_id": "p2", "state": "running"}
    second = executor(controller, tmp_path, clock, record)
    assert not await second.resume()
    assert second.status()["state"] == "failed"
    assert "superseded by plan p2" in str(second.status()["message"])

    # A plan that finished is shown but not resumed; no saved plan, nothing to show.
    assert not await executor(FakeController({}), tmp_path / "empty", clock, record).resume()


async def test_cancel_stops_the_moves_in_flight_at_the_controller(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    current = {("a", p): (1, 2) for p in range(4)}
    plan = {("a", p): (3, 2) for p in range(4)}
    controller = FakeController(current)
    ex = executor(controller, tmp_path, clock, record, limit=2)
    await ex.start("p1", entries(plan), {tp: 10 for tp in plan})
    await ex.tick()
    controller.complete(("a", 0))
    status = await ex.cancel()
    assert controller.submitted[-1] == {("a", 1): None}
    assert controller.ongoing() == {}
    # The move in flight is back on its replicas; the one done stays done.
    assert {tp: set(controller.replicas(tp)) for tp in plan} == {
        ("a", 0): {3, 2},
        ("a", 1): {1, 2},
        ("a", 2): {1, 2},
        ("a", 3): {1, 2},
    }
    assert (status["state"], status["moves_cancelled"]) == ("cancelled", 3)
    assert controller.throttle_config(BROKER, "1") == {} and controller.throttle_config(TOPIC, "a") == {}
    assert record.value is not None and record.value["state"] == "cancelled"
    saved = PlanFile(tmp_path).load()
    assert saved is not None and saved["state"] == "cancelled"
    with pytest.raises(LookupError):
        await ex.cancel()


async def test_a_plan_that_cannot_start_executes_nothing(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    ex = executor(controller, tmp_path, clock, record)
    with pytest.raises(PlanExecutionError, match="do not exist: a-7"):
        await ex.start("p1", entries({("a", 0): (3, 2), ("a", 7): (3, 2)}))
    with pytest.raises(PlanExecutionError, match="not distinct"):
        await ex.start("p1", [{"topic": "a", "partition": 0, "replicas": [3, 3]}])
    await controller.alter_partition_reassignments({("a", 1): (4, 2)})
    with pytest.raises(PlanExecutionError, match="being reassigned already: a-1"):
        await ex.start("p1", entries({("a", 1): (3, 2)}))
    assert len(controller.submitted) == 1 and controller.configs == []
    assert ex.status() == {} and record.value is None

    await ex.start("p2", entries({("a", 0): (3, 2)}))
    with pytest.raises(PlanInProgress):
        await ex.start("p3", entries({("a", 0): (4, 2)}))


async def test_a_move_the_controller_refuses_fails_and_the_rest_go_on(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    controller.refuse[("a", 0)] = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ex = executor(controller, tmp_path, clock, record)
    await ex.start("p1", entries({("a", 0): (9, 2), ("a", 1): (3, 2)}))
    await ex.tick()
    controller.complete()
    await ex.tick()
    status = ex.status()
    assert status["state"] == "failed"
    assert (status["moves_done"], status["moves_failed"]) == (1, 1)
    assert status["failures"] == [{"topic": "a", "partition": 0, "reason": "INVALID_REPLICA_ASSIGNMENT"}]


async def test_the_task_runs_the_plan_to_its_end(tmp_path: Path, record: MemoryPlanRecord) -> None:
    """With autorun, the executor's own task looks every poll interval."""
    controller = FakeController({("a", 0): (1, 2)})
    ex = PlanExecutor(
        lambda: controller,
        state_dir=str(tmp_path),
        clock=SystemClock(),
        record=record,
        poll_interval_s=0.01,
        size_source_factory=controller.size_source,
    )
    await ex.start("p1", entries({("a", 0): (3, 2)}))
    await eventually(
        lambda: asyncio.sleep(0, bool(controller.ongoing())), timeout=5, message="the move never started"
    )
    controller.complete()
    await asyncio.wait_for(ex.wait(), 5)
    assert ex.status()["state"] == "complete"
    await ex.close()
    assert controller.closed


async def test_the_plan_is_saved_at_most_once_a_second_while_it_runs(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    ex = executor(controller, tmp_path, clock, record, limit=1)
    await ex.start("p1", entries({("a", 0): (3, 2), ("a", 1): (3, 2)}))

    def saved_states() -> list[object]:
        saved = PlanFile(tmp_path).load()
        assert saved is not None
        return [m["state"] for m in saved["moves"]]  # type: ignore[attr-defined]

    assert saved_states() == ["pending", "pending"]
    await ex.tick()
    assert saved_states() == ["pending", "pending"], "saved at the start less than a second ago"
    clock.advance(1)
    await ex.tick()
    assert saved_states() == ["in_flight", "pending"]
    controller.complete()
    await ex.tick()
    await ex.close()  # what is not saved yet is saved on close
    assert saved_states() == ["done", "in_flight"]


async def test_an_executor_stood_down_goes_on_when_resumed(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """A planner that loses /keel/planner closes its executor; taking it back resumes."""
    controller = FakeController({("a", 0): (1, 2), ("a", 1): (1, 2)})
    ex = executor(controller, tmp_path, clock, record, limit=1)
    await ex.start("p1", entries({("a", 0): (3, 2), ("a", 1): (3, 2)}))
    await ex.tick()
    await ex.close()
    assert ex.status()["state"] == "running"
    assert await ex.resume()
    while ex.running:
        controller.complete()
        await ex.tick()
    assert ex.status()["moves_done"] == 2 and controller.closed


class FailingRecord(MemoryPlanRecord):
    """The record in memory, whose next writes of one kind fail as a ZooKeeper write can."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: dict[str, int] = {}

    def _maybe_fail(self, kind: str) -> None:
        if self.fail.get(kind, 0) > 0:
            self.fail[kind] -= 1
            from aiozk import exc

            raise exc.SessionExpired()

    async def write(self, summary: dict[str, object]) -> None:
        self._maybe_fail("record")
        await super().write(summary)

    async def write_journal(self, journal: dict[str, object]) -> None:
        self._maybe_fail("journal")
        await super().write_journal(journal)


async def test_a_plan_ended_but_still_named_running_is_set_right_when_its_planner_comes_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    """The planner died (or its write failed) between the ended plan's copy and /keel/plan:
    coming back, it finds its own plan ended and says so, and new plans are not refused."""
    record = FailingRecord()
    controller = FakeController({("a", 0): (1, 2)})
    ex = executor(controller, tmp_path, clock, record)
    await ex.start("p1", entries({("a", 0): (3, 2)}))
    await ex.tick()
    controller.complete()
    record.fail["record"] = 1
    with pytest.raises(Exception, match="SessionExpired"):
        await ex.tick()  # the end: saved and copied, /keel/plan not written
    assert record.value is not None and record.value["state"] == "running"

    back = executor(controller, tmp_path, clock, record)
    assert not await back.resume()
    assert record.value is not None and record.value["state"] == "complete"
    await back.start("p2", entries({("a", 0): (1, 2)}))
    assert back.running


async def test_two_planners_that_take_a_plan_from_each_other_go_on_from_the_later_one(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """A stands down with its state dir ahead of ZooKeeper's copy; B takes the plan over and
    sends the second step of a move; B dies; A, active again, goes on from B's copy and
    journal, not from its own older state: the move is in its second step, not failed."""
    controller = FakeController({("a", 0): (1, 2, 3)})
    plan = {("a", 0): (4, 5, 6)}  # every replica changes: two steps
    first = executor(controller, tmp_path / "A", clock, record, limit=3)
    await first.start("p1", entries(plan))
    for _ in range(3):
        clock.advance(1)
        await first.tick()  # the first step sent; the state dir saved since the copy
    await first.close()

    second = executor(controller, tmp_path / "B", clock, record, limit=3)
    assert await second.resume()
    controller.complete()
    clock.advance(1)
    await second.tick()
    assert controller.ongoing(), "the second step was not sent"
    in_second_step = [m.step for m in second.moves()]

    again = executor(controller, tmp_path / "A", clock, record, limit=3)
    submitted_before = len(controller.submitted)
    assert await again.resume()
    assert [m.step for m in again.moves()] == in_second_step
    while again.running:
        controller.complete()
        clock.advance(1)
        await again.tick()
    assert again.status()["state"] == "complete", again.status()
    assert controller.replicas(("a", 0)) == (4, 5, 6)
    assert controller.submitted[submitted_before:] == [], "a step was sent again"


async def test_a_zookeeper_error_in_a_look_is_tried_again_and_the_plan_goes_on(
    tmp_path: Path,
) -> None:
    record = FailingRecord()
    record.fail["journal"] = 2
    controller = FakeController({("a", 0): (1, 2)})
    ex = PlanExecutor(
        lambda: controller,
        state_dir=str(tmp_path),
        clock=SystemClock(),
        record=record,
        poll_interval_s=0.01,
        size_source_factory=controller.size_source,
    )
    await ex.start("p1", entries({("a", 0): (3, 2)}))
    await eventually(
        lambda: asyncio.sleep(0, bool(controller.ongoing())), timeout=5, message="the move never started"
    )
    assert record.fail["journal"] == 0
    controller.complete()
    await asyncio.wait_for(ex.wait(), 5)
    assert ex.status()["state"] == "complete"
    await ex.close()


async def test_moves_the_controller_refused_whole_are_journaled_back_and_sent_by_the_next_planner(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord
) -> None:
    """The journal has a batch in flight before it is sent; a refusal of the whole request
    (NOT_CONTROLLER while the controller moves) puts it back, so that a planner taking over
    within the five seconds before the next copy sends them rather than waits on them."""
    controller = FakeController({("a", 0): (1, 2)})
    send = controller.alter_partition_reassignments
    refused = []

    async def not_controller_once(reassignments: object, **kwargs: object) -> object:
        if not refused:
            refused.append(reassignments)
            from wire.api import AlterPartitionReassignmentsResponse

            return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        return await send(reassignments, **kwargs)  # type: ignore[arg-type]

    controller.alter_partition_reassignments = not_controller_once  # type: ignore[method-assign]
    active = executor(controller, tmp_path / "active", clock, record)
    await active.start("p1", entries({("a", 0): (3, 2)}))
    await active.tick()
    assert refused and not controller.ongoing()

    standby = executor(controller, tmp_path / "standby", clock, record)
    assert await standby.resume()
    assert [m.state for m in standby.moves()] == [MoveState.PENDING]
    await standby.tick()
    assert controller.ongoing() == {("a", 0): (3, 2)}


async def test_a_journal_too_large_for_a_znode_gives_way_to_a_whole_copy(
    tmp_path: Path, clock: ManualClock, record: MemoryPlanRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    from node.planner import executor as executor_module

    monkeypatch.setattr(executor_module, "JOURNAL_MAX_BYTES", 600)
    controller = FakeController({("a", p): (1, 2) for p in range(6)})
    ex = executor(controller, tmp_path, clock, record, limit=6)
    await ex.start("p1", entries({("a", p): (2, 1) for p in range(6)}))  # no broker copies: one batch
    await ex.tick()
    shared = await record.read_plan()
    assert shared is not None
    assert [m["state"] for m in shared["moves"]] == ["in_flight"] * 6  # type: ignore[attr-defined]
    assert record.journal is None or record.journal["entries"] == []
    standby = executor(controller, tmp_path / "standby", clock, record, limit=6)
    submitted_before = len(controller.submitted)
    assert await standby.resume()
    while standby.running:
        controller.complete()
        await standby.tick()
    assert controller.submitted[submitted_before:] == []
