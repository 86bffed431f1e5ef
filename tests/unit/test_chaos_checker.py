"""The chaos checker over hand-made histories: each check passes a clean history and catches
the violation it is for."""

from __future__ import annotations

import dataclasses

from node.chaos import checker
from node.chaos.history import (
    BROKER_CUT,
    BROKER_DOWN,
    DONE,
    SUBMITTED,
    ZOOKEEPER_DOWN,
    Ack,
    Commit,
    ControllerActions,
    ControllerSeen,
    ControllerZnode,
    FinalState,
    History,
    Outage,
    PartitionState,
    PlanMove,
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
    history.controller_actions += [
        ControllerActions(0.2, 2.3, "broker 1's state-change.log", 1, 1, 40),
        ControllerActions(2.6, 9.0, "broker 2's state-change.log", 2, 2, 25),
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


def idempotent() -> tuple[History, FinalState]:
    """The clean history plus an idempotent producer's topic `k`: two values acknowledged and
    read once each, by a group member and the drain."""
    history, final = clean()
    history.idempotent_topics = ["k"]
    for offset, value in enumerate(["k0", "k1"]):
        history.acks.append(Ack(2.0 + offset, "k", 0, offset, value))
        history.reads.append(Read(2.5 + offset, "group-member-1#0.1", "k", 0, offset, value))
        history.reads.append(Read(9.5, "drain-k", "k", 0, offset, value))
    return history, final


def test_an_idempotent_producers_value_read_once_per_offset_passes() -> None:
    assert kinds(*idempotent()) == []
    # Read twice at the same offset (a member and the drain) is no duplicate.
    assert checker.idempotent_duplicates(idempotent()[0]) == 0


def test_an_idempotent_producers_value_at_two_offsets_is_a_violation() -> None:
    history, final = idempotent()
    # The retry of k1 appended again at offset 2.
    history.reads.append(Read(9.5, "drain-k", "k", 0, 2, "k1"))
    [violation] = checker.check_idempotent_duplicates(history, final)
    assert violation.kind == "idempotent-duplicate"
    assert "k1 at k-0@1 and k-0@2" in violation.message
    assert checker.idempotent_duplicates(history) == 1
    # Counted apart from Keel's producer's duplicates, which are not violations.
    assert checker.duplicates(history) == 0
    assert kinds(history, final) == ["idempotent-duplicate"]


def test_a_duplicate_of_a_topic_not_written_idempotently_is_only_counted() -> None:
    history, final = idempotent()
    history.reads.append(Read(4.0, "consumer", "t", 0, 3, "v2"))
    assert checker.check_idempotent_duplicates(history, final) == []
    assert checker.duplicates(history) == 1 and checker.idempotent_duplicates(history) == 0


def test_an_idempotent_producers_acknowledged_value_never_read_is_lost() -> None:
    history, final = idempotent()
    history.acks.append(Ack(5.0, "k", 1, 0, "k-lost"))
    [violation] = checker.check_lost(history, final)
    assert "k-lost (k-1@0)" in violation.message


def commits() -> History:
    """Two members of a group, the partition moving from one to the other at t=3."""
    history, _final = clean()
    history.commits += [
        Commit(1.0, "group-member-1#0.1", "k", 0, 5),
        Commit(1.0, "group-member-1#0.1", "k", 1, 2),
        Commit(2.0, "group-member-1#0.1", "k", 0, 9),
        Commit(4.0, "group-member-2#0.3", "k", 0, 9),
        Commit(5.0, "group-member-2#0.3", "k", 0, 12),
        # Another partition's lower offset is no regression of this one's.
        Commit(6.0, "group-member-1#0.3", "k", 1, 3),
    ]
    return history


def test_commits_that_rise_or_stay_per_partition_pass() -> None:
    history = commits()
    assert checker.check_commits_never_go_backwards(history, clean()[1]) == []
    assert kinds(history, clean()[1]) == []


def test_a_commit_below_the_partitions_last_one_goes_backwards() -> None:
    history = commits()
    # A stale member's commit taken after the new owner's.
    history.commits.append(Commit(5.5, "group-member-1#0.1", "k", 0, 9))
    history.commits.append(Commit(7.0, "group-member-2#0.3", "k", 0, 13))
    [violation] = checker.check_commits_never_go_backwards(history, clean()[1])
    assert violation.kind == "commit-went-backwards" and violation.t == 5.5
    assert "k-0: group-member-1#0.1 committed offset 9" in violation.message
    assert "after group-member-2#0.3 had committed 12" in violation.message


def test_commits_are_ordered_by_their_answers_not_as_listed() -> None:
    history = commits()
    history.commits.insert(0, Commit(5.5, "group-member-2#0.3", "k", 0, 13))
    assert checker.check_commits_never_go_backwards(history, clean()[1]) == []
    history.commits.insert(0, Commit(5.2, "group-member-2#0.3", "k", 0, 10))
    assert [v.t for v in checker.check_commits_never_go_backwards(history, clean()[1])] == [5.2]


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


def test_a_broker_acting_as_controller_at_an_epoch_another_won() -> None:
    history, final = clean()
    history.controller_actions.append(ControllerActions(3.0, 3.5, "broker 3's state-change.log", 2, 3, 4))
    [violation] = checker.check_one_controller_per_epoch(history, final)
    assert violation.kind == "two-controllers" and "[2, 3]" in violation.message
    assert "broker 3's state-change.log: 4 state change(s)" in violation.message
    assert violation.t == 3.0
    assert [v.kind for v in checker.check_controllers_elected(history, final)] == ["controller-not-elected"]


def test_two_brokers_acting_at_one_epoch_that_neither_election_record_saw() -> None:
    history, final = clean()
    history.controller_actions += [
        ControllerActions(5.0, 5.1, "broker 1's state-change.log", 3, 1, 2),
        ControllerActions(5.5, 6.0, "broker 3's state-change.log", 3, 3, 7),
    ]
    assert [v.kind for v in checker.check_one_controller_per_epoch(history, final)] == ["two-controllers"]
    assert [v.message.split()[1] for v in checker.check_controllers_elected(history, final)] == ["1", "3"]


def test_a_broker_acting_as_controller_without_an_election() -> None:
    """As on a stale /controller at epoch 0: state changes under `[Controller id=3 epoch=0]`."""
    history, final = clean()
    history.controller_actions.append(ControllerActions(6.0, 7.0, "broker 3's state-change.log", 0, 3, 12))
    [violation] = checker.check_controllers_elected(history, final)
    assert violation.kind == "controller-not-elected" and violation.t == 6.0
    assert "broker 3 acted as controller at epoch 0 (12 state change(s)" in violation.message
    assert "elected at epoch 0: none seen" in violation.message
    assert any("kill -9 broker 1" in e for e in violation.events)
    # Alone at its epoch: not two controllers.
    assert checker.check_one_controller_per_epoch(history, final) == []


def test_an_election_seen_by_the_watcher_alone_counts() -> None:
    history, final = clean()
    history.controllers.append(ControllerSeen(8.0, "zookeeper", 3, 3))
    history.controller_actions.append(ControllerActions(8.1, 9.0, "broker 3's state-change.log", 3, 3, 5))
    assert kinds(history, final) == []


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
    final.partitions[TP] = ((1, 2, 3), 2, (1, 2, 3))
    final.held_up_by = ["the planner's plan still running"]
    [late] = checker.check_healthy(history, final)
    assert late.kind == "not-healed"
    assert late.message.endswith(
        f"(healthy {checker.HEALTHY_WITHIN_S + 1:g} s after it), held up by: the planner's plan still running"
    )


def test_what_keeps_a_cluster_from_healthy_is_named() -> None:
    from node.chaos.run import unhealthy_reasons

    final = FinalState(
        partitions={TP: ((1, 2, 3), 2, (2, 3)), ("t", 1): ((1, 2), 1, (1, 2))},
        reassignments_in_progress=[("t", 0)],
        expected_brokers=[1, 2, 3],
        registered_brokers=[1, 3],
        planner_expected=True,
        plan_state="running",
    )
    assert unhealthy_reasons(final) == [
        "1 partition(s) without a leader in a full ISR",
        "1 reassignment(s) in progress",
        "broker(s) [2] not registered",
        "no planner active",
        "the planner's plan still running",
    ]
    assert unhealthy_reasons(FinalState(partitions={TP: ((1, 2), 1, (2, 1))})) == []


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


def move(t: float, planner: str, kind: str, partition: int = 0, position: int = 0) -> PlanMove:
    return PlanMove(t, planner, position, kind, "p1", "t", partition, (2, 3) if kind == SUBMITTED else ())


def test_a_move_sent_again_after_a_planner_found_it_done_is_repeated() -> None:
    history, final = clean()
    history.event(4.2, "fault", "kill -9 the active planner")
    history.plan_moves += [
        move(1.0, "planner-1", SUBMITTED),
        move(3.0, "planner-1", DONE),
        move(5.0, "planner-2", SUBMITTED),
        move(6.0, "planner-2", SUBMITTED),
    ]
    [violation] = checker.check_plan_moves(history, final)
    assert violation.kind == "plan-move-repeated" and violation.t == 5.0
    assert violation.message == (
        "plan p1: planner-2 sent the move of t-0 to replicas [2, 3] at t=5.0s, "
        "after planner-1 had found it done at t=3.0s"
    )
    assert any("kill -9 the active planner" in e for e in violation.events)
    assert [v.kind for v in checker.check(history, final)] == ["plan-move-repeated"]


def test_a_move_sent_again_before_anyone_found_it_done_is_not_repeated() -> None:
    """A request that failed or timed out, or a planner that died before it saw the answer:
    the move is sent again, then found done, and that is the plan going on."""
    history, final = clean()
    history.plan_moves += [
        move(1.0, "planner-1", SUBMITTED),
        move(2.0, "planner-1", SUBMITTED),
        move(4.0, "planner-2", SUBMITTED),
        move(6.0, "planner-2", DONE),
        move(6.5, "planner-1", DONE),
        # Another partition's move, and the same partition in another plan.
        move(7.0, "planner-2", SUBMITTED, partition=1),
        dataclasses.replace(move(8.0, "planner-2", SUBMITTED), plan_id="p2"),
    ]
    assert checker.check_plan_moves(history, final) == []


def test_within_one_planners_log_its_order_decides_and_across_planners_only_time() -> None:
    history, final = clean()
    # Logged in the same millisecond by two planners: which came first is not known.
    history.plan_moves += [move(3.0, "planner-1", DONE, position=10), move(3.0, "planner-2", SUBMITTED)]
    assert checker.check_plan_moves(history, final) == []
    # In one planner's log, the later line is later.
    history.plan_moves.append(move(3.0, "planner-1", SUBMITTED, position=20))
    assert [v.kind for v in checker.check_plan_moves(history, final)] == ["plan-move-repeated"]


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
    final.plan_state, final.planner_expected = "complete", True  # and no planner active
    assert checker.check_plans(history, final) == []


def test_a_run_with_planners_is_not_healed_without_an_active_one() -> None:
    """Both planners killed near the end are still starting Spark: the plan they left cannot
    have ended, and the heal is not over until one of them holds /keel/planner."""
    history, final = clean()
    final.planner_expected = True
    assert [v.kind for v in checker.check_healthy(history, final)] == ["planner-not-active"]
    final.planner_active = True
    assert checker.check_healthy(history, final) == []


def absent(history: History, start: float, end: float | None, broker: int = 3) -> None:
    """The observer's record of /controller gone at `start` and held again by `broker` from
    `end` (None: still absent at the last poll, t=`history.observed_until_s`)."""
    history.controller_znodes.append(ControllerZnode(start, None, start))
    if end is not None:
        # Seen a little late (a poll after the outage of the observer's own session): the
        # znode's creation dates the election.
        history.controller_znodes.append(ControllerZnode(end + 0.7, broker, end))


def test_a_controller_re_elected_at_once_after_a_forced_deletion_passes() -> None:
    history, final = clean()
    history.controller_znodes.append(ControllerZnode(0.1, 1, 0.05))
    history.event(5.0, "fault", "delete-controller/once /controller deleted (broker 2 at epoch 2)")
    absent(history, 5.0, 5.1)
    assert kinds(history, final) == []


def test_a_controller_absent_past_the_session_timeout_with_brokers_up_is_a_violation() -> None:
    history, final = clean()
    history.observed_until_s = 40.0
    history.event(5.0, "fault", "delete-controller/3-times /controller deleted again (broker 2 at epoch 4)")
    absent(history, 5.0, 10.5)
    [violation] = checker.check_controller_present(history, final)
    assert violation.kind == "controller-absent" and violation.t == 5.0
    assert violation.message == (
        "/controller absent from t=5.0s to t=10.5s: 5.5s of it from t=5.0s with broker(s) [1, 2, 3] "
        "up and reaching ZooKeeper, more than the session timeout (4s) plus 1s"
    )
    assert any("deleted again" in e for e in violation.events)
    assert kinds(history, final) == ["controller-absent"]


def test_the_bound_is_the_runs_own_session_timeout() -> None:
    history, final = clean()
    absent(history, 5.0, 10.5)
    history.session_timeout_s = 6.0
    assert checker.check_controller_present(history, final) == []
    history.session_timeout_s = 2.0
    [violation] = checker.check_controller_present(history, final)
    assert "more than the session timeout (2s) plus 1s" in violation.message


def test_a_controller_never_elected_again_is_absent_to_the_end_of_the_run() -> None:
    history, final = clean()
    history.observed_until_s = 70.0
    absent(history, 5.0, None)
    [violation] = checker.check_controller_present(history, final)
    assert violation.message.startswith(
        "/controller absent from t=5.0s to the end of the run (t=70.0s): 65.0s"
    )


def test_an_absence_while_zookeeper_had_no_majority_counts_from_its_return() -> None:
    """Two of three servers killed from t=4 s: no election can be held until the ensemble has
    its majority again, when the first of them serves again (t=8.5 s); the clock runs from there."""
    history, final = clean()
    history.event(4.0, "fault", "zk/majority kill -9 ZooKeeper server(s) [1, 2] for 5.0s")
    history.outages += [Outage(ZOOKEEPER_DOWN, 1, 4.0, 9.0), Outage(ZOOKEEPER_DOWN, 2, 4.0, 8.5)]
    absent(history, 5.0, 13.0)
    assert checker.check_controller_present(history, final) == []
    history.controller_znodes.clear()
    absent(history, 5.0, 15.0)
    [violation] = checker.check_controller_present(history, final)
    assert violation.t == 8.5
    assert "6.5s of it from t=8.5s (when the last outage preventing an election healed)" in violation.message


def test_one_zookeeper_server_down_leaves_the_majority_to_elect() -> None:
    history, final = clean()
    history.outages.append(Outage(ZOOKEEPER_DOWN, 1, 4.0, 12.0))
    absent(history, 5.0, 11.0)
    assert [v.kind for v in checker.check_controller_present(history, final)] == ["controller-absent"]


def test_an_absence_while_no_broker_could_be_elected_counts_from_the_first_one_back() -> None:
    """Broker 1 killed, broker 2 paused, broker 3 cut from ZooKeeper (an outage still open at
    the heal ends there): the clock starts when the first of them can take part again."""
    history, final = clean()
    history.healed_s = 30.0
    history.outages += [
        Outage(BROKER_DOWN, 1, 3.0, 12.0),
        Outage(BROKER_DOWN, 2, 4.0, 14.0),
        Outage(BROKER_CUT, 3, 4.5, None),
    ]
    absent(history, 5.0, 16.5)
    assert checker.check_controller_present(history, final) == []
    history.controller_znodes.clear()
    absent(history, 5.0, 17.5)
    [violation] = checker.check_controller_present(history, final)
    assert violation.t == 12.0 and "with broker(s) [1] up" in violation.message


def test_a_long_stretch_between_two_outages_is_a_violation_though_another_one_followed() -> None:
    history, final = clean()
    history.outages += [Outage(ZOOKEEPER_DOWN, s, 20.0, 25.0) for s in (1, 2)]
    absent(history, 5.0, 26.0)
    [violation] = checker.check_controller_present(history, final)
    assert violation.t == 5.0 and "15.0s of it from t=5.0s with" in violation.message
    # Cut short by the outage, the stretch before it is within the bound.
    history.outages[0].t = history.outages[1].t = 9.0
    assert checker.check_controller_present(history, final) == []
