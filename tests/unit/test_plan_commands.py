"""`keel reassign plan|snapshot`: what is refused before anything connects or Spark starts, and
what a plan that executed says when a later step fails."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from node.cli import plan_commands
from node.cli.main import main
from node.command.entry import CommandError, PartialError
from node.command.output import OutputFile
from node.planner.session import master_problem


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


def test_outputs_are_opened_before_anything_connects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Nothing listens at 127.0.0.1:1: had the command connected first, it would say so, exit 1."""
    live = ["--bootstrap-server", "127.0.0.1:1", "--goal", "remove-brokers", "--remove-brokers", "3"]
    for outputs, words in (
        (["--output", "/nonexistent/dir/plan.json"], "cannot write --output /nonexistent/dir/plan.json"),
        (["--output", str(tmp_path)], f"--output {tmp_path} is a directory"),
        (
            ["--output", str(tmp_path / "p.json"), "--report", "/nonexistent/r.json"],
            "cannot write --report /nonexistent/r.json",
        ),
    ):
        assert main(["reassign", "plan", *live, "--execute", *outputs]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "p.json").exists()
    for args in (
        ["snapshot", "--zookeeper", "127.0.0.1:1", "--output", "/nonexistent/x.json"],
        ["plan", *live, "--planner", "nohost", "--output", str(tmp_path / "p.json")],
    ):
        assert main(["reassign", *args]) == 2
        assert capsys.readouterr().err.count("\n") == 1


def test_a_spark_master_is_checked_before_spark_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["reassign", "plan", "--goal", "rebalance", "--from-file", str(tmp_path / "none.json")]
    assert main([*args, "--spark-master", "bogus://x", "--output", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keel: --spark-master bogus://x: not a Spark master URL") and err.count("\n") == 1
    for good in (
        "local",
        "local[4]",
        "local[*]",
        "local[2,3]",
        "local-cluster[2,1,1024]",
        "spark://a:7077,b:7077",
    ):
        assert master_problem(good) is None, good
    for bad in ("bogus://x", "local[0]", "local[x]", "spark://a", "", "yarn-client"):
        assert master_problem(bad), bad


def test_an_output_file_keeps_what_was_there_until_written(tmp_path: Path) -> None:
    earlier = tmp_path / "plan.json"
    earlier.write_text("the previous plan, longer than the next one")
    with OutputFile(earlier, "--output"):
        pass  # the command failed before writing
    assert earlier.read_text() == "the previous plan, longer than the next one"
    with OutputFile(earlier, "--output") as out:
        out.write(b"next")
    assert earlier.read_text() == "next"
    with OutputFile(tmp_path / "new.json", "--output"):
        pass
    assert not (tmp_path / "new.json").exists()


EXECUTING = {"plan_id": "p-42", "executing": True}
PLAN = {"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [1, 2]}]}


def test_a_write_that_fails_after_the_plan_executes_says_what_was_done(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """/dev/full opens but refuses every write (ENOSPC): the plan runs and the file fails."""
    with pytest.raises(PartialError) as caught, OutputFile(Path("/dev/full"), "--output") as out:
        plan_commands._write(out, None, PLAN, EXECUTING)
    assert caught.value.status == 3
    message = str(caught.value)
    assert "plan p-42 is executing (1 partitions" in message and "cannot write /dev/full" in message
    assert "\n" not in message
    assert orjson.loads(capsys.readouterr().out) == PLAN
    # The plan file written, the report not: still partial, naming the report.
    with (
        pytest.raises(PartialError, match="cannot write /dev/full"),
        OutputFile(tmp_path / "p.json", "--output") as out,
        OutputFile(Path("/dev/full"), "--report") as report,
    ):
        plan_commands._write(out, report, PLAN, EXECUTING)
    assert orjson.loads((tmp_path / "p.json").read_bytes()) == PLAN
    # Not executing: a plain failure, nothing on stdout.
    capsys.readouterr()
    with pytest.raises(CommandError) as failed, OutputFile(Path("/dev/full"), "--output") as out:
        plan_commands._write(out, None, PLAN, {"plan_id": "p-43"})
    assert failed.value.status == 1 and "nothing was executed" in str(failed.value)
    assert capsys.readouterr().out == ""
