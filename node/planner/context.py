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
