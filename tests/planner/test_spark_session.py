"""The planner's SparkSession: one per process, quiet, and working."""

from __future__ import annotations

import subprocess
import sys

from node.cluster.local import ROOT


def test_a_session_prints_nothing_of_its_own() -> None:
    # A fresh process, so the JVM's start-up is what is checked.
    code = (
        "from node.planner.session import spark_session\n"
        "s = spark_session('local[1]', {'spark.driver.memory': '512m'})\n"
        "print(s.range(10).selectExpr('sum(id) AS total').first().total)\n"
        "assert spark_session() is s\n"
        "s.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "45\n"
    assert done.stderr == "", f"Spark printed: {done.stderr!r}"
