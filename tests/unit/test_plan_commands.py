"""`keel reassign plan|snapshot`: what is refused before anything connects or Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.main import main


def test_an_unknown_goal_is_refused_before_connecting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["reassign", "plan", "--goal", "rebalance,shuffle", "--bootstrap-server", "127.0.0.1:1"]
    assert main([*args, "--output", str(tmp_path / "p.json")]) == 2
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
    assert "--execute needs the cluster's planner" in capsys.readouterr().err
