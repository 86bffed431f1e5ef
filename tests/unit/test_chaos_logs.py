"""What a chaos run reads from the logs (node/chaos/logs.py), over lines written the way the
processes write them: a broker's files through its own log set-up (node/broker/logs.py), with
real controllers electing and changing partition states; a planner's through its log format
(node/planner/main.py), with real executors running, handing over and ending a plan. A change
to any of those lines' wording or format fails here."""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from actors.base.state_change_log import StateChangeLogger
from node.broker.logs import STATE_CHANGE_LOG, LogSettings, configure_logging, log_files
from node.chaos import checker, logs
from node.chaos.checker import Violation
from node.chaos.history import DONE, SUBMITTED, FinalState, History, PlanRun
from node.planner.executor import SUBMITTING_LINE
from node.planner.main import LOG_FORMAT
from node.planner.plan_state import MemoryPlanRecord
from tests.controllers import ControllerCluster, settled, started
from tests.support import ManualClock, eventually
from tests.unit.plan_cluster import FakeController, Partition
from tests.unit.test_plan_executor import entries, executor
from wire.api import AlterPartitionReassignmentsResponse


@pytest.fixture
def broker_log_dir(tmp_path: Path) -> Iterator[Path]:
    """A broker's log set-up on a directory of its own, rotating every 4 KiB; taken off after."""
    directory = tmp_path / "broker-1" / "data"
    directory.mkdir(parents=True)
    level = logging.getLogger().level
    installed = configure_logging(
        LogSettings(directory, 1, max_bytes=4096, backup_count=1000), stream=io.StringIO()
    )
    yield directory
    installed.close()
    logging.getLogger().setLevel(level)


@contextlib.contextmanager
def planner_log(path: Path) -> Iterator[None]:
    """The executor's records in the planner's log format, appended to `path` (each planner
    process writes its own file; a restarted one appends)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger = logging.getLogger("node.planner.executor")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.close()


def controller_checks(history: History) -> list[Violation]:
    final = FinalState()
    return [
        *checker.check_one_controller_per_epoch(history, final),
        *checker.check_controllers_elected(history, final),
    ]


def plan_checks(history: History) -> list[Violation]:
    final = FinalState(plan_state="complete")
    return [*checker.check_plans(history, final), *checker.check_plan_moves(history, final)]


def read_planner_logs(directory: Path, wall_started: float) -> History:
    history = History()
    planners = [(path.stem, path.read_text()) for path in sorted(directory.glob("planner-*.log"))]
    logs.read_plans(history, planners, wall_started)
    return history


class LossyController(FakeController):
    """Loses the next AlterPartitionReassignments on its way when `lose_next` is set."""

    lose_next = False

    async def alter_partition_reassignments(
        self, reassignments: Mapping[Partition, Sequence[int] | None], *, timeout_ms: int = 60000
    ) -> AlterPartitionReassignmentsResponse:
        if self.lose_next:
            self.lose_next = False
            raise TimeoutError("the request timed out")
        return await super().alter_partition_reassignments(reassignments, timeout_ms=timeout_ms)


async def test_elections_and_state_changes_are_read_as_a_broker_writes_them_across_rotations(
    cluster: ControllerCluster, broker_log_dir: Path
) -> None:
    wall_started = time.time()
    await started(cluster, 1, 2, 3)
    first = cluster.controller.broker_id
    await cluster.create_topic("chaos-a", {p: (1, 2, 3) for p in range(30)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 30), timeout=2, message="no topic"
    )
    await cluster.kill(first)
    await eventually(
        settled(cluster, lambda: len(cluster.active()) == 1), timeout=2, message="no controller elected again"
    )
    second = cluster.controller.broker_id

    elections = logs.elections(broker_log_dir, "broker 1's log", wall_started)
    assert [(c.broker, c.epoch, c.source) for c in elections] == [
        (first, 1, "broker 1's log"),
        (second, 2, "broker 1's log"),
    ]
    actions = logs.controller_actions(broker_log_dir, "broker 1's state-change.log", wall_started)
    assert sorted((a.broker, a.epoch) for a in actions) == [(first, 1), (second, 2)]
    files = log_files(broker_log_dir, STATE_CHANGE_LOG)
    assert len(files) > 2, "the state-change log rotated: every file is read"
    written = [line for f in files for line in f.read_text().splitlines() if "[Controller id=" in line]
    assert sum(a.lines for a in actions) == len(written) > 60
    assert all(-1.0 < a.t <= a.last_t < 30.0 for a in actions)
    assert all(-1.0 < c.t < 30.0 for c in elections)
    assert controller_checks(History(controllers=elections, controller_actions=actions)) == []


async def test_state_changes_logged_at_an_epoch_no_election_gave_are_caught(
    cluster: ControllerCluster, broker_log_dir: Path
) -> None:
    wall_started = time.time()
    await started(cluster, 1)
    # Broker 3 acting on a stale /controller at epoch 0, and broker 2 at broker 1's epoch.
    StateChangeLogger.for_controller(3, lambda: 0).info("Sending UpdateMetadata request to brokers 1,3")
    StateChangeLogger.for_controller(2, lambda: 1).info("Sending UpdateMetadata request to brokers 1,2")
    history = History(
        controllers=logs.elections(broker_log_dir, "broker 1's log", wall_started),
        controller_actions=logs.controller_actions(broker_log_dir, "state-change.log", wall_started),
    )
    assert [(v.kind, v.message.split(" (")[0]) for v in controller_checks(history)] == [
        ("two-controllers", "controller epoch 1 was held by brokers [1, 2]"),
        ("controller-not-elected", "broker 3 acted as controller at epoch 0"),
        ("controller-not-elected", "broker 2 acted as controller at epoch 1"),
    ]


async def test_a_plan_taken_over_by_the_standby_is_read_from_both_planners_logs(tmp_path: Path) -> None:
    """The active planner starts a self-healing plan and dies with two moves in flight; the
    standby resumes it from ZooKeeper's copy and ends it. Nothing was sent twice; then a
    move sent again after it was found done is caught."""
    wall_started = time.time()
    clock, record = ManualClock(), MemoryPlanRecord()
    plan = {("chaos-a", p): (3, 2) for p in range(4)}
    controller = FakeController({tp: (1, 2) for tp in plan})
    with planner_log(tmp_path / "planner-1.log"):
        active = executor(controller, tmp_path / "active", clock, record)
        await active.start("3f2a9c1be0d4", entries(plan), origin="self-healing")
        await active.tick()  # chaos-a-0 and -1 in flight; then kill -9
    controller.complete(("chaos-a", 0))
    with planner_log(tmp_path / "planner-2.log"):
        standby = executor(controller, tmp_path / "standby", clock, record)
        assert await standby.resume()
        while standby.running:
            await standby.tick()
            controller.complete()

    def read() -> History:
        return read_planner_logs(tmp_path, wall_started)

    history = read()
    assert history.plans == {"3f2a9c1be0d4": PlanRun("3f2a9c1be0d4", 4, [0], "complete", 4, 0, 0)}
    sent = [(m.planner, m.topic, m.partition, m.replicas) for m in history.plan_moves if m.kind == SUBMITTED]
    assert sent == [
        ("planner-1", "chaos-a", 0, (3, 2)),
        ("planner-1", "chaos-a", 1, (3, 2)),
        ("planner-2", "chaos-a", 2, (3, 2)),
        ("planner-2", "chaos-a", 3, (3, 2)),
    ]
    done = sorted((m.planner, m.partition) for m in history.plan_moves if m.kind == DONE)
    assert done == [("planner-2", 0), ("planner-2", 1), ("planner-2", 2), ("planner-2", 3)]
    assert all(-1.0 < m.t < 30.0 for m in history.plan_moves)
    assert any("planner-2: resuming plan 3f2a9c1be0d4" in e.line() for e in history.events)
    assert plan_checks(history) == []

    with planner_log(tmp_path / "planner-2.log"):
        logging.getLogger("node.planner.executor").info(SUBMITTING_LINE, "3f2a9c1be0d4", "chaos-a", 1, [3, 2])
    [violation] = plan_checks(read())
    assert violation.kind == "plan-move-repeated"
    assert "planner-2 sent the move of chaos-a-1 to replicas [3, 2]" in violation.message


async def test_a_move_sent_again_after_a_lost_request_or_in_two_steps_is_not_repeated(tmp_path: Path) -> None:
    """A move whose request was lost is sent again, a move of every replica goes in two steps,
    and a move at its target from the start is done without being sent: none is done twice."""
    wall_started = time.time()
    controller = LossyController({("chaos-a", 0): (1, 2, 3), ("chaos-a", 1): (1, 2)})
    plan = {("chaos-a", 0): (4, 5, 6), ("chaos-a", 1): (1, 2)}
    with planner_log(tmp_path / "planner-1.log"):
        ex = executor(controller, tmp_path / "state", ManualClock(), MemoryPlanRecord())
        await ex.start("p7", entries(plan))
        controller.lose_next = True
        with pytest.raises(TimeoutError):
            await ex.tick()
        while ex.running:
            await ex.tick()
            controller.complete()
    history = read_planner_logs(tmp_path, wall_started)
    assert [(m.kind, m.partition, m.replicas) for m in history.plan_moves] == [
        (DONE, 1, ()),
        (SUBMITTED, 0, (1, 4, 5)),
        (SUBMITTED, 0, (1, 4, 5)),
        (SUBMITTED, 0, (4, 5, 6)),
        (DONE, 0, ()),
    ]
    assert history.plans["p7"].state == "complete"
    assert plan_checks(history) == []


async def test_a_plan_reported_stopped_for_want_of_a_copy_counts_as_ended(tmp_path: Path) -> None:
    """/keel/plan names a running plan of which no copy can be read: the planner that becomes
    active reports it stopped, and the run reads that as the plan's end (failed)."""
    wall_started = time.time()
    clock, record = ManualClock(), MemoryPlanRecord()
    controller = FakeController({("chaos-a", 0): (1, 2)})
    with planner_log(tmp_path / "planner-1.log"):
        active = executor(controller, tmp_path / "active", clock, record)
        await active.start("5be0", entries({("chaos-a", 0): (3, 2)}))
    record.plan = None  # the copy lost
    with planner_log(tmp_path / "planner-2.log"):
        standby = executor(controller, tmp_path / "standby", clock, record)
        assert not await standby.resume()
    history = read_planner_logs(tmp_path, wall_started)
    assert history.plans["5be0"].state == "failed"
    assert plan_checks(history) == []
    assert any("planner-2: plan 5be0 stopped: " in e.line() for e in history.events)
