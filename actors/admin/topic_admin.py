"""Topic creation decisions, without I/O: name and config validation and replica placement,
as Kafka's AdminZkClient and AdminUtils.assignReplicasToBrokers make them.

Placement spreads leaders round-robin from a random start, and puts followers at a shifting
distance from the leader, so that partitions' replicas do not all land on the same brokers.
When every broker has a rack, brokers are interleaved by rack and each partition gets
replicas on as many racks as it can.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

from actors.admin.throttle_configs import FOLLOWER_REPLICAS, LEADER_REPLICAS, parse_throttled_replicas
from actors.base.ports import ReplicaAssignment
from wire.errors import ErrorCode

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


def legal_topic_name(name: str) -> bool:
    """Whether a topic may have this name (length first: a long name is not scanned)."""
    return 0 < len(name) <= MAX_NAME_LENGTH and name not in (".", "..") and bool(_LEGAL_NAME.match(name))


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_name(name: str, existing: set[str]) -> None:
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_NAME_LENGTH} characters"
        )
    if not _LEGAL_NAME.match(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} has characters other than [a-zA-Z0-9._-]"
        )
    if name in existing:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    # '.' and '_' collide in metric names, so Kafka refuses names that differ only by them.
    collides = {t for t in existing if t.replace(".", "_") == name.replace(".", "_")}
    if collides:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic {name!r} collides with existing {sorted(collides)[0]!r}",
        )


def _bool(value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return True


def _int_at_least(minimum: int) -> object:
    def check(value: str) -> bool:
        if int(value) < minimum:
            raise ValueError(f"must be at least {minimum}")
        return True

    return check


def _compression(value: str) -> bool:
    if value not in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        raise ValueError("must be producer, uncompressed, gzip, snappy, lz4 or zstd")
    return True


def _policy(value: str) -> bool:
    # Empty (neither: nothing deleted, nothing compacted) is Kafka's too.
    if value and not set(value.split(",")) <= {"delete", "compact"}:
        raise ValueError("must be delete and/or compact")
    return True


def _ratio(value: str) -> bool:
    if not 0 <= float(value) <= 1:
        raise ValueError("must be from 0 to 1")
    return True


def _throttled_replicas(value: str) -> bool:
    parse_throttled_replicas(value)
    return True


# The topic configs Keel knows, with Kafka's names.
TOPIC_CONFIGS = {
    "unclean.leader.election.enable": _bool,
    "min.insync.replicas": _int_at_least(1),
    "retention.ms": _int_at_least(-1),
    "retention.bytes": _int_at_least(-1),
    # KIP-1030's floor (node/broker/log/config.py's SEGMENT_BYTES_MIN).
    "segment.bytes": _int_at_least(1 << 20),
    "max.message.bytes": _int_at_least(0),
    "flush.messages": _int_at_least(1),
    "flush.ms": _int_at_least(0),
    "cleanup.policy": _policy,
    "compression.type": _compression,
    "delete.retention.ms": _int_at_least(0),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _int_at_least(0),
    # Replication throttles (KIP-73): which replicas the broker quotas apply to.
    LEADER_REPLICAS: _throttled_replicas,
    FOLLOWER_REPLICAS: _throttled_replicas,
}


def validate_configs(configs: Mapping[str, str]) -> None:
    for key, value in configs.items():
        check = TOPIC_CONFIGS.get(key)
        if check is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key}")
        try:
            check(value)  # type: ignore[operator]
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {key}: {e}") from None


def validate_assignment(assignment: Mapping[int, Sequence[int]], brokers: set[int]) -> None:
    if not assignment:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica assignment is empty")
    if sorted(assignment) != list(range(len(assignment))):
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise TopicError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "every partition needs the same, non-zero, replica count"
        )
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {partition} lists a broker twice"
            )
        unknown = set(replicas) - brokers
        if unknown:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition} names unknown brokers {sorted(unknown)}",
            )


def validate_counts(partitions: int, replication_factor: int, brokers: int) -> None:
    """A partition count and replication factor that some placement on `brokers` can take."""
    if partitions < 1:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1")
    if replication_factor < 1:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "the replication factor must be at least 1")
    if replication_factor > brokers:
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the {brokers} available brokers",
        )


def _replica_index(first: int, shift: int, index: int, count: int) -> int:
    return (first + 1 + (shift + index) % (count - 1)) % count


def assign_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    rng: random.Random | None = None,
    start_index: int | None = None,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokers: broker id → rack (None when unknown). The first
    leader's position and the follower shift are drawn at random; a fixed `start_index`
    replaces both draws, and partitions are numbered from `start_partition`, as when
    partitions are added."""
    validate_counts(partitions, replication_factor, len(brokers))
    if start_index is not None:
        start = shift = start_index
    else:
        # Without an rng, the module's generator: a simulation seeds it, so placement replays.
        draw = random.randrange if rng is None else rng.randrange
        start, shift = draw(len(brokers)), draw(len(brokers))
    return place_replicas(
        partitions, replication_factor, brokers, start=start, shift=shift, start_partition=start_partition
    )


def place_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    start: int,
    shift: int,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    """Kafka's placement for a given start and shift (AdminUtils' rack-unaware and rack-aware
    assignment, the vectors of its javadoc): the leaders go round the brokers (sorted, or
    alternated by rack) from `start`, and each partition's followers come after its leader at
    a distance that `shift` sets and that grows by one each time the leaders wrap around. With
    racks, a follower goes to a rack that has no replica of the partition yet, while one is
    left. Topic creation and the planner's `--generate` baseline both place this way."""
    validate_counts(partitions, replication_factor, len(brokers))
    racks = {b: r for b, r in brokers.items() if r is not None}
    if racks and len(racks) != len(brokers):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "not all brokers have rack information")
    arranged = rack_alternated(racks) if racks else sorted(brokers)
    count, rack_count = len(arranged), max(len(set(racks.values())), 1)
    assignment = {}
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        leader = arranged[first]
        replicas = [leader]
        if not racks:
            replicas += [
                arranged[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)
            ]
            assignment[partition] = replicas
            continue
        racks_used, k = {racks[leader]}, 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, count)]
                k += 1
                rack = racks[broker]
                if (rack not in racks_used or len(racks_used) == rack_count) and (
                    broker not in replicas or len(replicas) == count
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        assignment[partition] = replicas
    return assignment


def rack_alternated(brokers: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: one from each rack in turn, racks and brokers sorted."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(brokers.items()):
        by_rack.setdefault(rack, []).append(broker)
    result: list[int] = []
    racks = sorted(by_rack)
    index = 0
    while len(result) < len(brokers):
        remaining = by_rack[racks[index]]
        if remaining:
            result.append(remaining.pop(0))
        index = (index + 1) % len(racks)
    return result


# --- adding partitions (AdminZkClient.addPartitions) ---


def partitions_to_add(existing: Mapping[int, ReplicaAssignment], count: int) -> int:
    """How many partitions taking a topic to `count` adds, if it may grow now."""
    current = len(existing)
    if count < current:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"the topic has {current} partitions; {count} would not be an increase",
        )
    if count == current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"the topic already has {current} partitions")
    if any(a.adding or a.removing for a in existing.values()):
        raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS, "a partition of the topic is being reassigned")
    return count - current


def plan_added_partitions(
    existing: Mapping[int, ReplicaAssignment],
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """The replicas of the partitions that take a topic from its current partitions to
    `count`: as given (one list per new partition), or placed as Kafka places them, starting
    from the position of partition 0's first replica among the sorted brokers, so that the new
    partitions continue the existing layout."""
    current = len(existing)
    added = partitions_to_add(existing, count)
    first = existing[min(existing)].replicas
    if assignments is None:
        ordered = sorted(brokers)
        start = next((i for i, b in enumerate(ordered) if b >= first[0]), 0)
        return assign_replicas(
            added, len(first), brokers, rng=rng, start_index=start, start_partition=current
        )
    if len(assignments) != added:
        raise TopicError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"increasing the number of partitions by {added} but {len(assignments)} assignments given",
        )
    planned = {current + i: list(replicas) for i, replicas in enumerate(assignments)}
    for partition, replicas in planned.items():
        if not replicas:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {partition} lists a broker twice"
            )
        unknown = set(replicas) - set(brokers)
        if unknown:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition} names unknown brokers {sorted(unknown)}",
            )
        if len(replicas) != len(first):
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition} has {len(replicas)} replicas; the others have {len(first)}",
            )
    return planned
