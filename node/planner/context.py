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
    # A broker column -> its rack as a number, looked up in a literal array indexed by broker
    # id (rack_lookup): None when no broker has a rack.
    rack_of: RackOf | None
    replication: dict[str, int]
    partitions: dict[str, int]
    weights: dict[int, float]

    def may_replace(self, replicas: Column, leaving: Column, to: Column, cap: Column) -> Column:
        """Whether broker `to` may take the place of `leaving` in a partition's `replicas`:
        it holds none of them yet, and (racks enforced) its rack stays within `cap` replicas."""
        from pyspark.sql import functions as F

        ok: Column = ~F.array_contains(replicas, to)
        if self.enforce_racks and self.rack_of is not None:
            # Position by position (code-generated), not a lambda over the list.
            rack = self.rack_of(to)
            same = F.lit(0)
            for i in range(max(self.replication.values(), default=0)):
                broker = F.try_element_at(replicas, F.lit(i + 1))
                same = same + F.when((broker != leaving) & (self.rack_of(broker) == rack), 1).otherwise(0)
            ok = ok & (same < cap)
        return ok

    def rack_cap(self, replicas: Column) -> Column:
        """targets.rack_cap as a column: one replica per rack when the racks allow it."""
        from pyspark.sql import functions as F

        racks = len({self.racks[b] for b in self.targets})
        rf = F.size(replicas)
        return F.when(rf <= racks, F.lit(1)).otherwise(F.ceil(rf / F.lit(racks))).cast("int")

    def rack_violations(self, replicas: Column, cap: Column) -> Column:
        """Sum over racks of max(0, the partition's replicas in the rack - cap); 0 when racks
        are not enforced."""
        from pyspark.sql import functions as F

        if not self.enforce_racks or self.rack_of is None:
            return F.lit(0)
        racks = F.array_compact(replica_racks(self, replicas))
        # With a cap of 1 (RF at most the racks) the excess is the replicas sharing a rack.
        shared = F.size(racks) - F.size(F.array_distinct(racks))
        excess = F.transform(
            F.array_distinct(racks),
            lambda r: F.greatest(F.size(F.filter(racks, lambda x: x == r)) - cap, F.lit(0)),
        )
        over_cap: Column = F.when(cap == 1, shared).otherwise(
            F.aggregate(excess, F.lit(0), lambda acc, x: acc + x)
        )
        return over_cap


def rack_lookup(racks: Mapping[int, str | None]) -> RackOf | None:
    """The rack of a broker column, as the rank of its name, from literals. Rack checks run
    over every replica of every partition, often inside higher-order functions, which Spark
    evaluates without code generation: a lookup in an array indexed by broker id is one
    step, where a literal map is searched key by key (100 brokers: 100 comparisons)."""
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
