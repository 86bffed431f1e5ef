"""Snapshots, requests, the cell targets and the `--generate` baseline, without Spark; and
`keel reassign plan` failing in one line before Spark starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from node.planner.baseline import generate
from node.planner.request import PlanError, PlanRequest
from node.planner.snapshot import SnapshotError, parse_snapshot, read_snapshot_rows
from node.planner.targets import allocate, cell_targets, water_fill
from tests.support import keel

GOOD = {
    "version": 1,
    "brokers": [{"id": 1, "rack": None, "alive": True}, {"id": 2, "rack": "a", "alive": False}],
    "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "leader": 1, "size_bytes": 5}],
}


def test_a_good_snapshot_parses() -> None:
    brokers, partitions = parse_snapshot(GOOD)
    assert brokers == [(1, None, True, None), (2, "a", False, None)]
    assert partitions == [("t", 0, [1, 2], 1, 5)]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "not a JSON object"),
        ({"brokers": []}, '"partitions" is missing'),
        ({"brokers": [{"rack": None}], "partitions": []}, 'brokers entry 1: "id" is missing'),
        ({"brokers": [], "partitions": [{"topic": "t", "replicas": [1]}]}, '"partition" is missing'),
        ({"brokers": [], "partitions": [{"topic": "t", "partition": 0}]}, 't-0: "replicas" is missing'),
        (
            {"brokers": [], "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]},
            "a broker twice",
        ),
        (
            {"brokers": [], "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2},
            "partition t-0 is listed twice",
        ),
        ({"version": 2, "brokers": [], "partitions": []}, "version 2 is not 1"),
    ],
)
def test_a_bad_snapshot_is_one_line(document: object, message: str) -> None:
    with pytest.raises(SnapshotError, match=message) as caught:
        parse_snapshot(document)
    assert "\n" not in str(caught.value)


def test_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text("{brokers: nope")
    with pytest.raises(SnapshotError, match="not JSON"):
        read_snapshot_rows(path)
    with pytest.raises(SnapshotError, match="cannot read"):
        read_snapshot_rows(tmp_path / "missing.json")


def test_requests_are_checked() -> None:
    with pytest.raises(PlanError, match="unknown goal"):
        PlanRequest(goals=("rebalance", "teleport"))
    with pytest.raises(PlanError, match="needs the brokers to remove"):
        PlanRequest(goals=("remove-brokers",))
    with pytest.raises(PlanError, match="unknown balance"):
        PlanRequest(balance="cpu")


def test_water_fill_caps_a_share() -> None:
    assert water_fill(10, [1, 1, 2], None) == pytest.approx([2.5, 2.5, 5])
    assert water_fill(10, [1, 1, 2], 4) == pytest.approx([3, 3, 4])


def test_ceil_slots_go_where_replicas_already_are() -> None:
    # 7 replicas over 3 brokers: floor 2, one ceil slot, which broker 2 (holding 3) keeps.
    current = {"t": {1: 2, 2: 3, 3: 2}}
    allocation = allocate({"t": 7}, [1, 2, 3], {1: 1, 2: 1, 3: 1}, current, None)
    assert allocation.targets == {"t": {1: 2, 2: 3, 3: 2}}


def test_broker_totals_balance_through_free_slot_choices() -> None:
    # Two topics of 4 replicas over 3 brokers: whichever broker gets both ceil slots would be
    # over its total, so the slots land on different brokers.
    current = {"a": {1: 2, 2: 1, 3: 1}, "b": {1: 2, 2: 1, 3: 1}}
    plan = cell_targets(current, {"a": 4, "b": 4}, {"a": 1, "b": 1}, [1, 2, 3], {1: 1, 2: 1, 3: 1}, None)
    totals = [sum(plan.targets[t][b] for t in plan.targets) for b in (1, 2, 3)]
    assert sorted(totals) == [2, 3, 3]
    assert plan.lower_bound == {"count": 1, "topic": 0, "rack_shares": 0}


def test_generate_places_every_topic_from_a_seed() -> None:
    layout = generate({"a": (6, 2), "b": (3, 3)}, [1, 2, 3], None, seed=1)
    assert layout == generate({"a": (6, 2), "b": (3, 3)}, [1, 2, 3], None, seed=1)
    assert [len(layout["a"]), len(layout["b"])] == [6, 3]


def _keel(*args: str) -> subprocess.CompletedProcess[str]:
    return keel("reassign", "plan", *args)


def test_the_command_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    good = tmp_path / "cluster.json"
    good.write_bytes(orjson.dumps(GOOD))
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    missing = tmp_path / "missing.json"
    missing.write_bytes(orjson.dumps({"brokers": []}))
    out = str(tmp_path / "plan.json")
    for args, message in (
        (["--from-file", str(good), "--goal", "shuffle"], "unknown goal 'shuffle'"),
        (["--from-file", str(bad), "--goal", "rebalance"], "not JSON"),
        (["--from-file", str(missing), "--goal", "rebalance"], '"partitions" is missing'),
    ):
        done = _keel(*args, "--output", out)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert not Path(out).exists()
    # Without --from-file the plan is asked of the cluster's planner: no cluster, one line.
    done = _keel("--goal", "rebalance", "--bootstrap-server", "127.0.0.1:1", "--output", out)
    assert done.returncode == 1, done.stderr
    assert "cannot connect to 127.0.0.1:1" in done.stderr and done.stderr.count("\n") == 1
    assert not Path(out).exists()
