"""The figures of a chaos run: the summary and the --report JSON's fields."""

from __future__ import annotations

from node.chaos import checker
from node.chaos.history import Ack, Commit, ControllerZnode, Read
from node.chaos.report import Report
from node.chaos.schedule import plan
from tests.unit.test_chaos_checker import clean


def report(violated: bool) -> Report:
    history, final = clean()
    if violated:
        history.acks.append(Ack(5.0, "t", 0, 3, "v3"))
    schedule = plan(1, 30, ("kill", "pause"), session_timeout_s=4)
    return Report(
        seed=1,
        duration_s=30,
        brokers=3,
        zookeeper_servers=3,
        plan=schedule,
        injected={"kill": 2, "pause": 1},
        skipped=[],
        history=history,
        final=final,
        controller_changes=1,
        violations=checker.check(history, final),
        replay="bin/keel-cluster chaos --seed 1 --duration 30",
    )


def test_the_json_has_the_figures() -> None:
    value = report(violated=True).as_json()
    for key in (
        "seed",
        "faults",
        "acknowledged",
        "read",
        "lost",
        "duplicates",
        "max_unavailable_s",
        "violations",
    ):
        assert key in value
    assert value["seed"] == 1 and value["faults"] == {"kill": 2, "pause": 1}
    assert value["acknowledged"] == 4 and value["read"] == 3 and value["lost"] == 1
    assert value["max_unavailable_s"] == 5.0  # from the last acknowledgement (t=5) to the end (t=10)
    assert value["without_controller_s"] == 0.0
    assert value["observed"] == {
        "elections_logged": 1,
        "controllers_watched": 2,
        "controller_state_changes": 65,
        "plan_moves_sent": 0,
        "plan_moves_done": 0,
    }
    [violation] = value["violations"]
    assert violation["kind"] == "lost-write" and violation["events"]
    assert value["ok"] is False


def test_the_kafka_clients_figures_are_reported() -> None:
    summarized = report(violated=False)
    history = summarized.history
    history.idempotent_topics = ["k"]
    history.acks += [Ack(2.0, "k", 0, 0, "k0"), Ack(2.1, "k", 1, 0, "k1")]
    history.reads += [Read(2.5, "group-member-1#0.1", "k", 0, 0, "k0"), Read(9.0, "drain-k", "k", 1, 0, "k1")]
    history.commits.append(Commit(2.6, "group-member-1#0.1", "k", 0, 1))
    history.commits_failed = 2
    assert summarized.as_json()["kafka_clients"] == {
        "topics": "k",
        "acknowledged": 2,
        "read": 2,
        "duplicates": 0,
        "commits": 1,
        "commits_failed": 2,
    }
    assert (
        "Kafka clients (k): 2 acknowledged by the idempotent producer, 2 read, 0 duplicated; "
        "1 group commits, 2 failed or not counted" in summarized.summary()
    )


def test_the_summary_says_what_passed_or_what_broke_and_how_to_replay_it() -> None:
    passed = report(violated=False).summary()
    assert "every check passed" in passed
    assert "read from the logs: 1 elections, 65 state changes made as controller" in passed
    summary = report(violated=True).summary()
    assert "1 violation(s)" in summary and "lost-write" in summary
    assert "replay: bin/keel-cluster chaos --seed 1 --duration 30" in summary
    assert "kill -9 broker 1" in summary, "the events around the violation"


def test_the_longest_absence_of_the_controller_is_reported() -> None:
    summarized = report(violated=False)
    summarized.history.controller_znodes += [
        ControllerZnode(3.0, None, 3.0),
        ControllerZnode(3.5, 2, 3.25),
        ControllerZnode(6.0, None, 6.0),
    ]
    summarized.history.observed_until_s = 9.5
    # The absence still open at the last poll is the longer.
    assert summarized.as_json()["without_controller_s"] == 3.5
    assert "longest stretch without /controller: 3.5 s" in summarized.summary()
