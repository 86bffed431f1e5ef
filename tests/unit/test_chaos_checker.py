"""The chaos checker over hand-made histories: each check passes a clean history and catches
the violation it is for."""

from __future__ import annotations

from node.chaos import checker
from node.chaos.history import (
    Ack,
    ControllerSeen,
    FinalState,
    History,
    PartitionState,
    PlanRun,
    Read,
    Shutdown,
)

TP = ("t", 0)


def clean() -> tuple[History, FinalState]:
    """Three acknowledged records, read back in order, on three converged replicas."""
    history = History(partitions=[TP], produce_started_s=0.0, produce_stopped_s=10.0, healed_s=10.0)
    values = {0: "v0", 1: "v1", 2: "v2"}
    for offset, value in values.items():
        history.acks.append(Ack(1.0 + offset, "t", 0, offset, value))
        history.reads.append(Read(1.5 + offset, "consumer", "t", 0, offset, value))
    history.states += [
        PartitionState(0.5, "t", 0, 0, 1, 0, 1, (1, 2, 3)),
        PartitionState(3.0, "t", 0, 1, 2, 1, 2, (2, 3)),
        PartitionState(4.0, "t", 0, 2, 2, 1, 2, (1, 2, 3)),
    ]
    history.controllers += [
        ControllerSeen(0.1, "zookeeper", 1, 1),
        ControllerSeen(0.1, "broker 1's log", 1, 1),
        ControllerSeen(2.5, "zookeeper", 2, 2),
    ]
    history.event(2.4, "fault", "kill -9 broker 1")
    final = FinalState(
        partitions={TP: ((1, 2, 3), 2, (1, 2, 3))},
        high_watermarks={TP: 3},
        replica_logs={TP: {b: dict(values) for b in (1, 2, 3)}},
        registered_brokers=[1, 2, 3],
        expected_brokers=[1, 2, 3],
        healthy_after_s=1.0,
    )
    return history, final


def kinds(history: History, final: FinalState) -> list[str]:
    return [v.kind for v in checker.check(history, final)]


def test_a_clean_history_passes() -> None:
    assert kinds(*clean()) == []


def test_an_acknowledged_record_never_read_is_lost() -> None:
    history, final = clean()
    history.acks.append(Ack(5.0, "t", 0, 3, "v3"))
    [violation] = checker.check_lost(history, final)
    assert violation.kind == "lost-write" and "v3" in violation.message
    assert checker.lost_count(history) == 1
    # The events around it come with it.
    assert any("kill -9 broker 1" in e for e in violation.events)


def test_a_record_in_a_replica_file_only_is_still_lost() -> None:
    history, _final = clean()
    history.acks.append(Ack(5.0, "t", 0, 3, "v3"))
    history.reads.append(Read(9.0, "replica-1", "t", 0, 3, "v3"))
    assert checker.lost_count(history) == 1


def test_duplicates_are_counted_not_violations() -> None:
    history, final = clean()
    history.reads.append(Read(4.0, "consumer", "t", 0, 3, "v2"))
    assert checker.duplicates(history) == 1
    assert kinds(history, final) == []


def test_one_offset_with_two_values_is_inconsistent() -> None:
    history, final = clean()
    history.reads.append(Read(6.0, "drain", "t", 0, 1, "other"))
    assert "inconsistent-offset" in kinds(history, final)


def test_an_acknowledged_offset_read_with_another_value_is_inconsistent() -> None:
    history, final = clean()
    history.acks.append(Ack(5.0, "t", 0, 3, "v3"))
    history.reads.append(Read(6.0, "consumer", "t", 0, 3, "w3"))
    assert [v.kind for v in checker.check_inconsistent_offsets(history, final)] == ["inconsistent-offset"]


def test_offsets_that_go_back_for_one_reader_are_nonmonotonic() -> None:
    history, final = clean()
    history.reads.append(Read(6.0, "consumer", "t", 0, 1, "v1"))
    assert [v.kind for v in checker.check_monotonic_reads(history, final)] == ["nonmonotonic-read"]
    # Another reader starting over is not.
    history, final = clean()
    history.reads.append(Read(6.0, "drain", "t", 0, 0, "v0"))
    assert checker.check_monotonic_reads(history, final) == []


def test_a_replica_that_differs_below_the_high_watermark_diverged() -> None:
    history, final = clean()
    final.replica_logs[TP][3] = {0: "v0", 1: "x1", 2: "v2"}
    [violation] = checker.check_replicas_converged(history, final)
    assert violation.kind == "replica-divergence" and "broker 3" in violation.message


def test_a_replica_missing_a_record_below_the_high_watermark_diverged() -> None:
    history, final = clean()
    final.replica_logs[TP][1] = {0: "v0", 1: "v1"}
    assert [v.kind for v in checker.check_replicas_converged(history, final)] == ["replica-divergence"]


def test_records_above_the_high_watermark_may_differ() -> None:
    history, final = clean()
    final.replica_logs[TP][1] = {0: "v0", 1: "v1", 2: "v2", 3: "uncommitted"}
    assert checker.check_replicas_converged(history, final) == []


def test_two_brokers_controller_in_one_epoch() -> None:
    history, final = clean()
    history.controllers.append(ControllerSeen(3.0, "broker 3's log", 2, 3))
    [violation] = checker.check_one_controller_per_epoch(history, final)
    assert violation.kind == "two-controllers" and "[2, 3]" in violation.message


def test_the_controller_epoch_going_back() -> None:
    history, final = clean()
    history.controllers.append(ControllerSeen(3.0, "zookeeper", 1, 1))
    assert [v.kind for v in checker.check_one_controller_per_epoch(history, final)] == [
        "controller-epoch-regression"
    ]


def test_a_partition_state_with_an_older_leader_epoch() -> None:
    history, final = clean()
    history.states.append(PartitionState(5.0, "t", 0, 3, 2, 0, 1, (1, 2, 3)))
    [violation] = checker.check_partition_states(history, final)
    assert violation.kind == "partition-state-regression"


def test_a_partition_state_written_by_an_older_controller() -> None:
    history, final = clean()
    history.states.append(PartitionState(5.0, "t", 0, 3, 1, 2, 1, (1, 2, 3)))
    assert [v.kind for v in checker.check_partition_states(history, final)] == ["partition-state-regression"]


def test_not_healthy_in_time() -> None:
    history, final = clean()
    final.healthy_after_s = None
    final.partitions[TP] = ((1, 2, 3), 2, (2, 3))
    [violation] = checker.check_healthy(history, final)
    assert violation.kind == "not-healed" and "isr [2, 3]" in violation.message
    final.healthy_after_s = checker.HEALTHY_WITHIN_S + 1
    assert [v.kind for v in checker.check_healthy(history, final)] == ["not-healed"]


def test_stuck_reassignment_deletion_and_missing_broker() -> None:
    history, final = clean()
    final.reassignments_in_progress = [("t", 0)]
    final.topics_pending_deletion = ["old"]
    final.registered_brokers = [1, 2]
    assert kinds(history, final) == ["stuck-reassignment", "stuck-deletion", "broker-not-registered"]


def test_longest_unavailability_is_the_longest_gap_between_acknowledgements() -> None:
    history, _ = clean()
    assert checker.longest_unavailability(history) == {"t-0": 7.0}


def test_a_plan_still_running_after_the_heal_is_stuck() -> None:
    history, final = clean()
    final.plan_state = "complete"
    assert checker.check_healthy(history, final) == []
    final.plan_state = "running"
    assert [v.kind for v in checker.check_healthy(history, final)] == ["stuck-plan"]


def test_a_controlled_shutdown_that_had_to_be_killed_is_stuck() -> None:
    history, final = clean()
    history.shutdowns += [Shutdown(2.0, 1, 1.2, 0), Shutdown(3.0, 2, 16.0, 1), Shutdown(3.5, 2, 0.0, -15)]
    # Neither one that gave up and exited, nor one stopped while still starting, is stuck.
    assert checker.check_shutdowns(history, final) == []
    history.shutdowns.append(Shutdown(4.0, 3, 30.0, -9))
    [violation] = checker.check_shutdowns(history, final)
    assert violation.kind == "stuck-shutdown" and "broker 3" in violation.message


def test_longest_without_leader_from_the_state_versions() -> None:
    history, _ = clean()
    history.states += [
        PartitionState(5.0, "t", 0, 3, 2, 2, -1, (2,)),
        PartitionState(7.5, "t", 0, 4, 2, 3, 2, (2,)),
        PartitionState(8.0, "t", 0, 5, 2, 4, -1, (2,)),
    ]
    # 2.5 s between versions 3 and 4; the last stretch is still open at the heal (t=10): 2 s.
    assert checker.longest_without_leader(history) == {"t-0": 2.5}


def test_a_plan_counting_more_moves_than_it_had() -> None:
    history, final = clean()
    history.plans["p1"] = PlanRun("p1", 3, [1], "complete", 3, 0, 0)
    assert checker.check_plans(history, final) == []
    history.plans["p2"] = PlanRun("p2", 3, [], "complete", 3, 1, 0)
    history.plans["p3"] = PlanRun("p3", 3, [2], "complete", 1, 0, 0)
    assert [v.message.split()[1] for v in checker.check_plans(history, final)] == ["p2", "p3"]


def test_a_plan_that_no_planner_ended_was_left_half_done() -> None:
    history, final = History(), FinalState()
    history.plans["p1"] = PlanRun("p1", 3, [1], "complete", 3, 0, 0)
    history.plans["p2"] = PlanRun("p2", 4, [0])
    final.plan_state = "complete"
    assert [(v.kind, v.message.split()[1]) for v in checker.check_plans(history, final)] == [
        ("plan-not-ended", "p2")
    ]
    final.plan_state = "running"  # the stuck-plan check's business
    assert checker.check_plans(history, final) == []
