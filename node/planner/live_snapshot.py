"""The live snapshot: the cluster as ZooKeeper and the brokers see it now, as rows, as the
cluster.json of `keel reassign snapshot`, and as Parquet tables under `planner.snapshot.dir`.

- brokers: every registered broker (alive, with its rack), and every broker named in a
  replica list that is not registered (dead, rack unknown);
- partitions: every partition's replicas (the target replicas while a reassignment runs),
  its leader and ISR from the state znode (read pipelined, in multi-reads), and its size:
  the leader's replica size from DescribeLogDirs, else the largest replica's;
- replicas: each replica's size on each live broker, from DescribeLogDirs (35).

Each Parquet snapshot is a directory named for its UTC time (`20260101T120000.000Z`) with the
three tables; it is written under a temporary name and renamed, so a reader never sees half
of one. `history` reads them back as growth per topic and per broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.base.ports import ClusterStore, RegisteredBroker, TopicPartition
from node.clients.admin import KeelAdminClient
from wire.errors import WireError
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

Row = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class LiveSnapshot:
    taken_ms: int
    brokers: list[Row]
    partitions: list[Row]
    replicas: list[Row]
    # Live brokers that did not answer DescribeLogDirs (their replicas' sizes are unknown).
    unanswered: tuple[int, ...] = ()

    def cluster_json(self) -> dict[str, object]:
        """The snapshot file format: {"version": 1, "brokers": [...], "partitions": [...]}."""
        return {
            "version": 1,
            "brokers": [{"id": b["id"], "rack": b["rack"], "alive": b["alive"]} for b in self.brokers],
            "partitions": [
                {
                    "topic": p["topic"],
                    "partition": p["partition"],
                    "replicas": p["replicas"],
                    "leader": p["leader"],
                    "size_bytes": p["size_bytes"],
                }
                for p in self.partitions
            ],
        }


async def replica_sizes(
    brokers: Iterable[RegisteredBroker], *, timeout: float, security: ClientSecurity = PLAINTEXT_CLIENT
) -> tuple[dict[int, dict[TopicPartition, int]], tuple[int, ...]]:
    """Each live broker's replica sizes, asked of all brokers at once (each on its endpoint of
    the client's security protocol); and who did not answer."""

    async def ask(broker: RegisteredBroker) -> dict[TopicPartition, int] | None:
        protocol = security.security_protocol
        endpoint = next((e for e in broker.info.endpoints if e.security_protocol == protocol), None)
        if endpoint is None:
            log.warning(
                "broker %d has no %s endpoint to describe its log dirs", broker.info.broker_id, protocol
            )
            return None
        try:
            async with KeelAdminClient(endpoint.address, timeout=timeout, security=security) as admin:
                response = await admin.describe_log_dirs(None)
        except (WireError, OSError) as e:
            log.warning("broker %d did not describe its log dirs: %s", broker.info.broker_id, e)
            return None
        return {
            TopicPartition(t.name, p.partition_index): p.partition_size
            for r in response.results
            for t in r.topics
            for p in t.partitions
        }

    listed = list(brokers)
    answers = await asyncio.gather(*(ask(b) for b in listed))
    sizes = {b.info.broker_id: a for b, a in zip(listed, answers, strict=True) if a is not None}
    missing = tuple(b.info.broker_id for b, a in zip(listed, answers, strict=True) if a is None)
    return sizes, missing


async def take(
    store: ClusterStore, *, timeout: float, now_ms: int, security: ClientSecurity = PLAINTEXT_CLIENT
) -> LiveSnapshot:
    """Read the cluster: registrations, topic assignments and partition states from
    ZooKeeper, replica sizes from the brokers (reached with `security`)."""
    registered, topics = await asyncio.gather(store.registered_brokers(), store.topics())
    assignments = await store.topic_assignments(topics)
    tps = sorted(TopicPartition(t, p) for t, a in assignments.items() for p in a.partitions)
    states, (sizes, unanswered) = await asyncio.gather(
        store.partition_states(tps), replica_sizes(registered, timeout=timeout, security=security)
    )
    live = {b.info.broker_id: b.info.rack for b in registered}
    named: set[int] = set()
    partitions: list[Row] = []
    replicas: list[Row] = []
    for tp in tps:
        target = list(assignments[tp.topic].partitions[tp.partition].target_replicas)
        named.update(target)
        state = states.get(tp)
        leader = state.leader_and_isr.leader if state is not None else -1
        isr = list(state.leader_and_isr.isr) if state is not None else []
        known = {b: sizes[b][tp] for b in target if b in sizes and tp in sizes[b]}
        size = known.get(leader, max(known.values(), default=None))
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": target,
                "leader": leader if leader >= 0 else None,
                "isr": isr,
                "size_bytes": size,
            }
        )
        replicas.extend(
            {"topic": tp.topic, "partition": tp.partition, "broker": b, "size_bytes": s}
            for b, s in known.items()
        )
    brokers = [{"id": b, "rack": rack, "alive": True} for b, rack in sorted(live.items())]
    brokers += [{"id": b, "rack": None, "alive": False} for b in sorted(named - live.keys())]
    return LiveSnapshot(now_ms, brokers, partitions, replicas, unanswered)


# --- Parquet ---


def _schemas() -> dict[str, Any]:
    from pyspark.sql import types as T

    return {
        "brokers": T.StructType(
            [
                T.StructField("id", T.IntegerType(), False),
                T.StructField("rack", T.StringType(), True),
                T.StructField("alive", T.BooleanType(), False),
            ]
        ),
        "partitions": T.StructType(
            [
                T.StructField("topic", T.StringType(), False),
                T.StructField("partition", T.IntegerType(), False),
                T.StructField("replicas", T.ArrayType(T.IntegerType(), False), False),
                T.StructField("leader", T.IntegerType(), True),
                T.StructField("isr", T.ArrayType(T.IntegerType(), False), False),
                T.StructField("size_bytes", T.LongType(), True),
            ]
        ),
        "replicas": T.StructType(
            [
                T.StructField("topic", T.StringType(), False),
                T.StructField("partition", T.IntegerType(), False),
                T.StructField("broker", T.IntegerType(), False),
                T.StructField("size_bytes", T.LongType(), False),
            ]
        ),
    }


def snapshot_name(taken_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(taken_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y%m%dT%H%M%S.") + f"{taken_ms % 1000:03d}Z"


def dataframes(spark: SparkSession, snapshot: LiveSnapshot) -> dict[str, DataFrame]:
    schemas = _schemas()
    rows = {"brokers": snapshot.brokers, "partitions": snapshot.partitions, "replicas": snapshot.replicas}
    return {
        name: spark.createDataFrame(
            [tuple(r[f] for f in schemas[name].fieldNames()) for r in rows[name]], schemas[name]
        )
        for name in schemas
    }


def write_parquet(spark: SparkSession, snapshot: LiveSnapshot, root: Path) -> Path:
    """Write the snapshot's three tables under `root/<time>/`; returns that directory."""
    final = root / snapshot_name(snapshot.taken_ms)
    staging = root / f".tmp-{final.name}"
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    for name, frame in dataframes(spark, snapshot).items():
        frame.coalesce(1).write.mode("overwrite").parquet(str(staging / name))
    staging.rename(final)
    return final


def snapshots(root: Path) -> list[Path]:
    """The complete snapshots under `root`, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def prune(root: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` snapshots (and staging left by a crash); the deleted."""
    found = snapshots(root)
    doomed = found[: max(0, len(found) - keep)]
    if root.is_dir():
        doomed += [
            p for p in root.iterdir() if p.name.startswith(".tmp-") and p.stat().st_mtime < time.time() - 3600
        ]
    for directory in doomed:
        shutil.rmtree(directory, ignore_errors=True)
    return doomed


def read_parquet(spark: SparkSession, directory: Path) -> dict[str, DataFrame]:
    return {name: spark.read.parquet(str(directory / name)) for name in ("brokers", "partitions", "replicas")}


def history(spark: SparkSession, root: Path) -> tuple[DataFrame, DataFrame]:
    """Growth from one snapshot to the next: (per topic, per broker) DataFrames with columns
    snapshot, topic|broker, size_bytes and growth_bytes (null for the first snapshot)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    found = snapshots(root)
    if not found:
        raise FileNotFoundError(f"no snapshots under {root}")
    frames = [spark.read.parquet(str(d / "replicas")).withColumn("snapshot", F.lit(d.name)) for d in found]
    replicas = frames[0]
    for frame in frames[1:]:
        replicas = replicas.unionByName(frame)
    replicas = replicas.cache()
    # A topic's size counts each partition once: its largest replica.
    topic_sizes = (
        replicas.groupBy("snapshot", "topic", "partition")
        .agg(F.max("size_bytes").alias("size_bytes"))
        .groupBy("snapshot", "topic")
        .agg(F.sum("size_bytes").alias("size_bytes"))
    )
    broker_sizes = replicas.groupBy("snapshot", "broker").agg(F.sum("size_bytes").alias("size_bytes"))

    def growth(frame: DataFrame, key: str) -> DataFrame:
        window = Window.partitionBy(key).orderBy("snapshot")
        return frame.withColumn(
            "growth_bytes", F.col("size_bytes") - F.lag("size_bytes").over(window)
        ).orderBy("snapshot", key)

    return growth(topic_sizes, "topic"), growth(broker_sizes, "broker")
