"""The decisions behind `keel reassign`, without a cluster: Kafka's reassignment JSON, the
throttles Kafka's tool sets for a move, and the progress line of `--wait`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


# --- checks against the cluster's metadata (pure) ---


def missing_partitions(existing: Mapping[Partition, object], wanted: Iterable[Partition]) -> str | None:
    """One line naming each partition of the file that the cluster does not have, or None."""
    topics: dict[str, list[int]] = {}
    for topic, partition in existing:
        topics.setdefault(topic, []).append(partition)
    problems = []
    for topic, partition in wanted:
        if topic not in topics:
            problems.append(f"{topic}-{partition} does not exist: there is no topic {topic}")
        elif partition not in topics[topic]:
            count = len(topics[topic])
            problems.append(f"{topic}-{partition} does not exist: {topic} has partitions 0 to {count - 1}")
    return "; ".join(problems) or None


def dead_targets(
    current: Mapping[Partition, list[int]], targets: Mapping[Partition, list[int]], live: set[int]
) -> str | None:
    """The partitions whose new replicas are not all on live brokers, in one line, or None.
    The controller refuses those (Kafka's rule: only the replicas a reassignment adds must be
    alive); checked here first so that nothing, not even a throttle, is set for a refused move."""
    refused = {
        tp: sorted(set(target) - set(current[tp]) - live)
        for tp, target in targets.items()
        if set(target) - set(current[tp]) - live
    }
    if not refused:
        return None
    moves = ", ".join(f"{t}-{p} to broker {','.join(map(str, dead))}" for (t, p), dead in refused.items())
    alive = ",".join(map(str, sorted(live)))
    return f"these moves go to brokers that are not alive: {moves} (live brokers: {alive})"


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
