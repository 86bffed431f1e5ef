"""What a broker counts as it serves records: Kafka's BrokerTopicMetrics (bytes and messages in
and out, per topic) and ReplicaManager's ISR meters, as plain counts.

They are counted on the hot paths (appends, reads, fetched data, ISR changes), so each is one
int add; rates, the all-topics totals and their names are the exporter's business
(node/metrics), at scrape time.
"""

from __future__ import annotations

import collections


class BrokerStats:
    def __init__(self) -> None:
        # Per topic: what producers appended (BytesInPerSec, MessagesInPerSec) and what
        # consumers read (BytesOutPerSec); followers' reads are replication, not bytes out.
        self.bytes_in: collections.Counter[str] = collections.Counter()
        self.messages_in: collections.Counter[str] = collections.Counter()
        self.bytes_out: collections.Counter[str] = collections.Counter()
        # Per topic, each partition's produce or fetch (consumers' and followers') as Kafka
        # counts them (TotalProduceRequestsPerSec, ...), and those answered with an error.
        self.produce_requests: collections.Counter[str] = collections.Counter()
        self.failed_produce_requests: collections.Counter[str] = collections.Counter()
        self.fetch_requests: collections.Counter[str] = collections.Counter()
        self.failed_fetch_requests: collections.Counter[str] = collections.Counter()
        # Broker-wide: what this broker fetched as a follower, and served to followers.
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        # ISR changes of partitions led here, counted once the controller commits them.
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Per counter above, what the topics no longer hosted here had counted: their own
        # series go (Kafka's removeMetrics on deletion), the all-topics totals keep it.
        self.retired: collections.Counter[str] = collections.Counter()

    PER_TOPIC = (
        "bytes_in",
        "messages_in",
        "bytes_out",
        "produce_requests",
        "failed_produce_requests",
        "fetch_requests",
        "failed_fetch_requests",
    )

    def forget_topic(self, topic: str) -> None:
        """`topic`'s partitions are all gone from this broker (deleted): its series go."""
        for name in self.PER_TOPIC:
            self.retired[name] += getattr(self, name).pop(topic, 0)

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1
