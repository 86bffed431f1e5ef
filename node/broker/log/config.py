"""A partition's log settings: the broker's defaults (`log.*`) overridden per topic."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

_LONG_MAX = 2**63 - 1
# The smallest `segment.bytes` (KIP-1030): a topic creator's 14-byte segments would be a file
# pair per batch, and the descriptors to match.
SEGMENT_BYTES_MIN = 1 << 20


@dataclasses.dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    max_message_bytes: int = 1048588
    min_insync_replicas: int = 1
    # When above 0, the size every segment rolls at, whatever `segment.bytes` says: the
    # broker's `log.internal.segment.bytes`, for tests that need small segments (Kafka's
    # internal.segment.bytes), out of topic creators' reach.
    internal_segment_bytes: int = 0
    # Kafka's compression.type: "producer" keeps each batch as sent; a codec (or
    # "uncompressed") has the leader recompress the batches that differ.
    compression_type: str = "producer"

    @property
    def roll_bytes(self) -> int:
        return self.internal_segment_bytes or self.segment_bytes

    # Topic config name → field.
    TOPIC_KEYS: ClassVar[dict[str, str]] = {
        "segment.bytes": "segment_bytes",
        "retention.ms": "retention_ms",
        "retention.bytes": "retention_bytes",
        "flush.messages": "flush_messages",
        "flush.ms": "flush_ms",
        "max.message.bytes": "max_message_bytes",
        "min.insync.replicas": "min_insync_replicas",
    }

    def with_topic_configs(self, configs: Mapping[str, str]) -> LogConfig:
        """These settings with a topic's overrides. The values were validated when the topic
        was created; one that does not parse keeps the broker's default."""
        changes: dict[str, int] = {}
        for key, field in self.TOPIC_KEYS.items():
            if key in configs:
                try:
                    changes[field] = int(configs[key])
                except ValueError:
                    continue
        if "segment_bytes" in changes:
            # A topic created before the floor keeps a size it can no longer be given.
            changes["segment_bytes"] = max(changes["segment_bytes"], SEGMENT_BYTES_MIN)
        compression_type = configs.get("compression.type", self.compression_type)
        return dataclasses.replace(self, **changes, compression_type=compression_type)
