"""`--balance bytes` on synthetic snapshots whose topics differ twentyfold in size: every
target broker within +-5 % of its share of the bytes, the count plan's promises kept, and
nothing proposed when planning again on the result (sizes included)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from node.planner.plan import PlanResult, plan
from node.planner.request import PlanError, PlanRequest
from node.planner.snapshot import Snapshot, snapshot_from_rows
from node.planner.synthetic import Shape, synthetic_snapshot
from tests.planner.test_plan import Layout, check

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def skewed_sizes(spark: SparkSession, shape: Shape) -> Snapshot:
    """A synthetic snapshot whose first three topics are twenty times larger than the rest."""
    from pyspark.sql import functions as F

    snapshot = synthetic_snapshot(spark, shape)
    heavy = F.col("topic") < F.lit("topic-00003")
    sized = snapshot.partitions.withColumn(
        "size_bytes", F.when(heavy, F.col("size_bytes") * 20).otherwise(F.col("size_bytes"))
    )
    return Snapshot(brokers=snapshot.brokers, partitions=sized)


def sizes_of(snapshot: Snapshot) -> dict[tuple[str, int], int]:
    return {(r.topic, r.partition): r.size_bytes or 0 for r in snapshot.partitions.collect()}


def bytes_on(
    layout: Layout, size: dict[tuple[str, int], int], topics: tuple[str, ...] | None
) -> Counter[int]:
    on: Counter[int] = Counter()
    for key, replicas in layout.items():
        if topics is None or key[0] in topics:
            for b in replicas:
                on[b] += size[key]
    return on


def replan_sized(spark: SparkSession, snapshot: Snapshot, after: Layout, request: PlanRequest) -> PlanResult:
    """Plan again on `after`, each partition keeping its size."""
    size = sizes_of(snapshot)
    brokers = [r.asDict() for r in snapshot.brokers.collect()]
    partitions = [
        {"topic": t, "partition": p, "replicas": v, "size_bytes": size[t, p]}
        for (t, p), v in sorted(after.items())
    ]
    return plan(spark, snapshot_from_rows(spark, brokers, partitions), request)


def check_bytes(
    spark: SparkSession,
    snapshot: Snapshot,
    request: PlanRequest,
    result: PlanResult,
    weights: dict[int, float] | None = None,
) -> Layout:
    """The hard constraints and count promises, the count plan's moves within 1.05 x the
    bound (the swaps' extra moves on top), and every target broker within +-5 % of its share."""
    report = result.report
    count_moves = report["bytes_balance"]["count_plan_moves"]
    assert count_moves <= 1.05 * report["lower_bound"], report
    # check() bounds all moves by the count bound; the swaps' moves are on top of it.
    unbounded = PlanResult(
        partitions=result.partitions, report={**report, "lower_bound": report["moves"] / 1.05}
    )
    after = check(spark, snapshot, request, unbounded, weights=weights)
    on = bytes_on(after, sizes_of(snapshot), request.topics)
    targets = report["target_brokers"]
    w = weights or {}
    wsum = sum(w.get(b, 1.0) for b in targets)
    total = sum(on[b] for b in targets)
    for b in targets:
        share = total * w.get(b, 1.0) / wsum
        assert abs(on[b] - share) <= 0.05 * share, f"broker {b}: {on[b]} bytes, share {share:.0f}"
    assert report["bytes_balance"]["outside_band"] == []
    return after


@pytest.mark.parametrize(
    ("shape", "weights"),
    [
        (Shape(topics=20, partitions=12, brokers=6, new=2), None),
        (Shape(topics=20, partitions=12, brokers=6, racks=3, new=3), None),
        (Shape(topics=25, partitions=8, brokers=8, racks=2, new=1, skew=0.5, uneven=True), None),
        (Shape(topics=20, partitions=12, brokers=4, new=1), {4: 2.0}),
    ],
    ids=["new-brokers", "racks", "skewed-uneven", "capacity"],
)
def test_balance_bytes_brings_every_broker_within_5_percent(
    spark: SparkSession, shape: Shape, weights: dict[int, float] | None
) -> None:
    snapshot = skewed_sizes(spark, shape)
    request = PlanRequest(balance="bytes", capacity=weights)
    result = plan(spark, snapshot, request)
    after = check_bytes(spark, snapshot, request, result, weights)
    stats = result.report["bytes_balance"]
    # The count plan alone leaves the bytes out of balance; the swaps are what fix them.
    assert stats["count_plan_spread_pct_of_mean"] > 10, stats
    assert stats["swaps"] > 0
    assert result.report["bytes_spread_pct_of_mean"]["after"] < stats["count_plan_spread_pct_of_mean"]
    again = replan_sized(spark, snapshot, after, request)
    assert again.partitions == []
    assert again.report["bytes_balance"]["swaps"] == 0


def test_the_swaps_come_on_top_of_the_count_plan_and_are_counted(spark: SparkSession) -> None:
    snapshot = skewed_sizes(
        spark, Shape(topics=25, partitions=8, brokers=8, racks=2, new=1, skew=0.5, uneven=True)
    )
    by_bytes = plan(spark, snapshot, PlanRequest(balance="bytes")).report
    by_count = plan(spark, snapshot, PlanRequest()).report
    stats = by_bytes["bytes_balance"]
    assert stats["count_plan_moves"] == by_count["moves"]
    assert stats["count_plan_spread_pct_of_mean"] == pytest.approx(
        by_count["bytes_spread_pct_of_mean"]["after"], abs=0.01
    )
    assert by_bytes["moves"] == by_count["moves"] + stats["extra_moves"]


def test_balance_bytes_with_topics_and_a_removed_broker(spark: SparkSession) -> None:
    snapshot = skewed_sizes(spark, Shape(topics=10, partitions=24, brokers=6))
    topics = ("topic-00000", "topic-00001", "topic-00004", "topic-00005")
    request = PlanRequest(goals=("remove-brokers",), remove_brokers=(5,), topics=topics, balance="bytes")
    result = plan(spark, snapshot, request)
    after = check_bytes(spark, snapshot, request, result)
    assert not any(5 in v for k, v in after.items() if k[0] in topics)
    assert {e["topic"] for e in result.partitions} <= set(topics)
    assert replan_sized(spark, snapshot, after, request).partitions == []


def test_balance_bytes_needs_a_goal_that_moves_replicas() -> None:
    with pytest.raises(PlanError, match="rebalance or remove-brokers"):
        PlanRequest(goals=("heal",), balance="bytes")
