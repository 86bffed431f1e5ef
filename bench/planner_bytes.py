"""`--balance bytes` against the count plan on the same input, in the same warm session.

The input is bench/planner.py's (topics of 100 partitions, RF 3, 90 brokers in 10 racks plus
10 new empty ones), with one topic in ten twenty times larger, so the count plan (which moves
small replicas first) leaves the brokers' bytes far apart. Each size is planned `--runs`
times both ways, alternating; the report gives the median seconds of each and their ratio,
the bytes spread (max - min, % of the mean) the count plan leaves and the bytes pass reaches,
the brokers left outside +-5 % of their share, and the extra moves the swaps cost.

    .venv/bin/python -m bench.planner_bytes [--sizes 10000,100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import orjson

from bench.election import cpu_model
from bench.planner import shape_for
from node.planner.plan import plan
from node.planner.request import PlanRequest
from node.planner.session import spark_session
from node.planner.snapshot import Snapshot
from node.planner.synthetic import synthetic_snapshot


def skewed(spark: Any, partitions: int) -> Snapshot:
    from pyspark.sql import functions as F

    snapshot = synthetic_snapshot(spark, shape_for(partitions))
    heavy = F.substring("topic", -1, 1) == F.lit("0")  # topic-...0: one topic in ten
    sized = snapshot.partitions.withColumn(
        "size_bytes", F.when(heavy, F.col("size_bytes") * 20).otherwise(F.col("size_bytes"))
    )
    return Snapshot(brokers=snapshot.brokers, partitions=sized)


def run_size(spark: Any, partitions: int, runs: int) -> dict[str, Any]:
    snapshot = skewed(spark, partitions)
    snapshot.partitions.cache().count()
    seconds: dict[str, list[float]] = {"count": [], "bytes": []}
    reports: dict[str, dict[str, Any]] = {}
    for _ in range(runs):
        for balance in ("count", "bytes"):
            started = time.monotonic()
            reports[balance] = plan(spark, snapshot, PlanRequest(balance=balance)).report
            seconds[balance].append(time.monotonic() - started)
        print(
            f"  {partitions:>9} partitions: count {seconds['count'][-1]:6.1f} s, "
            f"bytes {seconds['bytes'][-1]:6.1f} s",
            flush=True,
        )
    snapshot.partitions.unpersist()
    count, by_bytes = reports["count"], reports["bytes"]
    stats = by_bytes["bytes_balance"]
    medians = {k: round(statistics.median(v), 1) for k, v in seconds.items()}
    return {
        "partitions": partitions,
        "seconds": {k: [round(s, 1) for s in v] for k, v in seconds.items()},
        "median_seconds": medians,
        "bytes_over_count_time": round(medians["bytes"] / medians["count"], 2),
        "bytes_spread_pct_of_mean": {
            "start": count["bytes_spread_pct_of_mean"]["before"],
            "count_plan": count["bytes_spread_pct_of_mean"]["after"],
            "bytes_plan": by_bytes["bytes_spread_pct_of_mean"]["after"],
        },
        "outside_band": stats["outside_band"],
        "rounds": stats["rounds"],
        "swaps": stats["swaps"],
        "count_plan_moves": stats["count_plan_moves"],
        "lower_bound": by_bytes["lower_bound"],
        "extra_moves": stats["extra_moves"],
        "extra_moves_pct": round(100 * stats["extra_moves"] / max(1, stats["count_plan_moves"]), 2),
        "bytes_moved": {"count_plan": count["bytes"], "bytes_plan": by_bytes["bytes"]},
        "spreads_after": {
            k: by_bytes[k]["after"] for k in ("replica_spread", "leader_spread", "topic_spread")
        },
        "stage_seconds": by_bytes.get("stage_seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(args.master)
    sizes = [int(s) for s in args.sizes.split(",")]
    plan(spark, skewed(spark, 1000), PlanRequest(balance="bytes"))  # warm the JVM, untimed
    results = [run_size(spark, n, args.runs) for n in sizes]
    print(
        orjson.dumps(
            {"machine": cpu_model(), "date": time.strftime("%Y-%m-%d"), "results": results},
            option=orjson.OPT_INDENT_2,
        ).decode()
    )


if __name__ == "__main__":
    main()
