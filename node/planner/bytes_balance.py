"""The bytes pass of `--balance bytes`: after the count plan, swap replicas of the same topic
between brokers above and below their share of the bytes, until every target broker is within
+-BAND of its share (its capacity weight's share of the in-scope bytes).

A swap gives partition p's replica on the heavy broker h to the light broker l, and q's replica
on l to h (same topic, size(p) > size(q)). It keeps every (topic, broker) cell and every
broker's replica count, so the count plan's balance, its bound and its replan-is-empty
property hold; the preferred-leader pass runs after it.

Each round is a few bulk passes on Spark; the driver only decides how many bytes flow between
which broker pairs (brokers^2 at most) and keeps the per-broker totals:
1. Flows (pure, `plan_flows`): every broker outside its band sheds its excess to, or draws its
   shortfall from, the brokers on the other side of their share, largest first.
2. Candidates: the replicas on each flow's heavy broker that may go to its light one (not there
   yet, racks within their cap), and those on the light broker that may go back, per topic.
   They are paired by rank three ways within (flow, topic): largest given for smallest taken
   (big steps), both by size (small steps), and cheapest in moves first (a replica that the
   count plan has just moved away returns home for free); and up to SAMPLES replicas a side,
   spread over the sizes, are paired all with all (differences of every size).
3. Selection: per flow, swaps by extra moves then size difference, while their running sum of
   differences stays within the flow's amount; a partition takes part in one swap per round.
4. The swaps are applied to the replica lists (a join), and the flows' totals update the
   brokers' bytes on the driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from node.planner.swaps import apply_swaps, moves_added, one_per_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from node.planner.context import PlanContext

BAND = 0.05
ROUNDS = 12
# Replicas per (flow, topic) side paired all with all, spread over the sizes.
SAMPLES = 12


@dataclasses.dataclass(frozen=True)
class Flow:
    heavy: int
    light: int
    amount: float  # bytes to move from heavy to light


def shares(on: Mapping[int, float], weights: Mapping[int, float]) -> dict[int, float]:
    """Each broker's share of the bytes on `on`'s brokers, by weight."""
    total = sum(on.values())
    wsum = sum(weights[b] for b in on)
    return {b: total * weights[b] / wsum for b in on}


def outside_band(on: Mapping[int, float], share: Mapping[int, float], band: float = BAND) -> list[int]:
    return sorted(b for b in on if abs(on[b] - share[b]) > band * share[b])


def spread_pct(on: Mapping[int, float]) -> float:
    """max - min of the brokers' bytes, in percent of their mean."""
    mean = sum(on.values()) / len(on) if on else 0.0
    return round(100 * (max(on.values()) - min(on.values())) / mean, 2) if mean else 0.0


def plan_flows(
    on: Mapping[int, float],
    share: Mapping[int, float],
    band: float = BAND,
    stuck: AbstractSet[tuple[int, int]] = frozenset(),
) -> list[Flow]:
    """Bytes to move between broker pairs so that every broker outside its band reaches its
    share: heavy brokers outside the band give their excess to the brokers with the most room
    first, then light brokers outside the band draw what they still lack from the heaviest.
    `stuck` pairs (heavy, light) found no swap before and get no flow. What the brokers on the
    other side of their share cannot take or give then goes through brokers inside the band,
    as far as half the band (so they stay inside it)."""
    off = {b: on[b] - share[b] for b in on}
    out = set(outside_band(on, share, band))
    supply = {b: max(0.0, x) for b, x in off.items()}
    demand = {b: max(0.0, -x) for b, x in off.items()}
    flows: dict[tuple[int, int], float] = {}

    def move(h: int, lo: int) -> None:
        if h == lo or (h, lo) in stuck:
            return
        amount = min(supply[h], demand[lo])
        if amount > 0:
            flows[h, lo] = flows.get((h, lo), 0.0) + amount
            supply[h] -= amount
            demand[lo] -= amount

    def route() -> None:
        for h in sorted(out & {b for b in on if off[b] > 0}, key=lambda b: (-supply[b], b)):
            for lo in sorted(demand, key=lambda b: (-demand[b], b)):
                move(h, lo)
        for lo in sorted(out & {b for b in on if off[b] < 0}, key=lambda b: (-demand[b], b)):
            for h in sorted(supply, key=lambda b: (-supply[b], b)):
                move(h, lo)

    route()
    # Half-band slack of the brokers inside the band, for what is left.
    slack = band / 2
    for b in on:
        if b not in out:
            demand[b] += max(0.0, share[b] * (1 + slack) - on[b]) - max(0.0, -off[b])
            supply[b] += max(0.0, on[b] - share[b] * (1 - slack)) - max(0.0, off[b])
    route()
    return [Flow(h, lo, amount) for (h, lo), amount in sorted(flows.items())]


def balance_bytes(ctx: PlanContext, before: DataFrame, after: DataFrame) -> tuple[DataFrame, dict[str, Any]]:
    """`after` with swaps applied so that each target broker's bytes are within the band, and
    what the pass did: rounds, swaps, the moves they add to the count plan's (against
    `before`) and the brokers still outside the band."""
    from pyspark.sql import functions as F

    state = (
        after.select("topic", "partition", "replicas", "leader", "size")
        .join(before.select("topic", "partition", F.col("replicas").alias("old")), ["topic", "partition"])
        .localCheckpoint()
    )
    loads = {
        r.broker: float(r.bytes or 0)
        for r in state.select(F.explode("replicas").alias("broker"), "size")
        .groupBy("broker")
        .agg(F.sum("size").alias("bytes"))
        .collect()
    }
    on = {b: loads.get(b, 0.0) for b in ctx.targets}
    share = shares(on, {b: ctx.weights[b] for b in ctx.targets})
    stats: dict[str, Any] = {
        "count_plan_spread_pct_of_mean": spread_pct(on),
        "rounds": 0,
        "swaps": 0,
        "extra_moves": 0,
    }
    if sum(on.values()) > 0:
        stuck: set[tuple[int, int]] = set()
        for _ in range(ROUNDS):
            flows = plan_flows(on, share, stuck=stuck)
            if not flows:
                break
            chosen = _choose_swaps(ctx, state, flows).localCheckpoint()
            totals = (
                chosen.groupBy("heavy", "light")
                .agg(F.sum("delta").alias("delta"), F.count("*").alias("swaps"), F.sum("cost").alias("cost"))
                .collect()
            )
            # A pair that found no swap (no topic in common that fits, racks) is routed around
            # from now on: the next round's flows go through other brokers.
            stuck |= {(f.heavy, f.light) for f in flows} - {(t.heavy, t.light) for t in totals}
            if not totals:
                continue
            stats["rounds"] += 1
            for t in totals:
                on[t.heavy] -= t.delta
                on[t.light] += t.delta
                stats["swaps"] += t.swaps
                stats["extra_moves"] += t.cost
            state = apply_swaps(state, chosen, "heavy", "light").localCheckpoint()
    stats["outside_band"] = outside_band(on, share)
    return state.drop("old"), stats


def _choose_swaps(ctx: PlanContext, state: DataFrame, flows: list[Flow]) -> DataFrame:
    """(heavy, light, topic, p, q, delta, cost) of this round's swaps (steps 2 and 3)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    flow_frame = F.broadcast(
        ctx.spark.createDataFrame(
            [dataclasses.astuple(f) for f in flows], "heavy int, light int, amount double"
        )
    )
    held = state.select(
        "topic", "partition", "replicas", "old", "size", F.explode("replicas").alias("broker")
    )
    replicas, old, cap = F.col("replicas"), F.col("old"), ctx.rack_cap(F.col("replicas"))

    def side(holder: str, other: str, name: str) -> DataFrame:
        # The replicas on `holder` that may go to `other`, and the moves that adds.
        leaving, to = F.col(holder), F.col(other)
        cost = moves_added(old, leaving, to)
        return (
            held.join(flow_frame, F.col("broker") == leaving)
            .where(ctx.may_replace(replicas, leaving, to, cap))
            .select(
                "heavy",
                "light",
                "topic",
                F.col("partition").alias(name),
                F.col("size").alias(f"{name}_size"),
                cost.alias(f"{name}_cost"),
            )
        )

    give = side("heavy", "light", "p")
    take = side("light", "heavy", "q")
    cell = Window.partitionBy("heavy", "light", "topic")
    p_size, q_size, p_cost, q_cost = F.col("p_size"), F.col("q_size"), F.col("p_cost"), F.col("q_cost")

    def ranks(frame: DataFrame, orders: list[list[Column]], name: str) -> DataFrame:
        # One rank per pairing, over one partitioning, exploded to (pairing, rank) rows. The
        # second order is by size: every stride-th replica by it is a sample (at most SAMPLES
        # per cell, spread over the sizes) for the all-pairs candidates.
        numbered = frame.withColumns(
            {f"n{i}": F.row_number().over(cell.orderBy(*order, name)) for i, order in enumerate(orders)}
        )
        stride = F.greatest(F.lit(1), F.ceil(F.count("*").over(cell) / F.lit(SAMPLES)))
        pairs = F.array(
            *(F.struct(F.lit(i).alias("k"), F.col(f"n{i}").alias("n")) for i in range(len(orders)))
        )
        return (
            numbered.withColumn("sample", F.pmod(F.col("n1") - 1, stride) == 0)
            .withColumn("r", F.explode(pairs))
            .select(*frame.columns, "sample", "r.k", "r.n")
        )

    # Pairings, by index: largest given for smallest taken; both by size; cheapest first.
    give = ranks(give, [[p_size.desc()], [p_size.asc()], [p_cost.asc(), p_size.desc()]], "p")
    take = ranks(take, [[q_size.asc()], [q_size.asc()], [q_cost.asc(), q_size.asc()]], "q")
    columns = ["heavy", "light", "topic", "p", "p_size", "p_cost", "q", "q_size", "q_cost"]
    paired = give.join(take, ["heavy", "light", "topic", "k", "n"]).select(*columns)
    # All pairs of the samples: differences of every size, for the last, finer steps.
    once_each = (F.col("k") == 0) & F.col("sample")
    sampled = (
        give.where(once_each)
        .drop("k", "n", "sample")
        .join(take.where(once_each).drop("k", "n", "sample"), ["heavy", "light", "topic"])
    )
    candidates = (
        paired.unionByName(sampled.select(*columns))
        .join(flow_frame, ["heavy", "light"])
        .withColumn("delta", p_size - q_size)
        .withColumn("cost", p_cost + q_cost)
        .where((F.col("delta") > 0) & (F.col("delta") <= F.col("amount")))
    )
    priority: list[Column | str] = [F.col("cost").asc(), F.col("delta").desc(), "topic", "p", "q"]
    # One candidate per given and per taken partition of a flow (pairings may propose the
    # same swap twice), so the running sum counts swaps that can all happen.
    once = (
        candidates.withColumn(
            "n", F.row_number().over(Window.partitionBy("heavy", "light", "topic", "p").orderBy(*priority))
        )
        .where(F.col("n") == 1)
        .withColumn(
            "n", F.row_number().over(Window.partitionBy("heavy", "light", "topic", "q").orderBy(*priority))
        )
        .where(F.col("n") == 1)
    )
    within = (
        once.withColumn(
            "sent",
            F.sum("delta").over(
                Window.partitionBy("heavy", "light")
                .orderBy(*priority)
                .rowsBetween(Window.unboundedPreceding, 0)
            ),
        )
        .where(F.col("sent") <= F.col("amount"))
        .select("heavy", "light", "topic", "p", "q", "delta", "cost")
    )
    return one_per_partition(within, ["heavy", "light", "topic", "p", "q"], priority)
