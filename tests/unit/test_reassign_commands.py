"""`keel reassign`'s decisions without a cluster: the reassignment file (each defect is one
readable line and exit 2 before anything connects), the throttles Kafka's tool would set,
and the progress line."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.main import main
from node.cli.reassignment_plan import (
    ReassignmentFileError,
    dead_targets,
    missing_partitions,
    parse_reassignment,
    render_progress,
)
from node.clients.throttles import clear_throttle_resources, throttle_plan, throttle_resources


def test_a_good_file() -> None:
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]},'
        '{"topic":"u","partition":2,"replicas":[4]}]}'
    )
    assert parse_reassignment(text) == {("t", 0): [3, 1], ("u", 2): [4]}
    assert parse_reassignment(
        '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]}]}'
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"version":2,"partitions":[]}', "version 2"),
        ('{"version":1}', '"partitions" is missing'),
        ('{"partitions":[]}', "is empty"),
        ('{"partitions":[7]}', "entry 1 is not an object"),
        ('{"partitions":[{"partition":0,"replicas":[1]}]}', '"topic" is missing'),
        ('{"partitions":[{"topic":"t","replicas":[1]}]}', '"partition" is missing'),
        ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', "non-negative integer"),
        ('{"partitions":[{"topic":"t","partition":true,"replicas":[1]}]}', "non-negative integer"),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "non-negative integer"),
        ('{"partitions":[{"topic":"t","partition":0}]}', '"replicas" is missing'),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "non-empty list"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":["1"]}]}', "other than broker ids"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1.5]}]}', "other than broker ids"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,-2]}]}', "broker id -2 is negative"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "listed twice"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
            "t-0 is listed twice",
        ),
    ],
)
def test_bad_files_say_why_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(ReassignmentFileError) as e:
        parse_reassignment(text)
    assert reason in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("content", ["{", '{"partitions":[{"topic":"t","partition":0,"replicas":[-1]}]}'])
def test_the_command_exits_2_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(content)
    # Port 1 has nothing listening: a connection attempt would fail with exit 1, not 2.
    for command in ("execute", "verify", "cancel"):
        assert (
            main(
                [
                    "reassign",
                    command,
                    "--reassignment-json-file",
                    str(path),
                    "--bootstrap-server",
                    "127.0.0.1:1",
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err
    assert main(["reassign", "verify", "--reassignment-json-file", str(tmp_path / "none.json")]) == 2
    assert "cannot read it" in capsys.readouterr().err


def test_throttles_as_kafkas_tool_sets_them() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    targets = {("t", 0): [3, 4], ("t", 1): [2, 3], ("u", 0): [1, 5]}
    plan = throttle_plan(current, targets)
    # Leader throttle: the current replicas of moving partitions; follower: the adding ones.
    assert plan.topics == {"t": ("0:1,0:2", "0:3,0:4"), "u": ("0:1", "0:5")}
    assert plan.brokers == {1, 2, 3, 4, 5}, "t-1 does not move"
    resources = throttle_resources(plan, 1000)
    assert [(r.resource_type, r.resource_name) for r in resources] == [
        (4, "1"),
        (4, "2"),
        (4, "3"),
        (4, "4"),
        (4, "5"),
        (2, "t"),
        (2, "u"),
    ]
    assert {(c.name, c.value) for c in resources[0].configs} == {
        ("leader.replication.throttled.rate", "1000"),
        ("follower.replication.throttled.rate", "1000"),
    }
    cleared = clear_throttle_resources([2, 1], ["t", "t"])
    assert [(r.resource_type, r.resource_name) for r in cleared] == [(4, "1"), (4, "2"), (2, "t")]
    assert all(c.config_operation == 1 for r in cleared for c in r.configs)


def test_the_progress_line() -> None:
    line = render_progress(3, 10, 512 << 20, 1024 << 20, float(8 << 20))
    assert line.startswith("[############------------]  50.0%")
    assert "3/10 partitions" in line and "512.0 MiB of 1024.0 MiB" in line
    assert "8.0 MiB/s" in line and "0:01:04 left" in line
    assert "--:--:-- left" in render_progress(0, 1, 0, 100, None)
    assert "100.0%" in render_progress(1, 1, 0, 0, None)


def test_partitions_the_cluster_does_not_have_are_named() -> None:
    existing = {("pc", 0): [1, 2, 3], ("pc", 1): [2, 3, 1]}
    assert missing_partitions(existing, [("pc", 0), ("pc", 1)]) is None
    assert (
        missing_partitions(existing, [("nosuch", 0)]) == "nosuch-0 does not exist: there is no topic nosuch"
    )
    assert missing_partitions(existing, [("pc", 0), ("pc", 5)]) == (
        "pc-5 does not exist: pc has partitions 0 to 1"
    )


def test_moves_to_brokers_that_are_not_alive_are_named() -> None:
    """Kafka's rule: only the replicas a move adds must be alive; a dead replica may stay."""
    current = {("pc", 0): [1, 2, 9], ("pc", 1): [2, 3, 1]}
    live = {1, 2, 3}
    assert dead_targets(current, {("pc", 0): [9, 1, 2]}, live) is None
    assert dead_targets(current, {("pc", 1): [3, 1, 7], ("pc", 0): [1, 2, 3]}, live) == (
        "these moves go to brokers that are not alive: pc-1 to broker 7 (live brokers: 1,2,3)"
    )
