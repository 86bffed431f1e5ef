"""The decisions behind `keel reassign`, without a cluster: Kafka's reassignment JSON, the
throttles Kafka's tool sets for a move, and the progress line of `--wait`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import orjson

from wire.api import AlterableConfig, AlterConfigsResource

Partition = tuple[str, int]
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
_TOPIC, _BROKER = 2, 4
_SET, _DELETE = 0, 1


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


# --- throttles (pure) ---


@dataclasses.dataclass(frozen=True)
class ThrottlePlan:
    """Kafka's tool: leader throttle on the current replicas, follower throttle on the adding
    ones, per topic; the rates on every broker a moving replica is on or goes to."""

    topics: dict[str, tuple[str, str]]
    brokers: set[int]


def throttle_plan(
    current: Mapping[Partition, list[int]], targets: Mapping[Partition, list[int]]
) -> ThrottlePlan:
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in sorted(targets.items()):
        existing = current.get((topic, partition), [])
        if list(existing) == list(target):
            continue
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in existing)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in target if b not in existing)
        brokers.update(existing, target)
    return ThrottlePlan(
        {t: (",".join(leaders[t]), ",".join(followers.get(t, []))) for t in sorted(leaders)}, brokers
    )


def _resource(resource_type: int, name: str, configs: Mapping[str, str | None]) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=[
            AlterableConfig(name=k, config_operation=_DELETE if v is None else _SET, value=v)
            for k, v in configs.items()
        ],
    )


def throttle_resources(plan: ThrottlePlan, rate: int) -> list[AlterConfigsResource]:
    resources = [
        _resource(_BROKER, str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)})
        for b in sorted(plan.brokers)
    ]
    for topic, (leader, follower) in plan.topics.items():
        resources.append(
            _resource(_TOPIC, topic, {LEADER_REPLICAS: leader or None, FOLLOWER_REPLICAS: follower or None})
        )
    return resources


def clear_throttle_resources(brokers: list[int], topics: list[str]) -> list[AlterConfigsResource]:
    """Kafka's clearAllThrottles: the rates on every broker, the lists on the file's topics."""
    resources = [
        _resource(_BROKER, str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in sorted(brokers)
    ]
    resources += [
        _resource(_TOPIC, t, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}) for t in sorted(set(topics))
    ]
    return resources


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
