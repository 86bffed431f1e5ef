"""The rack repair: replicas that break the rack rule where the count plan had no reason to move
them (their cell holds no surplus) leave through same-topic swaps.

A replica violates when its partition's earlier replicas already fill its rack's cap (so the
first replicas, the preferred leader above all, stay). The violating replica of partition p on
broker a swaps with the replica of another partition q of the topic on broker b: p's goes to
b, q's comes to a, when neither partition then breaks the rule. A swap keeps every (topic,
broker) cell, so the count plan's balance holds. A partner that itself violates on b is
preferred: the swap then fixes both with one move each, which is what the rack bound counts;
then a partner whose replica the plan has just moved to b (moving it on costs nothing).

Each round is bulk passes: the replicas flagged (one posexplode), the violating ones ranked
per topic and joined to the topic's replicas spread over them by rank modulo their number,
the first valid partner per violating replica, one swap per partition, the swaps applied with
a join. Rounds go on while violations remain and swaps are found, at most ROUNDS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.planner.swaps import apply_swaps, moves_added, one_per_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from node.planner.context import PlanContext

ROUNDS = 6


def has_violations(ctx: PlanContext, partitions: DataFrame) -> bool:
    """Whether any partition breaks the rack rule (one filter over `partitions`)."""
    from pyspark.sql import functions as F

    if not ctx.enforce_racks or ctx.rack_of is None:
        return False
    replicas = F.col("replicas")
    breaks = ctx.rack_violations(replicas, ctx.rack_cap(replicas)) > 0
    return not partitions.select("replicas").where(breaks).isEmpty()


def repair_racks(ctx: PlanContext, before: DataFrame, after: DataFrame) -> tuple[DataFrame, dict[str, Any]]:
    """`after` with violating replicas swapped out, and what the pass did."""
    from pyspark.sql import functions as F

    state = (
        after.select("topic", "partition", "replicas", "leader", "size")
        .join(before.select("topic", "partition", F.col("replicas").alias("old")), ["topic", "partition"])
        .localCheckpoint()
    )
    stats: dict[str, Any] = {"rounds": 0, "swaps": 0, "extra_moves": 0}
    for round_number in range(ROUNDS):
        flagged = _flagged(ctx, state).localCheckpoint()
        if flagged.where("violating").isEmpty():
            break
        chosen = _choose_swaps(ctx, flagged, round_number).localCheckpoint()
        totals = chosen.agg(F.count("*").alias("swaps"), F.sum("cost").alias("cost")).first()
        if totals is None or not totals.swaps:
            break
        stats["rounds"] += 1
        stats["swaps"] += totals.swaps
        stats["extra_moves"] += totals.cost
        state = apply_swaps(state, chosen, "a", "b").localCheckpoint()
    return state.drop("old"), stats


def _flagged(ctx: PlanContext, state: DataFrame) -> DataFrame:
    """One row per replica: (topic, partition, replicas, old, broker, violating)."""
    from pyspark.sql import functions as F

    assert ctx.rack_of is not None
    rack_of = ctx.rack_of
    mine = rack_of(F.col("broker"))
    earlier = F.slice("replicas", 1, F.col("pos"))
    same_rack = F.size(F.filter(earlier, lambda x: rack_of(x) == mine))
    return state.select(
        "topic", "partition", "replicas", "old", F.posexplode("replicas").alias("pos", "broker")
    ).select(
        "topic",
        "partition",
        "replicas",
        "old",
        "broker",
        (same_rack >= ctx.rack_cap(F.col("replicas"))).alias("violating"),
    )


def _choose_swaps(ctx: PlanContext, flagged: DataFrame, round_number: int) -> DataFrame:
    """(topic, p, a, q, b, cost): p's replica on a swaps with q's replica on b."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    assert ctx.rack_of is not None
    rack_of = ctx.rack_of
    by_topic = Window.partitionBy("topic")
    salt = F.lit(round_number)
    leaving = (
        flagged.where("violating")
        .select(
            "topic",
            F.col("partition").alias("p"),
            F.col("broker").alias("a"),
            F.col("replicas").alias("p_replicas"),
            F.col("old").alias("p_old"),
        )
        .withColumn(
            "slot",
            F.row_number().over(by_topic.orderBy(rack_of(F.col("a")), F.hash("p", "a", salt))) - 1,
        )
        .withColumn("slots", F.count("*").over(by_topic))
    )
    # Every replica of those topics is a possible partner, dealt out over the violating
    # replicas of its topic by rank modulo their number. The violating ones come first, in
    # the same order as above but shifted by half, so that violating replicas of different
    # racks meet (and a replica never meets itself).
    partners = (
        flagged.join(leaving.select("topic", "slots").distinct(), "topic")
        .select(
            "topic",
            F.col("partition").alias("q"),
            F.col("broker").alias("b"),
            F.col("replicas").alias("q_replicas"),
            F.col("old").alias("q_old"),
            F.col("violating").alias("q_violating"),
            "slots",
        )
        .withColumn(
            "rank",
            F.row_number().over(
                by_topic.orderBy(F.col("q_violating").desc(), rack_of(F.col("b")), F.hash("q", "b", salt))
            )
            - 1,
        )
        .withColumn(
            "slot", F.pmod(F.col("rank") + F.greatest(F.lit(1), F.floor(F.col("slots") / 2)) + salt, "slots")
        )
        .drop("slots")
    )
    a, b = F.col("a"), F.col("b")
    p_replicas, q_replicas = F.col("p_replicas"), F.col("q_replicas")
    valid = (
        (F.col("p") != F.col("q"))
        & ctx.may_replace(p_replicas, a, b, ctx.rack_cap(p_replicas))
        & ctx.may_replace(q_replicas, b, a, ctx.rack_cap(q_replicas))
    )
    # A violating partner first (both fixed), then the fewest moves added (a replica the plan
    # has just moved may move again at no cost).
    priority: list[Column | str] = [F.col("q_violating").desc(), "cost", "rank"]
    candidates = (
        leaving.join(partners, ["topic", "slot"])
        .where(valid)
        .withColumn("cost", moves_added(F.col("p_old"), a, b) + moves_added(F.col("q_old"), b, a))
        .withColumn("n", F.row_number().over(Window.partitionBy("topic", "p", "a").orderBy(*priority)))
        .where(F.col("n") == 1)
        .select("topic", "p", "a", "q", "b", "q_violating", "rank", "cost")
    )
    return one_per_partition(candidates, ["topic", "p", "a", "q", "b"], priority).drop("q_violating", "rank")
