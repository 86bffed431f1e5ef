"""A reassignment plan computed on Spark: which replicas move where, and the report.

The pipeline (docs/PLANNER.md states it in full):
1. Aggregate the in-scope replicas into (topic, broker) cells (one groupBy, collected: topics x
   brokers rows) and decide each cell's target (targets.py, on the driver, over cells only).
2. Surplus cells give (count - target) replicas: a window over (topic, broker) ranks them,
   rack-violating first, then followers before preferred leaders, small before large.
3. Deficit cells open that many receiving slots. Leaving replicas and slots are matched within
   the topic by rank (a join), each pair checked against the partition's brokers and racks;
   leftovers are re-ranked with a rotation and joined again, a few rounds. The few that
   remain are placed on the driver (a swap with another replica of the same cell, else a
   two-step move through a balanced cell).
   Replicas still breaking the rack rule (their cell had no surplus) leave through
   same-topic swaps (rack_repair.py).
   With --balance bytes, same-topic replica swaps then bring each broker's bytes within
   +-5 % of its share, in bulk rounds (bytes_balance.py).
4. Preferred leaders: partitions whose first replica sits on a broker leading more than its
   floor/ceil share get another of their replicas, on a broker under its share, first.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from node.planner.bytes_balance import balance_bytes
from node.planner.context import PlanContext
from node.planner.leaders import balance_leaders
from node.planner.rack_repair import has_violations, repair_racks
from node.planner.request import Brokers, PlanError, PlanRequest, check_topics, target_brokers
from node.planner.snapshot import Snapshot
from node.planner.targets import CellPlan, Cells, cell_targets, heal_targets, rack_cap

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MATCH_ROUNDS = 6
# Leaving replicas still unplaced after a round when the rest is done on the driver.
DRIVER_LEFTOVERS = 2000
# Below this many rows a small table is broadcast to every task.
BROADCAST_ROWS = 200_000


@dataclasses.dataclass
class PlanResult:
    partitions: list[dict[str, Any]]
    report: dict[str, Any]

    def to_reassignment_json(self) -> dict[str, Any]:
        return {"version": 1, "partitions": self.partitions}


def _functions() -> Any:
    from pyspark.sql import functions

    return functions


def broker_info(snapshot: Snapshot, request: PlanRequest) -> Brokers:
    rows = snapshot.brokers.collect()
    capacity = {r.id: float(r.capacity) if r.capacity is not None else 1.0 for r in rows}
    for broker, weight in (request.capacity or {}).items():
        if broker not in capacity:
            raise PlanError(f"broker {broker} does not exist")
        capacity[broker] = weight
    return Brokers(
        racks={r.id: r.rack for r in rows}, alive={r.id: bool(r.alive) for r in rows}, capacity=capacity
    )


def plan(spark: SparkSession, snapshot: Snapshot, request: PlanRequest) -> PlanResult:  # noqa: PLR0915
    """Plan the request on the snapshot; PlanError (one line) for a request that cannot be."""
    F = _functions()
    started = time.monotonic()
    stages: dict[str, float] = {}

    def lap(name: str) -> None:
        stages[name] = round(time.monotonic() - started - sum(stages.values()), 3)

    brokers = broker_info(snapshot, request)
    targets = target_brokers(request, brokers)
    # One pass: (topic, broker) cells with the partition count (first replicas) and the
    # replication factor, collected as one row per topic.
    cell_rows = (
        snapshot.partitions.select(
            "topic", F.size("replicas").alias("rf"), F.posexplode("replicas").alias("pos", "broker")
        )
        .groupBy("topic", "broker")
        .agg(
            F.count("*").alias("c"),
            F.sum((F.col("pos") == 0).cast("int")).alias("lead"),
            F.max("rf").alias("rf"),
        )
        .groupBy("topic")
        .agg(
            F.collect_list("broker").alias("brokers"),
            F.collect_list("c").alias("counts"),
            F.sum("lead").alias("n"),
            F.max("rf").alias("rf"),
        )
        .collect()
    )
    check_topics(request, (r.topic for r in cell_rows))
    scope = set(request.topics) if request.topics is not None else None
    topic_rows = [r for r in cell_rows if scope is None or r.topic in scope]
    parts = snapshot.partitions
    if scope is not None:
        parts = parts.filter(F.col("topic").isin(sorted(scope)))
    for r in topic_rows:
        if r.rf > len(targets):
            raise PlanError(
                f"topic {r.topic} has replication factor {r.rf} but only {len(targets)} target brokers"
            )
    parts = parts.select(
        "topic", "partition", "replicas", "leader", F.coalesce("size_bytes", F.lit(0)).alias("size")
    ).cache()
    cells: Cells = {r.topic: dict(zip(r.brokers, r.counts, strict=True)) for r in topic_rows}
    lap("cells")
    del cell_rows

    rack_names = {brokers.racks[b] for b in targets}
    enforce = None not in rack_names and len(rack_names) > 1
    rack_map = None
    if any(r is not None for r in brokers.racks.values()):
        pairs = [x for b, r in sorted(brokers.racks.items()) if r is not None for x in (F.lit(b), F.lit(r))]
        rack_map = F.create_map(*pairs)
    ctx = PlanContext(
        spark=spark,
        targets=targets,
        racks=brokers.racks,
        enforce_racks=enforce,
        rack_of=rack_map,
        replication={r.topic: r.rf for r in topic_rows},
        partitions={r.topic: r.n for r in topic_rows},
        weights={b: brokers.capacity.get(b, 1.0) for b in targets},
    )

    replicas = parts.select(
        "topic", "partition", F.posexplode("replicas").alias("pos", "broker"), "size", "replicas"
    )
    cell_plan: CellPlan | None = None
    moved: DataFrame | None = None
    if request.moves_data:
        if request.full_balance:
            cell_plan = cell_targets(
                cells,
                ctx.partitions,
                ctx.replication,
                targets,
                ctx.weights,
                {b: str(brokers.racks[b]) for b in targets} if enforce else None,
            )
        else:
            cell_plan = heal_targets(cells, targets, ctx.weights)
        lap("targets")
        moved = _move_replicas(ctx, parts, replicas, cells, cell_plan)
        lap("moves")
    after = parts if moved is None else _apply(parts, moved)
    rack_pass: dict[str, Any] | None = None
    if request.full_balance and ctx.enforce_racks:
        if has_violations(ctx, parts):
            # Violations in cells without surplus: the matching had no reason to move them.
            after, rack_pass = repair_racks(ctx, parts, after)
        lap("racks")
    bytes_pass: dict[str, Any] | None = None
    if request.balance == "bytes":
        # Same-topic swaps keep every cell's count, so the count plan's promises hold.
        after, bytes_pass = balance_bytes(ctx, parts, after)
        lap("bytes")
    if "leaders" in request.goals or request.moves_data:
        after = balance_leaders(spark, after, targets, ctx.weights)
        lap("leaders")
    after = after.cache()
    from node.planner.report import build_report

    report, changed = build_report(ctx, parts, after, cells, cell_plan, request)
    lap("report")
    if rack_pass is not None:
        report["rack_repair"] = rack_pass
    if bytes_pass is not None:
        report["bytes_balance"] = {
            **bytes_pass,
            "count_plan_moves": report["moves"] - bytes_pass["extra_moves"],
        }
    report["seconds"] = round(time.monotonic() - started, 3)
    report["stage_seconds"] = stages
    parts.unpersist()
    after.unpersist()
    return PlanResult(partitions=changed, report=report)


# --- replica moves ---


def _valid(ctx: PlanContext, replicas: Column, leaving: Column, to: Column) -> Column:
    """`to` may replace `leaving` in the partition: not there yet, and its rack not full."""
    return ctx.may_replace(replicas, leaving, to, _functions().col("rack_cap"))


def _small(spark: SparkSession, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
    F = _functions()
    frame = spark.createDataFrame(rows, schema)
    return F.broadcast(frame) if len(rows) <= BROADCAST_ROWS else frame


def _move_replicas(  # noqa: PLR0915
    ctx: PlanContext, parts: DataFrame, replicas: DataFrame, cells: Cells, cell_plan: CellPlan
) -> DataFrame:
    """(topic, partition, replicas) of the partitions that change, with their new replicas."""
    from pyspark.sql import Window

    F = _functions()
    # One row per topic: the brokers giving and receiving, and how many (exploded in Spark).
    changes = []
    for topic, row in cells.items():
        goal = cell_plan.targets.get(topic, {})
        give = [(b, c - goal.get(b, 0)) for b, c in row.items() if c > goal.get(b, 0)]
        take = [(b, want - row.get(b, 0)) for b, want in goal.items() if want > row.get(b, 0)]
        if give:
            changes.append(
                (
                    topic,
                    [b for b, _ in give],
                    [n for _, n in give],
                    [b for b, _ in take],
                    [n for _, n in take],
                )
            )
    spark = ctx.spark
    if not changes:
        return spark.createDataFrame([], "topic string, partition int, replicas array<int>")
    per_topic = spark.createDataFrame(
        changes,
        "topic string, give array<int>, give_n array<int>, take array<int>, take_n array<int>",
    ).cache()
    surplus = per_topic.select("topic", F.explode(F.arrays_zip("give", "give_n")).alias("z")).select(
        "topic", F.col("z.give").alias("broker"), F.col("z.give_n").alias("extra")
    )
    deficit = per_topic.select("topic", F.explode(F.arrays_zip("take", "take_n")).alias("z")).select(
        "topic", F.col("z.take").alias("broker"), F.col("z.take_n").alias("short")
    )
    rack_cap_rows = [
        (t, rack_cap(rf, len({ctx.racks[b] for b in ctx.targets}))) for t, rf in ctx.replication.items()
    ]
    caps = _small(spark, rack_cap_rows, "topic string, rack_cap int")

    if ctx.enforce_racks and ctx.rack_of is not None:
        rack_of = ctx.rack_of
        mine = F.element_at(rack_of, F.col("broker"))
        earlier = F.slice("replicas", 1, F.col("pos"))
        violating = F.size(F.filter(earlier, lambda x: F.element_at(rack_of, x) == mine)) >= F.col("rack_cap")
    else:
        violating = F.lit(False)
    leave_order = Window.partitionBy("topic", "broker").orderBy(
        F.col("violating").desc(),
        (F.col("pos") == 0).asc(),
        F.col("size").asc(),
        F.hash("topic", "partition"),
    )
    leavers = (
        replicas.join(surplus, ["topic", "broker"])
        .join(caps, "topic")
        .withColumn("violating", violating)
        .withColumn("n", F.row_number().over(leave_order))
        .where(F.col("n") <= F.col("extra"))
        .select("topic", "partition", F.col("broker").alias("from_broker"))
    )
    slots = deficit.select(
        "topic", F.col("broker").alias("to_broker"), F.explode(F.sequence(F.lit(1), "short")).alias("k")
    ).withColumn("slot", F.row_number().over(Window.partitionBy("topic").orderBy("k", F.hash("to_broker"))))
    touched = parts.join(leavers.select("topic", "partition").distinct(), ["topic", "partition"], "left_semi")
    current = touched.select("topic", "partition", "replicas").join(caps, "topic").localCheckpoint()
    leavers = leavers.localCheckpoint()
    slots = slots.localCheckpoint()
    left = leavers.count()
    accepted: list[DataFrame] = []
    for round_number in range(MATCH_ROUNDS):
        if left == 0:
            break
        if round_number:
            leavers, slots, current = (
                leavers.localCheckpoint(),
                slots.localCheckpoint(),
                current.localCheckpoint(),
            )
        by_topic = Window.partitionBy("topic")
        ranked = leavers.withColumn(
            "rank",
            F.row_number().over(by_topic.orderBy(F.hash("partition", "from_broker", F.lit(round_number)))),
        )
        open_slots = slots.withColumn("slot", F.row_number().over(by_topic.orderBy("slot"))).withColumn(
            "slots", F.count("*").over(by_topic)
        )
        counts = open_slots.groupBy("topic").agg(F.max("slots").alias("slots"))
        shift = round_number * 7919
        pairs = (
            ranked.join(counts, "topic")
            .withColumn("slot", ((F.col("rank") - 1 + F.lit(shift)) % F.col("slots")) + 1)
            .drop("slots")
            .join(open_slots.drop("slots"), ["topic", "slot"])
            .join(current, ["topic", "partition"])
            .where(_valid(ctx, F.col("replicas"), F.col("from_broker"), F.col("to_broker")))
            .withColumn(
                "n", F.row_number().over(Window.partitionBy("topic", "partition").orderBy("from_broker"))
            )
            .where(F.col("n") == 1)
            .select("topic", "partition", "from_broker", "to_broker", "k")
            .localCheckpoint()
        )
        done = pairs.count()
        if done == 0:
            break
        left -= done
        accepted.append(pairs.select("topic", "partition", "from_broker", "to_broker"))
        leavers = leavers.join(pairs, ["topic", "partition", "from_broker"], "left_anti")
        slots = slots.join(pairs.select("topic", "to_broker", "k"), ["topic", "to_broker", "k"], "left_anti")
        current = _substitute(current, pairs)
        if left <= DRIVER_LEFTOVERS:
            break

    if left:
        left_rows = leavers.collect()
        topics = sorted({r.topic for r in left_rows})
        earlier = [r for frame in accepted for r in frame.where(F.col("topic").isin(topics)).collect()]
        fixes = _place_leftovers(ctx, parts, current, left_rows, slots.collect(), earlier)
        if fixes:
            fixed = spark.createDataFrame(fixes, "topic string, partition int, replicas array<int>")
            current = current.join(
                fixed.withColumnRenamed("replicas", "fixed"), ["topic", "partition"], "full_outer"
            ).select("topic", "partition", F.coalesce("fixed", "replicas").alias("replicas"))
    return current.select("topic", "partition", "replicas")


def _substitute(current: DataFrame, pairs: DataFrame) -> DataFrame:
    F = _functions()
    return (
        current.join(
            pairs.select("topic", "partition", "from_broker", "to_broker"), ["topic", "partition"], "left"
        )
        .withColumn(
            "replicas",
            F.when(F.col("from_broker").isNull(), F.col("replicas")).otherwise(
                F.transform(
                    "replicas", lambda x: F.when(x == F.col("from_broker"), F.col("to_broker")).otherwise(x)
                )
            ),
        )
        .drop("from_broker", "to_broker")
    )


def _place_leftovers(  # noqa: PLR0915, PLR0917
    ctx: PlanContext,
    parts: DataFrame,
    current: DataFrame,
    leftovers: list[Any],
    open_slots: list[Any],
    earlier: list[Any],
) -> list[tuple[str, int, list[int]]]:
    """The few leaving replicas the joins could not place, on the driver (their topics only).
    Each takes an open slot of its topic if one fits; else it takes the broker of a move made
    earlier whose replica can go to an open slot instead (same moves); else another replica of
    its cell that fits the slot leaves instead; else it moves in two steps, through a broker
    whose cell stays at its target; else to the first target broker that fits."""
    F = _functions()
    topics = sorted({r.topic for r in leftovers})
    touched = current.select("topic", "partition", F.col("replicas").alias("new"))
    rows = (
        parts.filter(F.col("topic").isin(topics))
        .join(touched, ["topic", "partition"], "left")
        .select("topic", "partition", "replicas", F.coalesce("new", "replicas").alias("new"))
        .collect()
    )
    layout: dict[str, dict[int, list[int]]] = defaultdict(dict)
    on_broker: dict[tuple[str, int], set[int]] = defaultdict(set)
    for row in rows:
        layout[row.topic][row.partition] = list(row.new)
        for b in row.new:
            on_broker[row.topic, b].add(row.partition)
    slots: dict[str, list[int]] = defaultdict(list)
    for s in open_slots:
        slots[s.topic].append(s.to_broker)
    made: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for r in earlier:
        made[r.topic].append((r.partition, r.from_broker, r.to_broker))
    leaving: set[tuple[str, int, int]] = {(r.topic, r.partition, r.from_broker) for r in leftovers}
    changed: set[tuple[str, int]] = set()
    n_racks = len({ctx.racks[b] for b in ctx.targets})

    def fits(topic: str, replicas: list[int], leave: int, to: int) -> bool:
        if to in replicas:
            return False
        if not ctx.enforce_racks:
            return True
        cap = rack_cap(ctx.replication[topic], n_racks)
        rack = ctx.racks[to]
        return sum(1 for b in replicas if b != leave and ctx.racks.get(b) == rack) < cap

    def move(topic: str, partition: int, leave: int, to: int) -> None:
        replicas = layout[topic][partition]
        replicas[replicas.index(leave)] = to
        on_broker[topic, leave].discard(partition)
        on_broker[topic, to].add(partition)
        changed.add((topic, partition))

    def direct(topic: str, partition: int, leave: int, options: list[int]) -> bool:
        replicas = layout[topic][partition]
        to = next((to for to in options if fits(topic, replicas, leave, to)), None)
        if to is None:
            return False
        options.remove(to)
        move(topic, partition, leave, to)
        made[topic].append((partition, leave, to))
        return True

    def rematch(topic: str, partition: int, leave: int, options: list[int]) -> bool:
        replicas = layout[topic][partition]
        for i, (q, was, took) in enumerate(made[topic]):
            if q == partition or not fits(topic, replicas, leave, took):
                continue
            mine = layout[topic][q]
            reverted = [was if b == took else b for b in mine]
            to = next((to for to in options if fits(topic, reverted, was, to)), None)
            if to is None:
                continue
            options.remove(to)
            move(topic, q, took, to)
            move(topic, partition, leave, took)
            made[topic][i] = (q, was, to)
            made[topic].append((partition, leave, took))
            return True
        return False

    def stand_in(topic: str, partition: int, leave: int, options: list[int]) -> bool:
        for to in options:
            for q in sorted(on_broker[topic, leave]):
                if (
                    q != partition
                    and (topic, q, leave) not in leaving
                    and fits(topic, layout[topic][q], leave, to)
                ):
                    options.remove(to)
                    move(topic, q, leave, to)
                    return True
        return False

    def two_steps(topic: str, partition: int, leave: int, options: list[int]) -> bool:
        replicas = layout[topic][partition]
        for to in options:
            for via in ctx.targets:
                if not fits(topic, replicas, leave, via):
                    continue
                for q in sorted(on_broker[topic, via]):
                    if q != partition and fits(topic, layout[topic][q], via, to):
                        options.remove(to)
                        move(topic, partition, leave, via)
                        move(topic, q, via, to)
                        return True
        return False

    for topic, partition, leave in sorted(leaving):
        options = slots[topic]
        if any(step(topic, partition, leave, options) for step in (direct, rematch, stand_in, two_steps)):
            continue
        replicas = layout[topic][partition]
        fallback = next((b for b in ctx.targets if fits(topic, replicas, leave, b)), None)
        if fallback is not None:
            move(topic, partition, leave, fallback)
    return [(t, p, layout[t][p]) for t, p in sorted(changed)]


def _apply(parts: DataFrame, changed: DataFrame) -> DataFrame:
    F = _functions()
    return (
        parts.join(changed.withColumnRenamed("replicas", "new"), ["topic", "partition"], "left")
        .withColumn("replicas", F.coalesce("new", "replicas"))
        .drop("new")
    )
