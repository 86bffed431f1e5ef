"""A cluster placed without regard to racks, planned with racks: every replica that breaks the
rack rule leaves, even where its cell holds no surplus, and the count balance holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from node.planner.plan import plan
from node.planner.request import PlanRequest
from node.planner.snapshot import Snapshot, snapshot_from_rows
from tests.planner.test_plan import check, replan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def rack_unaware(spark: SparkSession, topics: int, partitions: int, replication: int) -> Snapshot:
    """Replicas round-robin over brokers 1..6, neighbours sharing a rack: balanced counts,
    many partitions with two replicas in one rack."""
    brokers = [{"id": b, "rack": r, "alive": True} for b, r in RACKS.items()]
    rows = [
        {
            "topic": f"t{t}",
            "partition": p,
            "replicas": [1 + (p + t + k) % 6 for k in range(replication)],
            "size_bytes": 1000 + p,
        }
        for t in range(topics)
        for p in range(partitions)
    ]
    return snapshot_from_rows(spark, brokers, rows)


@pytest.mark.parametrize(
    ("topics", "partitions", "replication"),
    [(1, 6, 2), (1, 12, 2), (4, 12, 3)],
    ids=["odd-violations", "paired-violations", "rf3-topics"],
)
def test_violations_without_surplus_are_repaired(
    spark: SparkSession, topics: int, partitions: int, replication: int
) -> None:
    snapshot = rack_unaware(spark, topics, partitions, replication)
    request = PlanRequest()
    result = plan(spark, snapshot, request)
    report = result.report
    assert report["rack_violations"]["before"] > 0
    assert report["rack_repair"]["swaps"] > 0
    # check(): no rack holds two replicas of a partition, counts balanced, moves within 1.05 x
    # the bound (which counts one move per violation).
    after = check(spark, snapshot, request, result)
    assert replan(spark, snapshot, after, request).partitions == []


def test_the_check_counts_per_rack_when_racks_are_fewer_than_replicas(spark: SparkSession) -> None:

    from node.planner.context import PlanContext, rack_lookup
    from node.planner.rack_repair import has_violations

    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "b"}
    ctx = PlanContext(
        spark=spark,
        targets=sorted(racks),
        racks=racks,
        enforce_racks=True,
        rack_of=rack_lookup(racks),
        replication={"t": 3},
        partitions={"t": 1},
        weights=dict.fromkeys(racks, 1.0),
    )

    def frame(*layouts: list[int]) -> Any:
        return spark.createDataFrame([(r,) for r in layouts], "replicas array<int>")

    # RF 3 over two racks: two in one rack is the cap, three is one too many.
    assert not has_violations(ctx, frame([1, 2, 4], [4, 5, 3]))
    assert has_violations(ctx, frame([1, 2, 4], [1, 2, 3]))
    # RF 2: one per rack.
    assert has_violations(ctx, frame([1, 4], [5, 6]))
