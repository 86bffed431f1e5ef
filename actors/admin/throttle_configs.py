"""The replication throttles' configs (KIP-73), as Kafka names and checks them: two dynamic
broker configs, the rates in bytes per second, and two topic configs, the throttled replicas
(`*` or a list of `partition:broker`). The admin paths check them when they are written; the
replica manager's quotas (actors/replica/replication_quota.py) read them."""

from __future__ import annotations

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
WILDCARD = "*"


def parse_throttled_replicas(value: str) -> list[tuple[int, int]] | None:
    """`*` → None (every replica); else the (partition, broker) pairs of `0:101,1:102`.
    Raises ValueError naming what is wrong (Kafka's ThrottledReplicaListValidator)."""
    text = value.strip()
    if text == WILDCARD:
        return None
    pairs: list[tuple[int, int]] = []
    if not text:
        return pairs
    for item in text.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"{item.strip()!r} is not partition:broker (or the whole value *)")
        pairs.append((int(partition), int(broker)))
    return pairs


def parse_rate(value: str) -> int:
    """A throttle rate in bytes/s: a non-negative integer. Raises ValueError."""
    try:
        rate = int(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number of bytes per second") from None
    if rate < 0:
        raise ValueError(f"{rate} is negative")
    return rate
