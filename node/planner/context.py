"""What the stages of a plan share about the brokers and topics in scope."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

# A broker column -> its rack, as a number (null for a broker without one).
RackOf = Callable[["Column"], "Column"]

# Broker ids up to this index a literal array; larger ones use a literal map.
ARRAY_IDS = 1 << 16


@dataclasses.dataclass
class PlanContext:
    spark: SparkSession
    targets: list[int]
    racks: dict[int, str | None]
    enforce_racks: bool
    rack_of: RackOf | None  # when some broker has a rack
    replication: dict[str, int]
    partitions: dict[str, int]
    weights: dict[int, float]


def rack_lookup(racks: Mapping[int, str | None]) -> RackOf | None:
    """The rack of a broker column, as the rank of its name, from literals. Rack checks run
    inside higher-order functions over replica lists, which Spark evaluates without code
    generation, per replica: a lookup in an array indexed by broker id is one step, where a
    literal map is searched key by key (100 brokers: 100 comparisons per replica)."""
    from pyspark.sql import functions as F

    named = {b: r for b, r in racks.items() if r is not None}
    if not named:
        return None
    number = {name: i for i, name in enumerate(sorted(set(named.values())))}
    if min(named) >= 0 and max(named) < ARRAY_IDS:
        table = F.array(
            *[
                F.lit(number[named[b]]) if b in named else F.lit(None).cast("int")
                for b in range(max(named) + 1)
            ]
        )
        # try_element_at: null past the end (a broker id the snapshot does not list).
        return lambda broker: F.when(broker >= 0, F.try_element_at(table, broker + 1))
    mapping = F.create_map(*[x for b, r in sorted(named.items()) for x in (F.lit(b), F.lit(number[r]))])
    return lambda broker: F.element_at(mapping, broker)


def replica_racks(ctx: PlanContext, replicas: Column) -> Column:
    """The racks of a replica list, position by position (null for a broker without one),
    as plain element lookups: code-generated, unlike a higher-order function over the list.
    Lists are at most the largest replication factor in scope long."""
    from pyspark.sql import functions as F

    assert ctx.rack_of is not None
    width = max(ctx.replication.values(), default=0)
    racks = [ctx.rack_of(F.try_element_at(replicas, F.lit(i + 1))) for i in range(width)]
    return F.slice(F.array(*racks), 1, F.size(replicas)) if racks else F.array().cast("array<int>")
