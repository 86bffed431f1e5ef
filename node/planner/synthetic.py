"""Synthetic cluster snapshots, built on Spark (for tests and bench/planner.py).

Old brokers are ids 0..brokers-1, broker i in rack "r{i % racks}" (racks=0: no racks), so
consecutive ids alternate racks. Partition p of topic number t starts at broker
(p + start_t) % n and its followers sit at offsets j + racks*q (q varying by topic and round),
which keeps the replicas of a partition on distinct brokers and, with racks, distinct racks.
New brokers (ids brokers..brokers+new-1) are alive and empty; `dead` old brokers are listed
with alive false. `skew` places that fraction of the topics on the first half of the brokers
only. `uneven` varies the partition count of the topics (1 .. 2 x partitions).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from node.planner.snapshot import Snapshot, broker_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclasses.dataclass(frozen=True)
class Shape:
    topics: int = 20
    partitions: int = 12
    replication: int = 3
    brokers: int = 6
    racks: int = 0
    new: int = 0
    dead: tuple[int, ...] = ()
    skew: float = 0.0
    uneven: bool = False
    sizes: bool = True
    # Racks of the new brokers, when racks are used: "spread" (one per rack, in turn) or a name.
    new_rack: str = "spread"
    capacity: tuple[tuple[int, float], ...] = ()


def rack_name(broker: int, shape: Shape) -> str | None:
    if not shape.racks:
        return None
    if broker >= shape.brokers and shape.new_rack != "spread":
        return shape.new_rack
    return f"r{broker % shape.racks}"


def synthetic_snapshot(spark: SparkSession, shape: Shape) -> Snapshot:
    from pyspark.sql import functions as F

    capacity = dict(shape.capacity)
    broker_rows = [
        (b, rack_name(b, shape), b not in shape.dead, capacity.get(b))
        for b in range(shape.brokers + shape.new)
    ]
    brokers = spark.createDataFrame(broker_rows, broker_schema())
    n = shape.brokers
    racks = max(1, shape.racks)
    half = max(shape.replication, n // 2 // racks * racks)
    rf = shape.replication
    count = (
        (F.pmod(F.hash("t"), F.lit(2 * shape.partitions)) + 1) if shape.uneven else F.lit(shape.partitions)
    )
    topics = (
        spark.range(shape.topics)
        .select(F.col("id").cast("int").alias("t"))
        .withColumn("n", count)
        .withColumn(
            "width",
            F.when(F.pmod(F.hash("t", F.lit(7)), F.lit(1000)) < int(shape.skew * 1000), half).otherwise(n),
        )
        .withColumn("start", F.pmod(F.hash("t", F.lit(1)), F.col("width")))
        .withColumn("shift0", F.pmod(F.hash("t", F.lit(2)), F.lit(1 << 20)))
    )
    p = F.col("p")
    width = F.col("width")
    first = F.pmod(p + F.col("start"), width)
    rounds = F.greatest(F.lit(1), F.floor((width - rf) / racks).cast("int"))
    q = F.pmod(F.col("shift0") + F.floor(p / width).cast("int"), rounds)
    replicas = F.array(
        first.cast("int"),
        *[F.pmod(first + j + racks * q, width).cast("int") for j in range(1, rf)],
    )
    size = (
        (F.pmod(F.hash("t", "p", F.lit(3)), F.lit(1000)) + 1).cast("long") * F.lit(1 << 20)
        if shape.sizes
        else F.lit(None).cast("long")
    )
    partitions = topics.select("*", F.explode(F.sequence(F.lit(0), F.col("n") - 1)).alias("p")).select(
        F.format_string("topic-%05d", "t").alias("topic"),
        F.col("p").cast("int").alias("partition"),
        replicas.alias("replicas"),
        first.cast("int").alias("leader"),
        size.alias("size_bytes"),
    )
    return Snapshot(brokers=brokers, partitions=partitions)
