"""`keel reassign plan|snapshot`: what is refused before anything connects or Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.main import main
from node.cli.plan_commands import print_report


def test_an_unknown_goal_is_an_argument_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["reassign", "plan", "--goal", "rebalance,shuffle", "--output", str(tmp_path / "p.json")])
    assert caught.value.code == 2
    assert "unknown goal 'shuffle'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"version": 1', "not JSON"),
        ('{"version": 1, "brokers": []}', '"partitions" is missing'),
    ],
)
def test_a_bad_snapshot_file_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, words: str
) -> None:
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(content)
    output = tmp_path / "plan.json"
    code = main(
        ["reassign", "plan", "--goal", "rebalance", "--from-file", str(snapshot), "--output", str(output)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and words in err
    assert not output.exists()


def test_execute_needs_the_live_planner(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["reassign", "plan", "--goal", "rebalance", "--from-file", "x.json", "--execute"]
    assert main([*args, "--output", str(tmp_path / "p.json")]) == 2
    assert "--execute needs the live planner" in capsys.readouterr().err


def test_the_report_prints_its_figures_and_the_per_broker_table(capsys: pytest.CaptureFixture[str]) -> None:
    print_report(
        {
            "moves": 2,
            "lower_bound": 2,
            "replica_spread": {"before": 3, "after": 0},
            "brokers": [
                {"broker": 1, "replicas_before": 3, "replicas_after": 2},
                {"broker": 3, "replicas_before": 0, "replicas_after": 2},
            ],
        },
        2,
    )
    out = capsys.readouterr().out
    assert "moves: 2" in out and "replica_spread: before 3, after 0" in out
    assert "BROKER  REPLICAS_BEFORE  REPLICAS_AFTER" in out
