"""The executor's pure decisions: steps, batches per broker, reconciling with the
controller, and the bytes a move has copied."""

from __future__ import annotations

from node.planner.moves import (
    QUICK_SETTLE_S,
    Move,
    MoveState,
    Ongoing,
    RateWindow,
    broker_load,
    bytes_copied,
    next_step,
    reconcile,
    seconds_left,
    select_batch,
    start_step,
)


def move(partition: int, target: tuple[int, ...], source: tuple[int, ...], **kw: object) -> Move:
    return Move("t", partition, target, source=source, **kw)  # type: ignore[arg-type]


def test_a_step_is_the_target_when_a_replica_stays() -> None:
    assert next_step((1, 2, 3), (1, 4, 5), 1) == (1, 4, 5)
    assert next_step((1, 2, 3), (3, 2, 1), 1) == (3, 2, 1)


def test_a_move_of_every_replica_keeps_the_leader_for_its_first_step() -> None:
    assert next_step((1, 2, 3), (4, 5, 6), 2) == (2, 4, 5)
    # Then the second step starts from there and shares replicas with the target.
    assert next_step((2, 4, 5), (4, 5, 6), 2) == (4, 5, 6)
    # No live leader among the replicas: the first one stays.
    assert next_step((1, 2, 3), (4, 5, 6), -1) == (1, 4, 5)
    # A single replica cannot move otherwise.
    assert next_step((1,), (4,), 1) == (4,)


def test_a_batch_counts_each_move_on_its_source_and_destination() -> None:
    moves = [move(p, (4, 2, 3), (1, 2, 3)) for p in range(8)]
    current = {m.tp: m.source for m in moves}
    batch = select_batch(moves, current, {}, 3)
    assert len(batch) == 3  # broker 1 (source) and 4 (destination) take 3 each
    for m, step in batch:
        start_step(m, current[m.tp], step)
    assert broker_load(moves) == {1: 3, 4: 3}
    assert select_batch(moves, current, {}, 3) == []


def test_a_move_that_does_not_fit_holds_back_no_other() -> None:
    busy = [move(p, (4,), (1,)) for p in range(2)]
    other = move(9, (6,), (5,))
    current = {m.tp: m.source for m in [*busy, other]}
    batch = select_batch([*busy, other], current, {}, 1)
    assert [m.partition for m, _ in batch] == [0, 9]


def test_moves_in_flight_count_against_the_limit() -> None:
    moves = [move(p, (4,), (1,)) for p in range(4)]
    current = {m.tp: m.source for m in moves}
    start_step(moves[0], (1,), (4,))
    start_step(moves[1], (1,), (4,))
    assert [m.partition for m, _ in select_batch(moves, current, {}, 3)] == [2]


def test_reordering_replicas_takes_no_budget_and_blocked_partitions_wait() -> None:
    full = [move(p, (4,), (1,)) for p in range(2)]
    reorder = move(5, (2, 1), (1, 2))
    blocked = move(6, (3,), (2,))
    moves = [*full, reorder, blocked]
    current = {m.tp: m.source for m in moves}
    batch = select_batch(moves, current, {}, 1, blocked={blocked.tp})
    assert [m.partition for m, _ in batch] == [0, 5]


def test_reconcile_done_in_flight_next_step_and_superseded() -> None:
    done = move(0, (4, 2), (1, 2))
    start_step(done, (1, 2), (4, 2))
    watching = move(1, (4, 2), (1, 2))
    start_step(watching, (1, 2), (4, 2))
    first_step = move(2, (4, 5), (1, 2))
    start_step(first_step, (1, 2), (1, 4))
    superseded = move(3, (4, 2), (1, 2))
    start_step(superseded, (1, 2), (4, 2))
    pending_behind_other = move(4, (5, 2), (1, 2))
    gone = move(5, (5,), (1,))
    current = {
        done.tp: (4, 2),
        watching.tp: (4, 2, 1),
        first_step.tp: (1, 4),
        superseded.tp: (6, 2, 1),
        pending_behind_other.tp: (3, 2, 1),
    }
    ongoing = {
        watching.tp: Ongoing((4, 2, 1), (4,), (1,)),
        superseded.tp: Ongoing((6, 2, 1), (6,), (1,)),
        pending_behind_other.tp: Ongoing((3, 2, 1), (3,), (1,)),
    }
    moves = [done, watching, first_step, superseded, pending_behind_other, gone]
    changed, blocked = reconcile(moves, current, ongoing, 0.0)
    assert [m.state for m in moves] == [
        MoveState.DONE,
        MoveState.IN_FLIGHT,
        MoveState.PENDING,
        MoveState.FAILED,
        MoveState.PENDING,
        MoveState.FAILED,
    ]
    assert {m.partition for m in changed} == {0, 2, 3, 5}
    assert blocked == {pending_behind_other.tp}
    assert "superseded" in superseded.reason and "no longer exists" in gone.reason


def test_a_move_that_vanished_fails_only_once_the_metadata_had_time_to_settle() -> None:
    """A cache that shows the step started but not the reassignment lags surely: the long
    wait. Back at the replicas from before the step, the move was most often cancelled, and
    fails once a cache two updates behind had time to catch up."""
    m = move(0, (4, 2), (1, 2))
    start_step(m, (1, 2), (4, 2))
    stale = {m.tp: (4, 2, 1)}  # a broker's cache that has not seen the completion yet
    reconcile([m], stale, {}, 100.0, settle_s=30)
    reconcile([m], stale, {}, 129.0, settle_s=30)
    assert m.state is MoveState.IN_FLIGHT
    changed, _ = reconcile([m], {m.tp: (4, 2)}, {}, 129.5, settle_s=30)
    assert [c.state for c in changed] == [MoveState.DONE]
    never_caught_up = move(2, (4, 2), (1, 2))
    start_step(never_caught_up, (1, 2), (4, 2))
    reconcile([never_caught_up], {never_caught_up.tp: (1, 2, 4)}, {}, 100.0, settle_s=30)
    changed, _ = reconcile([never_caught_up], {never_caught_up.tp: (1, 2, 4)}, {}, 130.0, settle_s=30)
    assert [c.state for c in changed] == [MoveState.FAILED]

    cancelled = move(1, (4, 2), (1, 2))
    start_step(cancelled, (1, 2), (4, 2))
    reconcile([cancelled], {cancelled.tp: (1, 2)}, {}, 100.0, settle_s=30)
    reconcile([cancelled], {cancelled.tp: (1, 2)}, {}, 100.0 + QUICK_SETTLE_S - 0.1, settle_s=30)
    assert cancelled.state is MoveState.IN_FLIGHT
    changed, _ = reconcile([cancelled], {cancelled.tp: (1, 2)}, {}, 100.0 + QUICK_SETTLE_S, settle_s=30)
    assert [(c.state, c.reason[:26]) for c in changed] == [(MoveState.FAILED, "cancelled outside the plan")]


def test_bytes_copied_through_both_steps_of_a_move() -> None:
    m = move(0, (4, 5, 6), (1, 2, 3), size_bytes=100)
    assert m.bytes_total == 300
    assert bytes_copied(m, {}) == 0
    start_step(m, (1, 2, 3), (1, 4, 5))
    assert bytes_copied(m, {4: 40, 5: 150}) == 140  # an adding replica counts at most the size
    m.state = MoveState.PENDING  # the first step completed
    assert bytes_copied(m, {}) == 200
    start_step(m, (1, 4, 5), (4, 5, 6))
    assert bytes_copied(m, {6: 10}) == 210
    m.state = MoveState.DONE
    assert bytes_copied(m, {}) == 300


def test_rate_and_time_left() -> None:
    window = RateWindow(window_s=10)
    window.add(0.0, 0)
    assert window.rate() is None or window.rate() == 0
    window.add(5.0, 500)
    window.add(20.0, 2000)  # the first two samples leave the window
    window.add(21.0, 2100)
    assert window.rate() == 100.0
    assert seconds_left(3100, 2100, 100.0) == 10.0
    assert seconds_left(10, 10, None) == 0.0
    assert seconds_left(10, 5, None) is None


def test_a_move_survives_its_json() -> None:
    m = move(3, (4, 5), (1, 2), size_bytes=7)
    start_step(m, (1, 2), (1, 4))
    again = Move.from_json(m.to_json())
    assert (again.tp, again.target, again.source, again.step, again.step_origin, again.state) == (
        m.tp,
        m.target,
        m.source,
        m.step,
        m.step_origin,
        m.state,
    )
