"""The nemesis plan of a chaos run: a function of its seed and options, nothing else."""

from __future__ import annotations

import itertools

import pytest

from node.chaos.schedule import (
    BROKER_FAULTS,
    CONTROLLER_DELETIONS,
    CONTROLLER_GRACE_S,
    DEFAULT_FAULTS,
    FAULT_KINDS,
    PEER_PARTITIONS,
    QUIET_TAIL_S,
    VARIANTS,
    WARM_UP_S,
    parse_faults,
    plan,
)


def test_the_same_seed_gives_the_same_plan() -> None:
    first = plan(42, 120, DEFAULT_FAULTS, session_timeout_s=4)
    again = plan(42, 120, DEFAULT_FAULTS, session_timeout_s=4)
    assert first == again
    assert len(first) > 10


def test_another_seed_gives_another_plan() -> None:
    assert plan(1, 120, DEFAULT_FAULTS, session_timeout_s=4) != plan(
        2, 120, DEFAULT_FAULTS, session_timeout_s=4
    )


def test_faults_start_after_the_warm_up_and_before_the_quiet_tail() -> None:
    faults = plan(7, 60, DEFAULT_FAULTS, session_timeout_s=4)
    assert all(WARM_UP_S <= f.at_s < 60 - QUIET_TAIL_S for f in faults)
    assert all(f.ends_s <= 60 + 1e-6 for f in faults)
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)


def test_faults_overlap() -> None:
    faults = plan(3, 300, DEFAULT_FAULTS, session_timeout_s=4)
    overlapping = [(a, b) for a, b in itertools.pairwise(faults) if b.at_s < a.ends_s]
    assert overlapping, "a plan where no fault overlaps the next tests faults one at a time"


def test_only_the_kinds_asked_for_with_their_variants() -> None:
    faults = plan(5, 300, ("kill", "zk"), session_timeout_s=4)
    assert {f.kind for f in faults} == {"kill", "zk"}
    assert all(f.variant in VARIANTS[f.kind] for f in faults)


def test_partitions_between_two_brokers_are_drawn_with_the_others() -> None:
    faults = plan(11, 300, ("partition",), session_timeout_s=4)
    drawn = {f.variant for f in faults}
    assert drawn >= PEER_PARTITIONS
    assert drawn == set(VARIANTS["partition"])
    assert all(3.0 <= f.duration_s <= 10.0 for f in faults if f.ends_s < 300)


def test_a_pause_outlasts_the_session_timeout() -> None:
    pauses = [f for f in plan(9, 600, ("pause",), session_timeout_s=4) if f.ends_s < 600]
    assert pauses and all(f.duration_s > 4 * 1.5 for f in pauses)


def test_a_default_run_draws_forced_re_elections() -> None:
    assert "delete-controller" in DEFAULT_FAULTS and "delete-controller" not in BROKER_FAULTS
    faults = plan(7, 300, DEFAULT_FAULTS, session_timeout_s=4)
    deletions = [f for f in faults if f.kind == "delete-controller"]
    assert deletions, "a default run of 300 s with no forced re-election"
    assert deletions == [
        f for f in plan(7, 300, DEFAULT_FAULTS, session_timeout_s=4) if f.kind == "delete-controller"
    ]


def test_a_deletion_burst_draws_its_length_and_waits_at_most_the_bound_per_deletion() -> None:
    faults = plan(13, 600, ("delete-controller",), session_timeout_s=4)
    assert {f.variant for f in faults} == set(VARIANTS["delete-controller"]) == set(CONTROLLER_DELETIONS)
    assert [CONTROLLER_DELETIONS[v] for v in VARIANTS["delete-controller"]] == [1, 2, 3, 4, 5, 6, 7, 8]
    for fault in faults:
        if fault.ends_s < 600:
            assert fault.duration_s == CONTROLLER_DELETIONS[fault.variant] * (4 + CONTROLLER_GRACE_S)


def test_parse_faults() -> None:
    assert parse_faults("kill, term,kill") == ("kill", "term")
    assert parse_faults("delete-controller") == ("delete-controller",)
    assert set(DEFAULT_FAULTS) < set(FAULT_KINDS)
    with pytest.raises(ValueError, match="unknown fault kind"):
        parse_faults("kill,meteor")
    with pytest.raises(ValueError):
        parse_faults("")
