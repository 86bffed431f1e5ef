"""A partition's log settings: the broker's defaults (`log.*`) overridden per topic."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

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
    # Log compaction (node/broker/log/cleaner.py): `delete`, `compact` or both.
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (`delete`, alone or with `compact`)."""
        return "delete" in self.cleanup_policy.split(",")

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
        "delete.retention.ms": "delete_retention_ms",
        "min.compaction.lag.ms": "min_compaction_lag_ms",
    }

    def with_topic_configs(self, configs: Mapping[str, str]) -> LogConfig:
        """These settings with a topic's overrides. The values were validated when the topic
        was created; one that does not parse keeps the broker's default."""
        changes: dict[str, Any] = {}  # field name → value, of its field's type
        for key, field in self.TOPIC_KEYS.items():
            if key in configs:
                try:
                    changes[field] = int(configs[key])
                except ValueError:
                    continue
        policy = configs.get("cleanup.policy")
        if policy is not None and set(policy.split(",")) <= {"delete", "compact", ""}:
            changes["cleanup_policy"] = policy
        if "min.cleanable.dirty.ratio" in configs:
            with contextlib.suppress(ValueError):
                changes["min_cleanable_dirty_ratio"] = float(configs["min.cleanable.dirty.ratio"])
        if "segment_bytes" in changes:
            # A topic created before the floor keeps a size it can no longer be given.
            changes["segment_bytes"] = max(int(configs["segment.bytes"]), SEGMENT_BYTES_MIN)
        if "compression.type" in configs:
            changes["compression_type"] = configs["compression.type"]
        return dataclasses.replace(self, **changes)
