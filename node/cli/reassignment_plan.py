"""The decisions behind `keel reassign`, without a cluster: Kafka's reassignment JSON, the
throttles Kafka's tool sets for a move, and the progress line of `--wait`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import orjson

Partition = tuple[str, int]


class ReassignmentFileError(ValueError):
    """The reassignment file cannot be used; the message says why, in one line."""


# --- the reassignment file (pure) ---


def parse_reassignment(text: str) -> dict[Partition, list[int]]:
    """(topic, partition) → target replicas, in file order. Raises ReassignmentFileError."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ReassignmentFileError(f"not JSON: {e}") from None
    if not isinstance(document, dict):
        raise ReassignmentFileError("not a JSON object with a partitions list")
    version = document.get("version", 1)
    if version != 1:
        raise ReassignmentFileError(f"version {version!r} is not 1")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        raise ReassignmentFileError('"partitions" is missing or not a list')
    if not entries:
        raise ReassignmentFileError('"partitions" is empty')
    targets: dict[Partition, list[int]] = {}
    for number, entry in enumerate(entries, 1):
        where = f"partitions entry {number}"
        if not isinstance(entry, dict):
            raise ReassignmentFileError(f"{where} is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise ReassignmentFileError(f'{where}: "topic" is missing or not a non-empty string')
        if type(partition) is not int or partition < 0:
            raise ReassignmentFileError(f'{where}: "partition" is missing or not a non-negative integer')
        where = f"{topic}-{partition}"
        if not isinstance(replicas, list) or not replicas:
            raise ReassignmentFileError(f'{where}: "replicas" is missing or not a non-empty list')
        if any(type(r) is not int for r in replicas):
            raise ReassignmentFileError(f'{where}: "replicas" holds something other than broker ids')
        if any(r < 0 for r in replicas):
            raise ReassignmentFileError(f"{where}: broker id {min(replicas)} is negative")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentFileError(f"{where}: a broker is listed twice in {replicas}")
        if (topic, partition) in targets:
            raise ReassignmentFileError(f"{where} is listed twice")
        targets[topic, partition] = list(replicas)
    return targets


def load_reassignment_file(path: str) -> dict[Partition, list[int]]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ReassignmentFileError(f"cannot read it: {e}") from None
    return parse_reassignment(text)


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
