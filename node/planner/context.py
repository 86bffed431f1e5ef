"""What the stages of a plan share about the brokers and topics in scope."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


@dataclasses.dataclass
class PlanContext:
    spark: SparkSession
    targets: list[int]
    racks: dict[int, str | None]
    enforce_racks: bool
    rack_of: Column | None  # map broker -> rack (literal), when racks are enforced
    replication: dict[str, int]
    partitions: dict[str, int]
    weights: dict[int, float]

    def may_replace(self, replicas: Column, leaving: Column, to: Column, cap: Column) -> Column:
        """Whether broker `to` may take the place of `leaving` in a partition's `replicas`:
        it holds none of them yet, and (racks enforced) its rack stays within `cap` replicas."""
        from pyspark.sql import functions as F

        ok: Column = ~F.array_contains(replicas, to)
        if self.enforce_racks and self.rack_of is not None:
            rack_of = self.rack_of
            rack = F.element_at(rack_of, to)
            others = F.filter(replicas, lambda x: x != leaving)
            ok = ok & (F.size(F.filter(others, lambda x: F.element_at(rack_of, x) == rack)) < cap)
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
        rack_of = self.rack_of
        racks = F.filter(F.transform(replicas, lambda x: F.element_at(rack_of, x)), lambda r: r.isNotNull())
        excess = F.transform(
            F.array_distinct(racks),
            lambda r: F.greatest(F.size(F.filter(racks, lambda x: x == r)) - cap, F.lit(0)),
        )
        return F.aggregate(excess, F.lit(0), lambda acc, x: acc + x)
