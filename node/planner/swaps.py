"""Same-topic replica swaps, the operation of the bytes pass and of the rack repair: partition
p's replica on one broker goes to another and q's replica there comes back. A swap keeps
every (topic, broker) cell and every broker's replica count."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def moves_added(old: Column, leaving: Column, to: Column) -> Column:
    """What moving a replica from `leaving` to `to` adds to the plan's moves against the
    partition's `old` replicas: one if `to` is new to it, minus one if `leaving` was (the
    move that brought it there is undone)."""
    from pyspark.sql import functions as F

    added: Column = (~F.array_contains(old, to)).cast("int") - (~F.array_contains(old, leaving)).cast("int")
    return added


def one_per_partition(swaps: DataFrame, key: list[str], priority: list[Column | str]) -> DataFrame:
    """The swaps (rows with `topic`, `p`, `q`, unique by `key`) in which no partition takes
    part twice: a partition in several keeps the first by `priority`, and a swap that loses
    either of its partitions is dropped (it may come back in a later round)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = F.row_number().over(Window.partitionBy("topic", "partition").orderBy(*priority, *key))
    return (
        swaps.withColumn("partition", F.explode(F.array("p", "q")))
        .withColumn("n", first)
        .withColumn("worst", F.max("n").over(Window.partitionBy(*key)))
        .where((F.col("worst") == 1) & (F.col("partition") == F.col("p")))
        .drop("partition", "n", "worst")
    )


def apply_swaps(state: DataFrame, chosen: DataFrame, first: str, second: str) -> DataFrame:
    """`state`'s replica lists with each of `chosen`'s swaps applied in place: partition p's
    replica on broker `first` goes to `second`, and q's replica on `second` goes to `first`."""
    from pyspark.sql import functions as F

    changes = chosen.select(
        "topic", F.col("p").alias("partition"), F.col(first).alias("leaving"), F.col(second).alias("to")
    ).unionByName(
        chosen.select(
            "topic",
            F.col("q").alias("partition"),
            F.col(second).alias("leaving"),
            F.col(first).alias("to"),
        )
    )
    return (
        state.join(changes, ["topic", "partition"], "left")
        .withColumn(
            "replicas",
            F.when(F.col("to").isNull(), F.col("replicas")).otherwise(
                F.transform("replicas", lambda x: F.when(x == F.col("leaving"), F.col("to")).otherwise(x))
            ),
        )
        .drop("leaving", "to")
    )
