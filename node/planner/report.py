"""A plan's report: movement against its lower bound, and the balance before and after.

moves              sum _p |new_p \\ old_p| (a reorder within the same set is no move)
bytes              sum  over moved replicas of the partition's size
leader_changes     partitions whose new first replica is not the current leader
lower_bound        max(count, topic, rack) (docs/PLANNER.md)
spread             max - min over the target brokers, before and after, of replicas,
                   preferred leaders and bytes; topic spread is the largest over topics
rack_violations    sum _p sum _rack max(0, replicas in the rack - cap_p)
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import orjson

from node.planner.targets import Cells

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row

    from node.planner.context import PlanContext
    from node.planner.request import PlanRequest
    from node.planner.targets import CellPlan


def _violations(ctx: PlanContext, replicas: Column) -> Column:
    from pyspark.sql import functions as F

    return ctx.rack_violations(replicas, F.col("cap"))


def _changed(rows: DataFrame) -> list[dict[str, Any]]:
    """The changed partitions as Kafka's reassignment entries, by topic and partition. Each
    topic's entries come to the driver as one JSON document (sorted in Spark), not as a
    Row per partition: a Row with an array is far slower to unpickle than JSON to parse."""
    from pyspark.sql import functions as F

    per_topic = (
        rows.groupBy("topic")
        .agg(F.array_sort(F.collect_list(F.struct("partition", F.col("new").alias("replicas")))).alias("e"))
        .select("topic", F.to_json("e").alias("json"))
        .collect()
    )
    return [
        {"topic": r.topic, **entry}
        for r in sorted(per_topic, key=lambda r: r.topic)
        for entry in orjson.loads(r.json)
    ]


def _per_broker(rows: DataFrame, side: int) -> list[Row]:
    """Replicas, preferred leaders and bytes per broker, from exploded replicas (pos,
    broker, size) or from cells (broker, replicas, leaders, bytes); `side` 0 before, 1 after."""
    from pyspark.sql import functions as F

    if "pos" in rows.columns:
        rows = rows.select(
            "broker",
            F.lit(1).alias("replicas"),
            (F.col("pos") == 0).cast("int").alias("leaders"),
            F.col("size").alias("bytes"),
        )
    return (
        rows.groupBy("broker")
        .agg(
            F.sum("replicas").alias("replicas"),
            F.sum("leaders").alias("leaders"),
            F.sum("bytes").alias("bytes"),
        )
        .withColumn("side", F.lit(side))
        .collect()
    )


def _cells_after(joined: DataFrame) -> DataFrame:
    """(topic, broker) cells after the plan: replicas, preferred leaders, bytes (one
    explode), checkpointed for the per-broker table and the per-topic spread."""
    from pyspark.sql import functions as F

    return (
        joined.select("topic", F.posexplode("new").alias("pos", "broker"), "size")
        .groupBy("topic", "broker")
        .agg(
            F.count("*").alias("replicas"),
            F.sum((F.col("pos") == 0).cast("int")).alias("leaders"),
            F.sum("size").alias("bytes"),
        )
        .localCheckpoint()
    )


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0


def build_report(  # noqa: PLR0917
    ctx: PlanContext,
    before: DataFrame,
    after: DataFrame,
    cells: Cells,
    cell_plan: CellPlan | None,
    request: PlanRequest,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report and the changed partitions (Kafka's reassignment entries)."""
    from pyspark.sql import functions as F

    n_racks = len({ctx.racks[b] for b in ctx.targets})
    carried = "old_replicas" in after.columns
    if carried:
        # The plan carried each partition's replicas before it along (and checkpointed
        # `after`): no join and no cache.
        both = after.select(
            "topic",
            "partition",
            "leader",
            "size",
            F.col("old_replicas").alias("old"),
            F.col("replicas").alias("new"),
        )
    else:
        both = before.select("topic", "partition", "leader", "size", F.col("replicas").alias("old")).join(
            after.select("topic", "partition", F.col("replicas").alias("new")), ["topic", "partition"]
        )
    # The per-partition rack cap (targets.rack_cap) depends on the replication factor only.
    rf = F.size("old")
    joined = both.withColumn(
        "cap", F.when(rf <= n_racks, 1).otherwise(F.ceil(rf / n_racks).cast("int"))
    ).withColumn("added", F.size(F.array_except("new", "old")))
    if not carried:
        joined = joined.cache()
    # A partition the plan leaves as it was keeps its violations: only changed ones are
    # checked again.
    totals = (
        joined.withColumn("violations", _violations(ctx, F.col("old")))
        .agg(
            F.sum("added").alias("moves"),
            F.sum(F.col("added") * F.col("size")).alias("bytes"),
            F.sum((F.col("new")[0] != F.coalesce("leader", F.col("old")[0])).cast("int")).alias(
                "leader_changes"
            ),
            F.sum((F.col("new")[0] != F.col("old")[0]).cast("int")).alias("preferred_changes"),
            F.sum("violations").alias("violations_before"),
            F.sum(
                F.when(F.col("new") == F.col("old"), F.col("violations")).otherwise(
                    _violations(ctx, F.col("new"))
                )
            ).alias("violations_after"),
            F.count("*").alias("partitions"),
        )
        .first()
    )
    assert totals is not None
    changed = _changed(joined.where(F.col("new") != F.col("old")))
    cells_after = _cells_after(joined)
    per_broker = _per_broker(
        joined.select(F.posexplode("old").alias("pos", "broker"), "size"), 0
    ) + _per_broker(cells_after, 1)
    topic_after = (
        cells_after.where(F.col("broker").isin(ctx.targets))
        .groupBy("topic")
        .agg(F.max("replicas").alias("hi"), F.min("replicas").alias("lo"), F.count("*").alias("cells"))
        .collect()
    )
    joined.unpersist()

    table: dict[int, dict[str, Any]] = defaultdict(
        lambda: {f"{k}_{s}": 0 for k in ("replicas", "leaders", "bytes") for s in ("before", "after")}
    )
    for row in per_broker:
        side = "after" if row.side else "before"
        entry = table[row.broker]
        entry[f"replicas_{side}"] = row.replicas
        entry[f"leaders_{side}"] = row.leaders
        entry[f"bytes_{side}"] = row.bytes
    for b in ctx.targets:
        _ = table[b]
    brokers = []
    for b in sorted(table):
        brokers.append(
            {
                "broker": b,
                "rack": ctx.racks.get(b),
                "target": b in ctx.targets,
                **({"target_replicas": cell_plan.broker_targets.get(b, 0)} if cell_plan else {}),
                **table[b],
            }
        )

    def spread_of(key: str) -> dict[str, float]:
        return {
            side: _spread([table[b][f"{key}_{side}"] for b in ctx.targets]) for side in ("before", "after")
        }

    m = len(ctx.targets)
    target = set(ctx.targets)
    topic_before = []
    for cell_row in cells.values():
        counts = [c for b, c in cell_row.items() if b in target]
        hi = max(counts, default=0)
        lo = min(counts, default=0) if len(counts) == m else 0
        topic_before.append(hi - lo)
    topic_after_spreads = [r.hi - (r.lo if r.cells == m else 0) for r in topic_after]
    bound = dict(cell_plan.lower_bound) if cell_plan else {"count": 0, "topic": 0}
    against_rack_shares = bool(bound.pop("rack_shares", 0))
    bound["rack"] = int(totals.violations_before or 0)
    lower = max(bound.values()) if request.moves_data else 0
    moves = int(totals.moves or 0)
    mean_bytes = sum(table[b]["bytes_after"] for b in ctx.targets) / m
    report: dict[str, Any] = {
        "goals": list(request.goals),
        "balance": request.balance,
        "target_brokers": ctx.targets,
        "topics": len(ctx.replication),
        "partitions": int(totals.partitions or 0),
        "moves": moves,
        "lower_bound": lower,
        "lower_bounds": bound,
        "lower_bound_against_rack_shares": against_rack_shares,
        "moves_over_lower_bound": round(moves / lower, 4) if lower else (0.0 if moves == 0 else None),
        "bytes": int(totals.bytes or 0),
        "leader_changes": int(totals.leader_changes or 0),
        "preferred_leader_changes": int(totals.preferred_changes or 0),
        "changed_partitions": len(changed),
        "replica_spread": spread_of("replicas"),
        "leader_spread": spread_of("leaders"),
        "bytes_spread": spread_of("bytes"),
        "bytes_spread_pct_of_mean": {
            side: round(100 * spread_of("bytes")[side] / mean_bytes, 2) if mean_bytes else 0.0
            for side in ("before", "after")
        },
        "topic_spread": {
            "before": max(topic_before, default=0),
            "after": max(topic_after_spreads, default=0),
        },
        "topics_spread_over_1": {
            "before": sum(1 for s in topic_before if s > 1),
            "after": sum(1 for s in topic_after_spreads if s > 1),
        },
        "rack_violations": {
            "before": int(totals.violations_before or 0),
            "after": int(totals.violations_after or 0),
        },
        "brokers": brokers,
    }
    return report, changed
