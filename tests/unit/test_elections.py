"""The four election algorithms, rule by rule (spec §6 and the table of §12.4)."""

from __future__ import annotations

from actors.controller.elections import (
    ElectionResult,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)

# --- offline (New and Offline partitions) ---


def test_offline_picks_the_first_online_isr_member_in_assignment_order() -> None:
    result = offline_election([2, 4], [2, 4], {4}, unclean_allowed=False)
    assert result == ElectionResult(leader=4, isr=(4,), recipients=(4,))


def test_offline_follows_assignment_order_not_isr_order() -> None:
    result = offline_election([3, 1, 2], [2, 1, 3], {1, 2}, unclean_allowed=False)
    assert result is not None and result.leader == 1
    assert result.isr == (2, 1), "the ISR keeps its own order, filtered to online replicas"
    assert result.recipients == (1, 2)


def test_offline_without_a_live_isr_member_and_unclean_off_elects_nobody() -> None:
    assert offline_election([2, 4], [2], {4}, unclean_allowed=False) is None


def test_offline_unclean_elects_the_first_online_replica_with_isr_of_itself() -> None:
    result = offline_election([2, 4, 5], [2], {5, 4}, unclean_allowed=True)
    assert result == ElectionResult(leader=4, isr=(4,), recipients=(4, 5), unclean=True)


def test_offline_never_goes_unclean_when_a_live_isr_member_exists() -> None:
    result = offline_election([2, 4], [4], {2, 4}, unclean_allowed=True)
    assert result is not None and (result.leader, result.unclean) == (4, False)


def test_offline_with_nothing_online_elects_nobody_even_unclean() -> None:
    assert offline_election([1, 2], [1], set(), unclean_allowed=True) is None


def test_offline_drops_offline_replicas_from_the_isr() -> None:
    result = offline_election([1, 2, 3], [1, 2, 3], {2, 3}, unclean_allowed=False)
    assert result == ElectionResult(leader=2, isr=(2, 3), recipients=(2, 3))


# --- reassignment ---


def test_reassignment_picks_the_first_live_target_in_the_isr() -> None:
    assert reassignment_election([2, 4], [2, 4], {4}) == ElectionResult(4, (2, 4), (2, 4))


def test_reassignment_without_candidates() -> None:
    assert reassignment_election([2, 4], [2], set()) is None
    assert reassignment_election([2, 4], [], {2}) is None


# --- preferred ---


def test_preferred_is_the_first_assigned_replica() -> None:
    assert preferred_election([2, 4], [2, 4], {2, 4}) == ElectionResult(2, (2, 4), (2, 4))


def test_preferred_fails_unless_the_first_replica_is_live_and_in_the_isr() -> None:
    assert preferred_election([2, 4], [2], set()) is None
    assert preferred_election([2, 4], [4], {2, 4}) is None
    assert preferred_election([2, 4], [], set()) is None


# --- controlled shutdown ---


def test_controlled_shutdown_moves_leadership_off_the_shutting_down_broker() -> None:
    result = controlled_shutdown_election([2, 4], [2, 4], {2, 4}, {2})
    assert result == ElectionResult(leader=4, isr=(4,), recipients=(2, 4))


def test_controlled_shutdown_without_another_isr_member() -> None:
    assert controlled_shutdown_election([2, 4], [2], {2, 4}, {2}) is None
    assert controlled_shutdown_election([2, 4], [2, 4], {2, 4}, {2, 4}) is None


def test_controlled_shutdown_skips_dead_replicas() -> None:
    result = controlled_shutdown_election([5, 6, 7], [5, 6, 7], {5, 7}, {5})
    assert result == ElectionResult(leader=7, isr=(6, 7), recipients=(5, 7))
