"""A reassignment plan computed on Spark: which replicas move where, and the report.

The pipeline (docs/PLANNER.md states it in full):
1. Aggregate the in-scope replicas into (topic, broker) cells (one groupBy, collected: topics x
   brokers rows) and decide each cell's target (targets.py, on the driver, over cells only).
2. Surplus cells give (count - target) replicas: a window over (topic, broker) ranks them,
   rack-violating first, then followers before preferred leaders, small before large.
3. Deficit cells open that many receiving slots. Leaving replicas and slots are matched by rank
   (a join) within (topic, rack) first when racks are enforced, then within the topic, each
   partition's pairs applied together and checked against its brokers and racks;
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
from node.planner.context import PlanContext, rack_lookup, replica_racks
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
# Up to this many moves, the changed partitions are broadcast to apply them.
BROADCAST_MOVES = 1_000_000


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
    # The partitions, in the compact form every stage reads, materialized once (a local
    # checkpoint: cheaper to write and to scan than a columnar cache of array rows).
    # `old_replicas` rides along through every stage, so the report reads before and after
    # from one row (no join of the plan's result back to the snapshot).
    every = snapshot.partitions.select(
        "topic",
        "partition",
        "replicas",
        "leader",
        F.coalesce("size_bytes", F.lit(0)).alias("size"),
        F.col("replicas").alias("old_replicas"),
    ).localCheckpoint()
    # One pass: (topic, broker) cells with the partition count (first replicas) and the
    # replication factor, collected as one row per topic.
    cell_rows = (
        every.select("topic", F.size("replicas").alias("rf"), F.posexplode("replicas").alias("pos", "broker"))
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
    parts = every
    if scope is not None:
        parts = parts.filter(F.col("topic").isin(sorted(scope)))
    for r in topic_rows:
        if r.rf > len(targets):
            raise PlanError(
                f"topic {r.topic} has replication factor {r.rf} but only {len(targets)} target brokers"
            )
    cells: Cells = {r.topic: dict(zip(r.brokers, r.counts, strict=True)) for r in topic_rows}
    lap("cells")
    del cell_rows

    rack_names = {brokers.racks[b] for b in targets}
    enforce = None not in rack_names and len(rack_names) > 1
    ctx = PlanContext(
        spark=spark,
        targets=targets,
        racks=brokers.racks,
        enforce_racks=enforce,
        rack_of=rack_lookup(brokers.racks),
        replication={r.topic: r.rf for r in topic_rows},
        partitions={r.topic: r.n for r in topic_rows},
        weights={b: brokers.capacity.get(b, 1.0) for b in targets},
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
        moved = _move_replicas(ctx, parts, cells, cell_plan)
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
    after = after.localCheckpoint()
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


def _changes(ctx: PlanContext, cells: Cells, cell_plan: CellPlan) -> list[tuple[Any, ...]]:
    """One row per topic that changes: its giving cells (broker -> replicas to give, a map
    looked up per replica), its receiving brokers and how many each takes, its rack cap."""
    n_racks = len({ctx.racks[b] for b in ctx.targets})
    rows = []
    for topic, row in cells.items():
        goal = cell_plan.targets.get(topic, {})
        give = {b: c - goal.get(b, 0) for b, c in row.items() if c > goal.get(b, 0)}
        take = [(b, want - row.get(b, 0)) for b, want in goal.items() if want > row.get(b, 0)]
        if give:
            cap = rack_cap(ctx.replication[topic], n_racks)
            rows.append((topic, give, [b for b, _ in take], [n for _, n in take], cap))
    return rows


def _move_replicas(ctx: PlanContext, parts: DataFrame, cells: Cells, cell_plan: CellPlan) -> DataFrame:
    """(topic, partition, replicas) of the partitions that change, with their new replicas."""
    F = _functions()
    spark = ctx.spark
    changes = _changes(ctx, cells, cell_plan)
    if not changes:
        return spark.createDataFrame([], "topic string, partition int, replicas array<int>")
    per_topic = spark.createDataFrame(
        changes, "topic string, give map<int,int>, take array<int>, take_n array<int>, rack_cap int"
    )
    # Every giving cell gives exactly its surplus, so this is how many replicas leave.
    left = total = sum(sum(give.values()) for _, give, *_ in changes)
    leavers = _leavers(ctx, parts, per_topic).localCheckpoint()
    slots = _slots(per_topic).localCheckpoint()
    rounds: list[DataFrame] = []
    # With racks enforced, the first round matches within (topic, rack): a replica replaced
    # by a broker of its own rack cannot break the rack rule, and when the racks' totals
    # already sit at their targets (adding a broker to each rack) it places every replica.
    by_rack = ctx.enforce_racks and ctx.rack_of is not None
    for round_number in range(MATCH_ROUNDS):
        if left <= (DRIVER_LEFTOVERS if round_number else 0):
            break
        done = _match_round(ctx, leavers, slots, round_number, by_rack=by_rack and round_number == 0)
        moved_now = done.agg(F.sum(F.size("moves"))).first()
        count = int(moved_now[0] or 0) if moved_now is not None else 0
        if count == 0 and round_number:
            break
        left -= count
        rounds.append(done)
        if left:
            leavers, slots = _after_round(leavers, slots, done)
    moved = _latest(spark, rounds)
    if left:
        moved = _leftovers(ctx, parts, moved, leavers, slots, rounds)
    # Applied to every partition by a join: broadcast, the partitions are not shuffled.
    return F.broadcast(moved) if total <= BROADCAST_MOVES else moved


def _leavers(ctx: PlanContext, parts: DataFrame, per_topic: DataFrame) -> DataFrame:
    """The replicas that leave their cell: (count - target) of each giving cell, ranked by a
    window over the cell, rack-violating first, then followers before preferred leaders,
    then small before large. One pass over the partitions of the changing topics (a
    broadcast of the per-topic rows) and a window over the replicas on giving cells only."""
    from pyspark.sql import Window

    F = _functions()
    if ctx.enforce_racks and ctx.rack_of is not None:
        # Replicas earlier in the list already fill this one's rack (element by element:
        # code-generated, where a filter over the list would be interpreted).
        mine = ctx.rack_of(F.col("broker"))
        racks = replica_racks(ctx, F.col("replicas"))
        width = max(ctx.replication.values(), default=0)
        earlier = [
            F.when((F.col("pos") > i) & (F.try_element_at(racks, F.lit(i + 1)) == mine), 1).otherwise(0)
            for i in range(width)
        ]
        violating = sum(earlier[1:], earlier[0]) >= F.col("rack_cap") if earlier else F.lit(False)
    else:
        violating = F.lit(False)
    leave_order = Window.partitionBy("topic", "broker").orderBy(
        F.col("violating").desc(),
        (F.col("pos") == 0).asc(),
        F.col("size").asc(),
        F.hash("topic", "partition"),
    )
    return (
        parts.join(F.broadcast(per_topic.select("topic", "give", "rack_cap")), "topic")
        .select(
            "topic",
            "partition",
            "replicas",
            "size",
            "rack_cap",
            "give",
            F.posexplode("replicas").alias("pos", "broker"),
        )
        .withColumn("extra", F.element_at("give", F.col("broker")))
        .where(F.col("extra").isNotNull())
        .withColumn("violating", violating)
        .withColumn("n", F.row_number().over(leave_order))
        .where(F.col("n") <= F.col("extra"))
        .select("topic", "partition", "replicas", F.col("broker").alias("from_broker"), "rack_cap")
    )


def _slots(per_topic: DataFrame) -> DataFrame:
    """The receiving slots: (target - count) of each receiving cell, numbered k = 1.. within it."""
    F = _functions()
    return per_topic.select("topic", F.explode(F.arrays_zip("take", "take_n")).alias("z")).select(
        "topic",
        F.col("z.take").alias("to_broker"),
        F.explode(F.sequence(F.lit(1), F.col("z.take_n"))).alias("k"),
    )


def _match_round(
    ctx: PlanContext, leavers: DataFrame, slots: DataFrame, round_number: int, *, by_rack: bool
) -> DataFrame:
    """Leaving replica i of a group (the topic, or the topic and rack) is paired with slot i
    of that group; each partition's pairs are applied together and kept when the result has
    no broker twice and no rack over its cap (else they all wait for the next round).
    Returns (topic, partition, replicas: the new list, moves: the pairs applied)."""
    from pyspark.sql import Window

    F = _functions()
    key = ["topic"]
    if by_rack:
        assert ctx.rack_of is not None
        key = ["topic", "rack"]
        leavers = leavers.withColumn("rack", ctx.rack_of(F.col("from_broker")))
        slots = slots.withColumn("rack", ctx.rack_of(F.col("to_broker")))
    group = Window.partitionBy(*key)
    ranked = leavers.withColumn(
        "slot", F.row_number().over(group.orderBy(F.hash("partition", "from_broker", F.lit(round_number))))
    )
    if round_number:
        # A topic has as many open slots as leaving replicas: a rotation of the ranks pairs
        # each leaver with another slot than in the last round.
        shift = round_number * 7919
        ranked = ranked.withColumn(
            "slot", ((F.col("slot") - 1 + F.lit(shift)) % F.count("*").over(group)) + 1
        )
    # Consecutive slots of a group go to different brokers.
    numbered = slots.withColumn("slot", F.row_number().over(group.orderBy("k", F.hash("to_broker"))))
    pairs = (
        ranked.join(numbered, [*key, "slot"])
        .groupBy("topic", "partition")
        .agg(
            F.first("replicas").alias("old"),
            F.first("rack_cap").alias("rack_cap"),
            F.collect_list(F.struct("from_broker", "to_broker", "k")).alias("moves"),
        )
    )
    return (
        pairs.withColumn("replicas", _substituted(ctx, F.col("old"), F.col("moves")))
        .where(_valid(ctx, F.col("replicas"), F.col("moves")))
        .select("topic", "partition", "replicas", "moves")
        .localCheckpoint()
    )


# The replica lists are handled position by position (at most the largest replication factor
# in scope): plain element expressions are code-generated, where Spark interprets the lambdas
# of higher-order functions, one call per element.


def _substituted(ctx: PlanContext, old: Column, moves: Column) -> Column:
    """`old` with each pair's leaving broker replaced by its receiving broker, in place."""
    F = _functions()
    width = max(ctx.replication.values(), default=0)
    new = []
    for i in range(width):
        broker = F.try_element_at(old, F.lit(i + 1))
        at = F.array_position(moves["from_broker"], broker).cast("int")
        new.append(F.when(at > 0, F.element_at(moves["to_broker"], at)).otherwise(broker))
    replaced: Column = F.slice(F.array(*new), 1, F.size(old))
    return replaced


def _valid(ctx: PlanContext, replicas: Column, moves: Column) -> Column:
    """The partition's new replica list is acceptable: no broker twice, and no receiving
    broker's rack holding more than the cap."""
    F = _functions()
    ok: Column = F.size(F.array_distinct(replicas)) == F.size(replicas)
    if ctx.enforce_racks and ctx.rack_of is not None:
        width = max(ctx.replication.values(), default=0)
        racks = [ctx.rack_of(F.try_element_at(replicas, F.lit(i + 1))) for i in range(width)]
        for i in range(width):
            received = F.array_contains(moves["to_broker"], F.try_element_at(replicas, F.lit(i + 1)))
            same = [F.when(racks[j] == racks[i], 1).otherwise(0) for j in range(width)]
            ok = ok & F.coalesce(~received | (sum(same[1:], same[0]) <= F.col("rack_cap")), F.lit(True))
    return ok


def _after_round(leavers: DataFrame, slots: DataFrame, done: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The leavers and slots still open, the leavers' replica lists brought up to date."""
    F = _functions()
    used = done.select("topic", "partition", F.explode("moves").alias("m")).select(
        "topic", "partition", "m.from_broker", "m.to_broker", "m.k"
    )
    now = done.select("topic", "partition", F.col("replicas").alias("now"))
    leavers = (
        leavers.join(
            used.select("topic", "partition", "from_broker"),
            ["topic", "partition", "from_broker"],
            "left_anti",
        )
        .join(now, ["topic", "partition"], "left")
        .withColumn("replicas", F.coalesce("now", "replicas"))
        .drop("now")
        .localCheckpoint()
    )
    slots = slots.join(
        used.select("topic", "to_broker", "k"), ["topic", "to_broker", "k"], "left_anti"
    ).localCheckpoint()
    return leavers, slots


def _latest(spark: SparkSession, rounds: list[DataFrame]) -> DataFrame:
    """Each changed partition's replica list from the last round that changed it."""
    F = _functions()
    if not rounds:
        return spark.createDataFrame([], "topic string, partition int, replicas array<int>")
    if len(rounds) == 1:
        return rounds[0].select("topic", "partition", "replicas")
    frames = [
        done.select("topic", "partition", "replicas", F.lit(i).alias("round"))
        for i, done in enumerate(rounds)
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.groupBy("topic", "partition").agg(F.max_by("replicas", "round").alias("replicas"))


def _leftovers(  # noqa: PLR0917
    ctx: PlanContext,
    parts: DataFrame,
    moved: DataFrame,
    leavers: DataFrame,
    slots: DataFrame,
    rounds: list[DataFrame],
) -> DataFrame:
    """`moved` with the few leavers the rounds did not place placed on the driver."""
    F = _functions()
    left_rows = leavers.collect()
    topics = sorted({r.topic for r in left_rows})
    earlier = [
        r
        for done in rounds
        for r in done.where(F.col("topic").isin(topics))
        .select("topic", "partition", F.explode("moves").alias("m"))
        .select("topic", "partition", "m.from_broker", "m.to_broker")
        .collect()
    ]
    fixes = _place_leftovers(ctx, parts, moved, left_rows, slots.collect(), earlier)
    if not fixes:
        return moved
    fixed = ctx.spark.createDataFrame(fixes, "topic string, partition int, replicas array<int>")
    return moved.join(
        fixed.withColumnRenamed("replicas", "fixed"), ["topic", "partition"], "full_outer"
    ).select("topic", "partition", F.coalesce("fixed", "replicas").alias("replicas"))


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
                    # q's replica on `via` must not be one still to leave (it would be
                    # gone when its own turn comes).
                    if (
                        q != partition
                        and (topic, q, via) not in leaving
                        and fits(topic, layout[topic][q], via, to)
                    ):
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
