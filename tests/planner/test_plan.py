"""Plans on synthetic snapshots: the hard constraints, the balance promised, movement within
1.05 x the lower bound, and no churn when planning again on a plan's result."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from node.planner.plan import PlanResult, plan
from node.planner.request import PlanError, PlanRequest
from node.planner.snapshot import Snapshot, snapshot_from_rows
from node.planner.synthetic import Shape, synthetic_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Layout = dict[tuple[str, int], list[int]]


def layout_of(snapshot: Snapshot) -> Layout:
    return {(r.topic, r.partition): list(r.replicas) for r in snapshot.partitions.collect()}


def applied(before: Layout, result: PlanResult) -> Layout:
    after = dict(before)
    for entry in result.partitions:
        key = (entry["topic"], entry["partition"])
        assert key in before, f"plan names unknown partition {key}"
        after[key] = entry["replicas"]
    return after


def spread(values: list[int]) -> int:
    return max(values) - min(values)


def check(
    spark: SparkSession,
    snapshot: Snapshot,
    request: PlanRequest,
    result: PlanResult,
    *,
    balanced: bool = True,
    weights: dict[int, float] | None = None,
) -> Layout:
    """Every hard constraint, the movement bound and (when `balanced`) the balance promises."""
    brokers = {r.id: r for r in snapshot.brokers.collect()}
    before = layout_of(snapshot)
    after = applied(before, result)
    report = result.report
    targets = set(report["target_brokers"])
    racks = {b: brokers[b].rack for b in targets}
    rack_count = len(set(racks.values())) if None not in racks.values() else 0
    moves = 0
    for key, replicas in after.items():
        old = before[key]
        assert len(replicas) == len(old), f"{key}: replication factor changed"
        assert len(set(replicas)) == len(replicas), f"{key}: a broker twice"
        if replicas != old:
            assert request.topics is None or key[0] in request.topics, f"{key}: out of scope"
            assert all(b in targets and brokers[b].alive for b in replicas), (
                f"{key}: {replicas} not all live targets"
            )
        if request.moves_data and (request.topics is None or key[0] in request.topics):
            assert all(b in targets for b in replicas), f"{key}: {replicas} left on a non-target broker"
            if rack_count >= len(replicas):
                assert len({racks[b] for b in replicas}) == len(replicas), f"{key}: two replicas in one rack"
        moves += len(set(replicas) - set(old))
    assert moves == report["moves"]
    assert report["rack_violations"]["after"] == 0
    if request.moves_data:
        assert moves <= 1.05 * report["lower_bound"], report
    else:
        assert moves == 0
    if balanced:
        in_scope = {k: v for k, v in after.items() if request.topics is None or k[0] in request.topics}
        replicas_on = Counter(b for v in in_scope.values() for b in v)
        leaders_on = Counter(v[0] for v in in_scope.values())
        cells: dict[str, Counter[int]] = defaultdict(Counter)
        for (topic, _), v in in_scope.items():
            cells[topic].update(v)
        w = weights or {}
        wsum = sum(w.get(b, 1.0) for b in targets)
        total = sum(replicas_on.values())
        for b in targets:
            share = total * w.get(b, 1.0) / wsum
            assert math.floor(share) - 1 < replicas_on[b] < math.ceil(share) + 1 or (
                math.floor(share) <= replicas_on[b] <= math.ceil(share)
            ), f"broker {b}: {replicas_on[b]} replicas, share {share:.1f}"
            lead_share = len(in_scope) * w.get(b, 1.0) / wsum
            assert math.floor(lead_share) <= leaders_on[b] <= math.ceil(lead_share), f"broker {b} leaders"
        if weights is None:
            assert spread([replicas_on[b] for b in targets]) <= 1
            assert spread([leaders_on[b] for b in targets]) <= 1
            for topic, counter in cells.items():
                assert spread([counter[b] for b in targets]) <= 1, f"topic {topic} spread"
    return after


def replan(spark: SparkSession, snapshot: Snapshot, after: Layout, request: PlanRequest) -> PlanResult:
    brokers = [r.asDict() for r in snapshot.brokers.collect()]
    partitions = [{"topic": t, "partition": p, "replicas": v} for (t, p), v in sorted(after.items())]
    return plan(spark, snapshot_from_rows(spark, brokers, partitions), request)


def test_adding_brokers_moves_the_lower_bound_and_replanning_proposes_nothing(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=20, partitions=12, brokers=6, new=2))
    request = PlanRequest()
    result = plan(spark, snapshot, request)
    after = check(spark, snapshot, request, result)
    assert result.report["moves"] > 0
    # No replica moves from one old broker to another: only the new brokers receive.
    before = layout_of(snapshot)
    for key, replicas in after.items():
        assert all(b >= 6 for b in set(replicas) - set(before[key]))
    again = replan(spark, snapshot, after, request)
    assert again.partitions == []
    assert again.report["moves"] == 0


def test_equal_racks_stay_rack_safe_and_balanced(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=20, partitions=12, brokers=6, racks=3, new=3))
    request = PlanRequest()
    result = plan(spark, snapshot, request)
    after = check(spark, snapshot, request, result)
    assert replan(spark, snapshot, after, request).partitions == []


def test_unequal_racks_keep_racks_first(spark: SparkSession) -> None:
    # Two new brokers in rack r0: each partition keeps one replica per rack, so r0's brokers
    # cannot reach the cluster-wide mean; the bound is taken against the rack shares.
    snapshot = synthetic_snapshot(
        spark, Shape(topics=12, partitions=12, brokers=6, racks=3, new=2, new_rack="r0")
    )
    request = PlanRequest()
    result = plan(spark, snapshot, request)
    check(spark, snapshot, request, result, balanced=False)
    assert result.report["lower_bound_against_rack_shares"] is True
    rows = {b["broker"]: b for b in result.report["brokers"]}
    r0 = [rows[b]["replicas_after"] for b in (0, 3, 6, 7)]
    assert spread(r0) <= 1
    assert result.report["leader_spread"]["after"] <= 1


def test_removing_a_broker_drains_it(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=15, partitions=10, brokers=6, racks=0))
    request = PlanRequest(goals=("remove-brokers",), remove_brokers=(5,))
    result = plan(spark, snapshot, request)
    after = check(spark, snapshot, request, result)
    assert not any(5 in v for v in after.values())
    assert replan(spark, snapshot, after, request).partitions == []


def test_uneven_topics_from_a_skewed_start(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(
        spark, Shape(topics=25, partitions=8, brokers=8, racks=2, new=1, skew=0.5, uneven=True)
    )
    request = PlanRequest()
    result = plan(spark, snapshot, request)
    check(spark, snapshot, request, result)
    assert result.report["replica_spread"]["before"] > 10


def test_heal_replaces_every_replica_on_a_dead_broker(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=15, partitions=10, brokers=6, racks=3, dead=(2,)))
    request = PlanRequest(goals=("heal",))
    result = plan(spark, snapshot, request)
    after = check(spark, snapshot, request, result, balanced=False)
    dead_replicas = sum(v.count(2) for v in layout_of(snapshot).values())
    assert result.report["moves"] == dead_replicas == result.report["lower_bound"]
    assert not any(2 in v for v in after.values())
    assert result.report["replica_spread"]["after"] <= 1


def test_capacity_weights_share_replicas(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=20, partitions=12, brokers=4, new=1))
    weights = {4: 2.0}
    request = PlanRequest(capacity=weights)
    result = plan(spark, snapshot, request)
    check(spark, snapshot, request, result, weights=weights)
    rows = {b["broker"]: b["replicas_after"] for b in result.report["brokers"]}
    assert rows[4] == pytest.approx(2 * rows[0], abs=2)


def test_topics_limit_the_scope(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=10, partitions=12, brokers=6, new=2))
    request = PlanRequest(topics=("topic-00001", "topic-00004"))
    result = plan(spark, snapshot, request)
    check(spark, snapshot, request, result)
    assert {e["topic"] for e in result.partitions} <= {"topic-00001", "topic-00004"}
    assert result.partitions


def test_leaders_reorders_replica_lists_only(spark: SparkSession) -> None:
    rows = [
        {"topic": "t", "partition": p, "replicas": [1 + (p % 2), 3, 1 + (p + 1) % 2], "size_bytes": 10}
        for p in range(12)
    ]
    brokers = [{"id": b, "rack": None, "alive": True} for b in (1, 2, 3)]
    snapshot = snapshot_from_rows(spark, brokers, rows)
    request = PlanRequest(goals=("leaders",))
    result = plan(spark, snapshot, request)
    after = check(spark, snapshot, request, result)
    assert result.report["moves"] == 0 and result.report["bytes"] == 0
    assert Counter(v[0] for v in after.values()) == {1: 4, 2: 4, 3: 4}
    for key, replicas in layout_of(snapshot).items():
        assert sorted(after[key]) == sorted(replicas)


def test_a_request_that_cannot_be_planned_is_one_clear_error(spark: SparkSession) -> None:
    with pytest.raises(PlanError, match="unknown goal 'shuffle'"):
        PlanRequest(goals=("shuffle",))
    snapshot = synthetic_snapshot(spark, Shape(topics=2, partitions=2, brokers=4))
    with pytest.raises(PlanError, match="broker 42 does not exist"):
        plan(spark, snapshot, PlanRequest(brokers=(0, 1, 2, 42)))
    with pytest.raises(PlanError, match="broker 7 does not exist"):
        plan(spark, snapshot, PlanRequest(goals=("remove-brokers",), remove_brokers=(7,)))
    with pytest.raises(PlanError, match="unknown topic nope"):
        plan(spark, snapshot, PlanRequest(topics=("nope",)))
    with pytest.raises(PlanError, match="replication factor 3 but only 2 target brokers"):
        plan(spark, snapshot, PlanRequest(brokers=(0, 1)))


def _report_keys(report: dict[str, Any]) -> set[str]:
    return set(report)


def test_the_report_says_what_the_plan_does(spark: SparkSession) -> None:
    snapshot = synthetic_snapshot(spark, Shape(topics=4, partitions=6, brokers=3, new=1))
    result = plan(spark, snapshot, PlanRequest())
    assert {
        "moves",
        "lower_bound",
        "bytes",
        "leader_changes",
        "replica_spread",
        "leader_spread",
        "topic_spread",
        "rack_violations",
        "seconds",
        "brokers",
    } <= _report_keys(result.report)
    assert result.to_reassignment_json() == {"version": 1, "partitions": result.partitions}
    new_broker = next(b for b in result.report["brokers"] if b["broker"] == 3)
    assert new_broker["replicas_before"] == 0 and new_broker["replicas_after"] == 18
