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
