"""A cluster snapshot as two Spark DataFrames, and the cluster.json format of `keel reassign`.

    brokers:    id int, rack string (null when none), alive boolean, capacity double (null = 1)
    partitions: topic string, partition int, replicas array<int>, leader int (null),
                size_bytes long (null = unknown, counted as 0)

A broker id in a partition's replicas that is missing from `brokers`, or listed with
`alive: false`, is a dead broker. The JSON file (`{"version": 1, "brokers": [...],
"partitions": [...]}`) is checked whole before Spark sees it: a bad one raises SnapshotError
with one line naming the entry and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import orjson

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class SnapshotError(ValueError):
    """The snapshot cannot be used; the message says why, in one line."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    brokers: DataFrame
    partitions: DataFrame


def broker_schema() -> StructType:
    from pyspark.sql.types import BooleanType, DoubleType, IntegerType, StringType, StructField, StructType

    return StructType(
        [
            StructField("id", IntegerType(), False),
            StructField("rack", StringType(), True),
            StructField("alive", BooleanType(), False),
            StructField("capacity", DoubleType(), True),
        ]
    )


def partition_schema() -> StructType:
    from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("replicas", ArrayType(IntegerType(), False), False),
            StructField("leader", IntegerType(), True),
            StructField("size_bytes", LongType(), True),
        ]
    )


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int


def _broker_row(number: int, entry: object) -> tuple[int, str | None, bool, float | None]:
    where = f"brokers entry {number}"
    if not isinstance(entry, Mapping):
        raise SnapshotError(f"{where} is not an object")
    broker_id, rack, alive = entry.get("id"), entry.get("rack"), entry.get("alive", True)
    capacity = entry.get("capacity")
    if not _is_int(broker_id) or broker_id < 0:
        raise SnapshotError(f'{where}: "id" is missing or not a non-negative integer')
    if rack is not None and not isinstance(rack, str):
        raise SnapshotError(f'broker {broker_id}: "rack" is not a string or null')
    if not isinstance(alive, bool):
        raise SnapshotError(f'broker {broker_id}: "alive" is not true or false')
    if capacity is not None and (type(capacity) not in (int, float) or capacity <= 0):
        raise SnapshotError(f'broker {broker_id}: "capacity" is not a positive number')
    return broker_id, rack, alive, None if capacity is None else float(capacity)


def _partition_row(number: int, entry: object) -> tuple[str, int, list[int], int | None, int | None]:
    where = f"partitions entry {number}"
    if not isinstance(entry, Mapping):
        raise SnapshotError(f"{where} is not an object")
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    leader, size = entry.get("leader"), entry.get("size_bytes")
    if not isinstance(topic, str) or not topic:
        raise SnapshotError(f'{where}: "topic" is missing or not a non-empty string')
    if not _is_int(partition) or partition < 0:
        raise SnapshotError(f'{where}: "partition" is missing or not a non-negative integer')
    where = f"{topic}-{partition}"
    if not isinstance(replicas, list) or not replicas or not all(_is_int(r) and r >= 0 for r in replicas):
        raise SnapshotError(f'{where}: "replicas" is missing or not a non-empty list of broker ids')
    if len(set(replicas)) != len(replicas):
        raise SnapshotError(f'{where}: "replicas" names a broker twice')
    if leader is not None and not _is_int(leader):
        raise SnapshotError(f'{where}: "leader" is not an integer or null')
    if size is not None and (not _is_int(size) or size < 0):
        raise SnapshotError(f'{where}: "size_bytes" is not a non-negative integer or null')
    return topic, partition, replicas, leader, size


def parse_snapshot(document: object) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Checked broker rows and partition rows of a decoded cluster.json."""
    if not isinstance(document, Mapping):
        raise SnapshotError("not a JSON object with brokers and partitions")
    version = document.get("version", 1)
    if version != 1:
        raise SnapshotError(f"version {version!r} is not 1")
    for name in ("brokers", "partitions"):
        if not isinstance(document.get(name), list):
            raise SnapshotError(f'"{name}" is missing or not a list')
    brokers = [_broker_row(n, e) for n, e in enumerate(document["brokers"], 1)]
    seen_brokers: set[int] = set()
    for row in brokers:
        if row[0] in seen_brokers:
            raise SnapshotError(f"broker {row[0]} is listed twice")
        seen_brokers.add(row[0])
    partitions = [_partition_row(n, e) for n, e in enumerate(document["partitions"], 1)]
    seen: set[tuple[str, int]] = set()
    for entry in partitions:
        key = (entry[0], entry[1])
        if key in seen:
            raise SnapshotError(f"partition {key[0]}-{key[1]} is listed twice")
        seen.add(key)
    return brokers, partitions


def load_snapshot_json(spark: SparkSession, path: str | Path) -> Snapshot:
    """Read and check a cluster.json; raises SnapshotError (one line) when it cannot be used."""
    brokers, partitions = read_snapshot_rows(path)
    return frames(spark, brokers, partitions)


def read_snapshot_rows(path: str | Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The checked rows of a cluster.json, without Spark (so a bad file fails fast)."""
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise SnapshotError(f"cannot read: {e.strerror or e}") from None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SnapshotError(f"not JSON: {e}") from None
    return parse_snapshot(document)


def snapshot_from_rows(
    spark: SparkSession, brokers: Iterable[Mapping[str, Any]], partitions: Iterable[Mapping[str, Any]]
) -> Snapshot:
    """A snapshot from Python rows shaped like cluster.json's entries (checked the same way)."""
    broker_rows, partition_rows = parse_snapshot(
        {"version": 1, "brokers": list(brokers), "partitions": list(partitions)}
    )
    return frames(spark, broker_rows, partition_rows)


def frames(
    spark: SparkSession, brokers: Sequence[tuple[Any, ...]], partitions: Sequence[tuple[Any, ...]]
) -> Snapshot:
    return Snapshot(
        brokers=spark.createDataFrame(list(brokers), broker_schema()),
        partitions=spark.createDataFrame(list(partitions), partition_schema()),
    )


def snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    """The cluster.json document of a snapshot (collected: for files of review size)."""
    brokers = [
        {k: v for k, v in row.asDict().items() if k != "capacity" or v is not None}
        for row in snapshot.brokers.orderBy("id").collect()
    ]
    partitions = [row.asDict() for row in snapshot.partitions.orderBy("topic", "partition").collect()]
    return {"version": 1, "brokers": brokers, "partitions": partitions}


def write_parquet(snapshot: Snapshot, directory: str | Path) -> None:
    snapshot.brokers.write.mode("overwrite").parquet(str(Path(directory) / "brokers"))
    snapshot.partitions.write.mode("overwrite").parquet(str(Path(directory) / "partitions"))


def read_parquet(spark: SparkSession, directory: str | Path) -> Snapshot:
    root = Path(directory)
    if not (root / "brokers").exists() or not (root / "partitions").exists():
        raise SnapshotError(f"{root}: no brokers/ and partitions/ tables")
    return Snapshot(
        brokers=spark.read.schema(broker_schema()).parquet(str(root / "brokers")),
        partitions=spark.read.schema(partition_schema()).parquet(str(root / "partitions")),
    )
