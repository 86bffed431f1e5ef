"""The limits a CreateTopics or CreatePartitions request is held to before anything is placed
or written, as Kafka's KIP-578 names them: `max.partitions` (partition replicas in the
cluster) and `max.broker.partitions` (partition replicas on one broker); and the size of the
topic's assignment znode, which ZooKeeper refuses past `jute.maxbuffer`.

The checks come in two steps, so that no client-supplied count makes the broker allocate in
proportion to it: before placement, on numbers only (the request's partitions times its
replication factor against the current totals); after placement, which those numbers have
bounded, broker by broker. A request that would pass a limit is refused with
POLICY_VIOLATION, naming the limit, its value and the count the request would reach.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Collection, Mapping, Sequence

from actors.admin.topic_admin import TopicError
from wire.errors import ErrorCode

# What a create or setData request carries besides the znode's data (header, path, ACL,
# version): ZooKeeper's jute.maxbuffer bounds the whole request.
ZNODE_REQUEST_OVERHEAD = 1024
# ZooKeeper's default jute.maxbuffer (0xfffff).
JUTE_MAX_BUFFER = 1048575

# `{"version":3,"partitions":{},"adding_replicas":{},"removing_replicas":{}}` as
# node/zk/data.encode_topic writes it, and the topic id it may add (22 base64 characters).
_TOPIC_ZNODE_FIXED = 73
_TOPIC_ID = len(',"topic_id":""') + 22


@dataclasses.dataclass(frozen=True)
class PartitionLimits:
    max_partitions: int
    max_broker_partitions: int
    jute_max_buffer: int = JUTE_MAX_BUFFER

    @property
    def max_topic_znode_bytes(self) -> int:
        return self.jute_max_buffer - ZNODE_REQUEST_OVERHEAD


@dataclasses.dataclass(frozen=True)
class ReplicaCounts:
    """Partition replicas the cluster holds now, in all and per broker id."""

    total: int = 0
    by_broker: Mapping[int, int] = dataclasses.field(default_factory=dict)

    def plus(self, placed: Mapping[int, Sequence[int]]) -> ReplicaCounts:
        """These counts with the `placed` replicas too (an earlier topic of the same request)."""
        by_broker = collections.Counter(self.by_broker)
        for replicas in placed.values():
            by_broker.update(replicas)
        return ReplicaCounts(self.total + sum(len(r) for r in placed.values()), dict(by_broker))


def _refused(limit: str, value: int, reached: str) -> TopicError:
    return TopicError(ErrorCode.POLICY_VIOLATION, f"{limit} is {value}: {reached}")


def check_replica_counts(
    added: int, brokers: Collection[int], counts: ReplicaCounts, limits: PartitionLimits
) -> None:
    """Before placement: can `added` new partition replicas fit on `brokers` at all?"""
    total = counts.total + added
    if total > limits.max_partitions:
        raise _refused(
            "max.partitions",
            limits.max_partitions,
            f"the cluster would hold {total} partition replicas ({counts.total} now, {added} more)",
        )
    # However they are placed, one broker ends up with at least the average.
    held = sum(counts.by_broker.get(b, 0) for b in brokers) + added
    busiest = -(-held // max(len(brokers), 1))
    if busiest > limits.max_broker_partitions:
        raise _refused(
            "max.broker.partitions",
            limits.max_broker_partitions,
            f"a broker would hold at least {busiest} partition replicas ({held} over {len(brokers)} brokers)",
        )


def check_placement(
    placed: Mapping[int, Sequence[int]], counts: ReplicaCounts, limits: PartitionLimits
) -> None:
    """After placement, before writing: each broker's replicas with the new ones."""
    added = collections.Counter(b for replicas in placed.values() for b in replicas)
    for broker, count in sorted(added.items()):
        now = counts.by_broker.get(broker, 0)
        if now + count > limits.max_broker_partitions:
            raise _refused(
                "max.broker.partitions",
                limits.max_broker_partitions,
                f"broker {broker} would hold {now + count} partition replicas ({now} now, {count} more)",
            )


def _digits_below(n: int) -> int:
    """Decimal digits of 0, 1, ..., n - 1 written out, together."""
    total, low, width = 0, 0, 1
    while low < n:
        high = min(n, 10**width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def topic_znode_bytes(partitions: int, replication_factor: int, broker_id_digits: int) -> int:
    """The size of `/brokers/topics/<T>` without a topic id: `"p":[b,b,b]` per partition,
    comma-separated, with every broker id `broker_id_digits` long. O(log partitions)."""
    per_partition = replication_factor * (broker_id_digits + 1) + 5  # quotes, colon, brackets, commas
    return _TOPIC_ZNODE_FIXED + _digits_below(partitions) + partitions * per_partition - 1


def topic_znode_bounds(partitions: int, replication_factor: int, brokers: Collection[int]) -> tuple[int, int]:
    """The least and the most `/brokers/topics/<T>` can take for any placement on `brokers`."""
    digits = [len(str(b)) for b in brokers] or [1]
    low = topic_znode_bytes(partitions, replication_factor, min(digits))
    return low, topic_znode_bytes(partitions, replication_factor, max(digits)) + _TOPIC_ID


def check_topic_znode(topic: str, size: int, limits: PartitionLimits, *, at_least: bool = False) -> None:
    if size > limits.max_topic_znode_bytes:
        raise _refused(
            "zookeeper.jute.maxbuffer",
            limits.jute_max_buffer,
            f"the assignment znode /brokers/topics/{topic} would take {'at least ' if at_least else ''}"
            f"{size} bytes, over the {limits.max_topic_znode_bytes} a znode may hold; use fewer partitions",
        )


def check_before_placement(
    topic: str,
    *,
    partitions: int,
    added_partitions: int,
    replication_factor: int,
    brokers: Collection[int],
    counts: ReplicaCounts,
    limits: PartitionLimits,
) -> bool:
    """Every check on numbers only, for a topic that will have `partitions` partitions of
    `replication_factor` replicas, `added_partitions` of them new, on `brokers` (at least
    `replication_factor` of them). True when the znode may still be too large for every
    placement but the smallest: then only the encoded assignment can tell."""
    check_replica_counts(added_partitions * replication_factor, brokers, counts, limits)
    low, high = topic_znode_bounds(partitions, replication_factor, brokers)
    check_topic_znode(topic, low, limits, at_least=True)
    return high > limits.max_topic_znode_bytes
