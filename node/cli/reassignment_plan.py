"""The decisions behind `keel reassign`, without a cluster: Kafka's reassignment JSON, the
throttles Kafka's tool sets for a move, and the progress line of `--wait`."""

from __future__ import annotations

from collections.abc import Mapping

from node.cli.partition_file import Partition, PartitionFileError, parse_partition_entries, read_text

# A reassignment file that cannot be used (the shared partition-file error).
ReassignmentFileError = PartitionFileError


# --- the reassignment file (pure) ---


def parse_reassignment(text: str) -> dict[Partition, list[int]]:
    """(topic, partition) → target replicas, in file order. Raises ReassignmentFileError."""
    entries = parse_partition_entries(text, version=1)
    targets: dict[Partition, list[int]] = {}
    for (topic, partition), entry in entries:
        where = f"{topic}-{partition}"
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not replicas:
            raise ReassignmentFileError(f'{where}: "replicas" is missing or not a non-empty list')
        if any(type(r) is not int for r in replicas):
            raise ReassignmentFileError(f'{where}: "replicas" holds something other than broker ids')
        if any(r < 0 for r in replicas):
            raise ReassignmentFileError(f"{where}: broker id {min(replicas)} is negative")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentFileError(f"{where}: a broker is listed twice in {replicas}")
        targets[topic, partition] = list(replicas)
    return targets


def load_reassignment_file(path: str) -> dict[Partition, list[int]]:
    return parse_reassignment(read_text(path))


def reassignment_json(assignment: Mapping[Partition, list[int]]) -> dict[str, object]:
    return {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in assignment.items()],
    }


# --- progress (pure) ---


def render_progress(
    done: int, total: int, copied: int, to_copy: int, rate: float | None, *, width: int = 24
) -> str:
    """One line: a bar of bytes copied, partitions done, bytes, rate, time left."""
    fraction = 1.0 if to_copy <= 0 else min(1.0, copied / to_copy)
    filled = round(fraction * width)
    bar = "#" * filled + "-" * (width - filled)
    left = max(0, to_copy - copied)
    if rate and rate > 0:
        seconds = int(left / rate)
        eta = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d} left"
        speed = f"{mib(int(rate))}/s"
    else:
        eta, speed = "--:--:-- left", "-- MiB/s"
    return (
        f"[{bar}] {fraction * 100:5.1f}%  {done}/{total} partitions  "
        f"{mib(copied)} of {mib(to_copy)}  {speed}  {eta}"
    )


def mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"
