"""`keel reassign plan --from-file`: a fresh process plans a cluster.json with its own Spark."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support import keel


def test_plan_from_a_file_writes_the_plan_and_prints_the_table(tmp_path: Path) -> None:
    cluster = {
        "version": 1,
        "brokers": [{"id": b, "rack": None, "alive": True} for b in (1, 2, 3, 4)],
        "partitions": [
            {
                "topic": "orders",
                "partition": p,
                "replicas": [1 + p % 3, 1 + (p + 1) % 3],
                "size_bytes": 1 << 20,
            }
            for p in range(8)
        ],
    }
    source = tmp_path / "cluster.json"
    source.write_bytes(orjson.dumps(cluster))
    output, report = tmp_path / "plan.json", tmp_path / "report.json"
    done = keel(
        "reassign", "plan", "--from-file", str(source),
        "--goal", "rebalance", "--balance", "bytes", "--brokers", "1,2,3,4",
        "--output", str(output), "--report", str(report),
        "--spark-master", "local[1]",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    plan = orjson.loads(output.read_bytes())
    assert plan["version"] == 1 and plan["partitions"]
    written = orjson.loads(report.read_bytes())
    # 16 replicas over 4 brokers: broker 4 takes 4, which is the lower bound.
    assert written["moves"] == written["lower_bound"] == 4
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["BROKER", "RACK", "TARGET", "REPLICAS", "LEADERS", "GIB"]
    assert any(line.split()[:4] == ["4", "-", "0", "->"] for line in lines[1:6])
    assert any(line.startswith("Moves:") and "lower bound 4" in line for line in lines)
    # Equal sizes: the count plan already balances the bytes, so the bytes pass swaps nothing.
    assert "Bytes pass:       0 swaps in 0 rounds, 0 moves on top of the count plan's 4" in lines
