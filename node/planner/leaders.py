"""Preferred leaders: which replica of each partition goes first.

Each target broker should be the first replica of floor/ceil of its (weighted) share of the
partitions, the ceil going to the brokers that lead most now. A partition keeps its first
replica unless that broker leads too many. Which partitions change is a transport problem on
the brokers: n[a][b] = partitions led by a that have a replica on b (one groupBy, collected:
brokers² rows at most). The driver solves it as a max flow from the brokers over their share
to those under it (direct pairs first, then augmenting paths through brokers at their share:
a gives a partition to x, x gives one to b), and Spark picks that many partitions per pair
with a window and reorders their replica lists. A pair's pick can fall short when a
partition could serve two pairs; the next round takes up what is left.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from node.planner.targets import round_targets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROUNDS = 8


def leader_goals(
    held: Mapping[int, int], targets: Sequence[int], weights: Mapping[int, float]
) -> dict[int, int]:
    total = sum(held.values())
    wsum = sum(weights[b] for b in targets)
    shares = [total * weights[b] / wsum for b in targets]
    goal = dict(zip(targets, round_targets(shares, total, [held.get(b, 0) for b in targets]), strict=True))
    for b in held:
        goal.setdefault(b, 0)
    return goal


def transport(
    pairs: Mapping[tuple[int, int], int], excess: Mapping[int, int], room: Mapping[int, int]
) -> dict[tuple[int, int], int]:
    """Flow on the pair graph (capacities `pairs`) from brokers with excess to brokers with
    room, as much as can be sent; returns the flow per pair."""
    flow: dict[tuple[int, int], int] = {}
    left_excess = {b: e for b, e in excess.items() if e > 0}
    left_room = {b: r for b, r in room.items() if r > 0}

    def residual(a: int, b: int) -> int:
        return pairs.get((a, b), 0) - flow.get((a, b), 0) + flow.get((b, a), 0)

    def push(a: int, b: int, amount: int) -> None:
        back = min(amount, flow.get((b, a), 0))
        if back:
            flow[(b, a)] -= back
        if amount - back:
            flow[(a, b)] = flow.get((a, b), 0) + amount - back

    for a in sorted(left_excess):
        for b in sorted(left_room):
            amount = min(left_excess[a], left_room[b], residual(a, b))
            if amount > 0:
                push(a, b, amount)
                left_excess[a] -= amount
                left_room[b] -= amount
    nodes = sorted({x for pair in pairs for x in pair})
    out_edges: dict[int, list[int]] = {x: [] for x in nodes}
    for a, b in pairs:
        out_edges[a].append(b)
        out_edges[b].append(a)
    while True:
        sources = [a for a, e in left_excess.items() if e > 0]
        if not sources or not any(r > 0 for r in left_room.values()):
            break
        parent: dict[int, int | None] = {a: None for a in sources}
        queue = deque(sources)
        end = None
        while queue and end is None:
            a = queue.popleft()
            for b in out_edges.get(a, []):
                if b not in parent and residual(a, b) > 0:
                    parent[b] = a
                    if left_room.get(b, 0) > 0:
                        end = b
                        break
                    queue.append(b)
        if end is None:
            break
        path = [end]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])  # type: ignore[arg-type]
        path.reverse()
        amount = min(left_excess[path[0]], left_room[end], *(residual(a, b) for a, b in pairwise(path)))
        for a, b in pairwise(path):
            push(a, b, amount)
        left_excess[path[0]] -= amount
        left_room[end] -= amount
    return {k: v for k, v in flow.items() if v > 0}


def balance_leaders(
    spark: SparkSession, parts: DataFrame, targets: Sequence[int], weights: Mapping[int, float]
) -> DataFrame:
    """parts with replica lists reordered so preferred leaders balance (no replica moves)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    base = parts.localCheckpoint()
    target_set = sorted(targets)

    def pair_counts(view: DataFrame, *, with_held: bool) -> list[Any]:
        """n[first][candidate] over the view; with a null candidate per partition too, whose
        counts are the partitions each broker leads (the same pass)."""
        others = F.slice("replicas", 2, 1 << 16)
        if with_held:
            others = F.concat(F.array(F.lit(None).cast("int")), others)
        return (
            view.select(F.col("replicas")[0].alias("first"), F.explode(others).alias("candidate"))
            .where(F.col("candidate").isNull() | F.col("candidate").isin(target_set))
            .groupBy("first", "candidate")
            .count()
            .collect()
        )

    first_counts = pair_counts(base, with_held=True)
    held: dict[int, int] = dict.fromkeys(targets, 0)
    for row in first_counts:
        if row.candidate is None:
            held[row.first] = held.get(row.first, 0) + row["count"]
    goal = leader_goals(held, targets, weights)
    counts: list[Any] | None = [row for row in first_counts if row.candidate is not None]
    # Partition -> its new first replica, over the rounds (small: a broadcast join).
    chosen: DataFrame | None = None
    view = base
    for _ in range(ROUNDS):
        excess = {b: held[b] - goal[b] for b in held if held[b] > goal[b]}
        room = {b: goal[b] - held[b] for b in goal if held[b] < goal[b]}
        if not excess or not room:
            break
        led = view.select(
            "topic",
            "partition",
            F.col("replicas")[0].alias("first"),
            F.explode(F.slice("replicas", 2, 1 << 16)).alias("candidate"),
        ).where(F.col("candidate").isin(target_set))
        if counts is None:
            counts = pair_counts(view, with_held=False)
        pairs = {(r.first, r.candidate): r["count"] for r in counts}
        counts = None
        flow = transport(pairs, excess, room)
        if not flow:
            break
        wanted = spark.createDataFrame(
            [(a, b, n) for (a, b), n in flow.items()], "first int, candidate int, want int"
        )
        picked = (
            led.join(F.broadcast(wanted), ["first", "candidate"])
            .withColumn(
                "n",
                F.row_number().over(
                    Window.partitionBy("topic", "partition").orderBy(F.hash("candidate", "partition"))
                ),
            )
            .where(F.col("n") == 1)
            .withColumn(
                "n",
                F.row_number().over(
                    Window.partitionBy("first", "candidate").orderBy(F.hash("topic", "partition"))
                ),
            )
            .where(F.col("n") <= F.col("want"))
            .select("topic", "partition", "first", "candidate")
            .localCheckpoint()
        )
        done = picked.groupBy("first", "candidate").count().collect()
        if not done:
            break
        for row in done:
            held[row.first] -= row["count"]
            held[row.candidate] = held.get(row.candidate, 0) + row["count"]
        latest = picked.select("topic", "partition", "candidate")
        if chosen is not None:
            latest = chosen.join(latest, ["topic", "partition"], "left_anti").unionByName(latest)
        chosen = latest.localCheckpoint()
        view = _reorder(base, chosen)
    return view


def _reorder(base: DataFrame, chosen: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        base.join(F.broadcast(chosen), ["topic", "partition"], "left")
        .withColumn(
            "replicas",
            F.when(F.col("candidate").isNull(), F.col("replicas")).otherwise(
                F.concat(F.array("candidate"), F.filter("replicas", lambda x: x != F.col("candidate")))
            ),
        )
        .drop("candidate")
    )
