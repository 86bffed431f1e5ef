"""Replication throttles, as Kafka's ReplicationQuotaManager applies them (KIP-73).

Two quotas per broker, in bytes per second, set as dynamic broker configs:
`leader.replication.throttled.rate` bounds what this broker sends to followers of throttled
replicas, `follower.replication.throttled.rate` what it fetches for its own throttled replicas.
Which replicas are throttled is a topic config: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas`, each `*` or a list of `partition:broker`; a broker
keeps the partitions that name it.

Kafka's rule: a replica is held back only when its partition is throttled, the replica is not
in the ISR, and the quota is exceeded. In-sync followers and unthrottled partitions always get
their data, so a reassignment cannot starve the replication that acks=all produces wait on.

The rate is a token bucket on the Clock port rather than Kafka's sampled rate over a window:
the bucket starts empty and holds at most `burst_s` (0.25) seconds of the rate, and a transfer may
overdraw it (the next waits until the debt is paid). Over any stretch longer than a fetch the
bytes moved are the rate times the time, without the initial burst of up to a whole window
that Kafka's sampled rate allows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from actors.admin.throttle_configs import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    parse_throttled_replicas,
)
from actors.base.clock import Clock
from actors.base.ports import TopicPartition

# Kafka's default for both rates: Long.MaxValue, i.e. unlimited.
UNLIMITED = 2**63 - 1
# How much of the rate an idle quota saves up: enough to bridge the gap between a quota
# freeing and the next fetch, small enough that a move after a pause starts near the rate.
BURST_S = 0.25


class ReplicationQuota:
    """One direction's quota: a token bucket refilled at `rate` bytes/s (None: unlimited)."""

    def __init__(self, clock: Clock, rate: int | None = None, *, burst_s: float = BURST_S) -> None:
        self._clock = clock
        self._burst_s = burst_s
        self._rate: int | None = None
        self._tokens = 0.0
        self._at = clock.monotonic()
        self.set_rate(rate)

    @property
    def rate(self) -> int | None:
        return self._rate

    def set_rate(self, rate: int | None) -> None:
        """A new rate applies from now; an unlimited one forgets any debt."""
        self._refill()
        self._rate = None if rate is None or rate >= UNLIMITED else rate
        if self._rate is None:
            self._tokens = 0.0
        else:
            self._tokens = min(self._tokens, self._rate * self._burst_s)

    def _refill(self) -> None:
        now = self._clock.monotonic()
        if self._rate is not None:
            self._tokens = min(self._tokens + (now - self._at) * self._rate, self._rate * self._burst_s)
        self._at = now

    def exceeded(self) -> bool:
        """Kafka's isQuotaExceeded: the bytes already moved are ahead of the rate."""
        if self._rate is None:
            return False
        self._refill()
        return self._tokens < 0

    def record(self, size: int) -> None:
        """Bytes moved for throttled replicas (Kafka records them after the transfer)."""
        if self._rate is None or size <= 0:
            return
        self._refill()
        self._tokens -= size

    def wait_s(self) -> float:
        """Seconds until the quota is no longer exceeded (0 if it is not)."""
        if self._rate is None:
            return 0.0
        self._refill()
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._rate if self._rate > 0 else float("inf")


@dataclasses.dataclass(frozen=True)
class ThrottledPartitions:
    """The partitions of one topic throttled on this broker: all of them, or some."""

    all: bool = False
    partitions: frozenset[int] = frozenset()

    def __contains__(self, partition: object) -> bool:
        return self.all or partition in self.partitions

    def __bool__(self) -> bool:
        return self.all or bool(self.partitions)


def throttled_on(value: str | None, broker_id: int) -> ThrottledPartitions:
    """What a throttled-replicas value means on `broker_id`; an unreadable value throttles
    nothing (it was validated when it was written)."""
    if not value:
        return ThrottledPartitions()
    try:
        pairs = parse_throttled_replicas(value)
    except ValueError:
        return ThrottledPartitions()
    if pairs is None:
        return ThrottledPartitions(all=True)
    return ThrottledPartitions(partitions=frozenset(p for p, b in pairs if b == broker_id))


class ReplicationThrottle:
    """This broker's two quotas and which of its partitions they apply to."""

    def __init__(self, broker_id: int, clock: Clock, *, burst_s: float = BURST_S) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota(clock, burst_s=burst_s)
        self.follower = ReplicationQuota(clock, burst_s=burst_s)
        self._leader_throttled: dict[str, ThrottledPartitions] = {}
        self._follower_throttled: dict[str, ThrottledPartitions] = {}

    def set_rates(self, leader: int | None, follower: int | None) -> None:
        self.leader.set_rate(leader)
        self.follower.set_rate(follower)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """A topic's configs, as in `/config/topics/<T>` (the throttled-replicas keys matter)."""
        for key, table in (
            (LEADER_REPLICAS, self._leader_throttled),
            (FOLLOWER_REPLICAS, self._follower_throttled),
        ):
            throttled = throttled_on(config.get(key), self.broker_id)
            if throttled:
                table[topic] = throttled
            else:
                table.pop(topic, None)

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """Kafka's leader quota isThrottled(tp)."""
        found = self._leader_throttled.get(tp.topic)
        return found is not None and tp.partition in found

    def follower_throttled(self, tp: TopicPartition) -> bool:
        found = self._follower_throttled.get(tp.topic)
        return found is not None and tp.partition in found

    def leader_holds(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle: an out-of-sync follower of a throttled partition gets
        no records while the leader quota is exceeded."""
        return not in_sync and self.leader_throttled(tp) and self.leader.exceeded()

    def follower_holds(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldFollowerThrottle: the follower leaves such a partition out of its fetch."""
        return not in_sync and self.follower_throttled(tp) and self.follower.exceeded()

    @property
    def throttled_topics(self) -> set[str]:
        return set(self._leader_throttled) | set(self._follower_throttled)

    @property
    def follows_throttled(self) -> bool:
        """Whether any topic throttles replicas on this broker's follower side."""
        return bool(self._follower_throttled)
