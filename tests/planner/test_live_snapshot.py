"""Live snapshots as Parquet: written one directory per snapshot, read back, and the growth
history per topic and per broker computed from them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from node.planner import live_snapshot
from node.planner.live_snapshot import LiveSnapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def snapshot(taken_ms: int, size: int) -> LiveSnapshot:
    partitions = [
        {"topic": "t", "partition": p, "replicas": [1, 2], "leader": 1, "isr": [1, 2], "size_bytes": size}
        for p in range(2)
    ]
    replicas = [
        {"topic": "t", "partition": p, "broker": b, "size_bytes": size} for p in range(2) for b in (1, 2)
    ]
    brokers = [{"id": 1, "rack": "a", "alive": True}, {"id": 2, "rack": None, "alive": True}]
    brokers.append({"id": 3, "rack": None, "alive": False})
    return LiveSnapshot(taken_ms, brokers, partitions, replicas)


def test_snapshots_written_read_back_and_their_history(spark: SparkSession, tmp_path: Path) -> None:
    first = live_snapshot.write_parquet(spark, snapshot(1_700_000_000_000, 100), tmp_path)
    second = live_snapshot.write_parquet(spark, snapshot(1_700_000_060_000, 250), tmp_path)
    assert first.name == "20231114T221320.000Z"
    assert live_snapshot.snapshots(tmp_path) == [first, second]

    tables = live_snapshot.read_parquet(spark, second)
    brokers = sorted((r.id, r.rack, r.alive) for r in tables["brokers"].collect())
    assert brokers == [(1, "a", True), (2, None, True), (3, None, False)]
    partition = tables["partitions"].where("partition = 1").collect()[0]
    assert (partition.replicas, partition.leader, partition.isr, partition.size_bytes) == (
        [1, 2],
        1,
        [1, 2],
        250,
    )

    by_topic, by_broker = live_snapshot.history(spark, tmp_path)
    assert [(r.snapshot, r.size_bytes, r.growth_bytes) for r in by_topic.collect()] == [
        (first.name, 200, None),
        (second.name, 500, 300),
    ]
    assert [(r.broker, r.growth_bytes) for r in by_broker.where(f"snapshot = '{second.name}'").collect()] == [
        (1, 300),
        (2, 300),
    ]


async def test_the_service_warms_the_plan_jobs_up(spark: SparkSession, tmp_path: Path) -> None:
    from node.planner.service import PlannerService

    service = PlannerService(
        spark=spark,
        store=None,  # type: ignore[arg-type]  # warming up reads no store
        snapshot_dir=tmp_path,
        request_timeout_s=1.0,
        is_active=lambda: True,
    )
    await service.warm_up()
    assert not service.spark_lock.locked()
