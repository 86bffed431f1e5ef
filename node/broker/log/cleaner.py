"""The log cleaner (Kafka's LogCleaner and LogCleanerManager): one task per broker that
compacts the logs whose cleanup.policy includes `compact`.

Every `log.cleaner.backoff.ms` it looks at each such log's cleanable part (the closed
segments below the high watermark: `Log.cleanable_segments`) and cleans, filthiest first,
every log whose dirty ratio, the bytes written since its last clean over the cleanable
bytes, reaches `min.cleanable.dirty.ratio`, or whose tombstones' delete horizon has passed.
The rewrite runs on a worker thread (node/broker/log/compaction.py); the swap of the
cleaned segments runs on the event loop, in one step, so a read or an append sees the log
before or after it, never in between (`Log.replace_segments`).

A clean that fails (a damaged batch, an exception) marks that partition uncleanable, as
Kafka's cleaner does, with one line in the log: it is not cleaned again until the broker
restarts (or the partition's log is deleted), and every other log goes on being cleaned.
A segment deleted or truncated while its clean ran only discards that clean.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from actors.base.loop_slices import each
from actors.base.ports import TopicPartition
from node.broker.log import compaction
from node.broker.log.log import Log
from node.broker.log.manager import LogManager
from wire.errors import KafkaStorageError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class CleanerStats:
    """What Kafka's LogCleaner reports (kafka.log:type=LogCleaner and LogCleanerManager)."""

    cleans: int = 0
    last_clean_time_s: float = 0.0
    max_clean_time_s: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    max_dirty_percent: float = 0.0


def dirty_ratio(partition_log: Log, high_watermark: int, now_ms: int) -> tuple[float, int]:
    """(dirty bytes / cleanable bytes, cleanable bytes) of the log's cleanable part."""
    segments = partition_log.cleanable_segments(high_watermark, now_ms)
    total = sum(s.size for s in segments)
    if not total:
        return 0.0, 0
    following = [s.base_offset for s in segments[1:]] + [segments[-1].next_offset]
    dirty = sum(
        s.size for s, end in zip(segments, following, strict=True) if end > partition_log.clean_offset
    )
    return dirty / total, total


def wants_cleaning(partition_log: Log, high_watermark: int, now_ms: int) -> float | None:
    """The dirty ratio of a compacted log worth cleaning now; None otherwise."""
    if not partition_log.config.compact or partition_log.offline:
        return None
    ratio, total = dirty_ratio(partition_log, high_watermark, now_ms)
    if not total:
        return None
    horizon = partition_log.next_delete_horizon_ms
    if ratio >= partition_log.config.min_cleanable_dirty_ratio and ratio > 0:
        return ratio
    if horizon is not None and now_ms >= horizon:
        return ratio
    return None


def plan_clean(partition_log: Log, high_watermark: int, now_ms: int) -> compaction.CleanPlan | None:
    """What one clean of the log rewrites (on the event loop: it reads the log's state)."""
    segments = partition_log.cleanable_segments(high_watermark, now_ms)
    if not segments:
        return None
    sources = [compaction.SourceSegment(s.path, s.base_offset, s.size) for s in segments]
    end = partition_log.segments[len(segments)].base_offset
    producers = partition_log.producer_state()
    return compaction.CleanPlan(
        directory=partition_log.directory,
        groups=compaction.group_segments(sources, partition_log.config.roll_bytes),
        dirty_from=max(partition_log.clean_offset, partition_log.log_start_offset),
        dirty_to=end,
        now_ms=now_ms,
        delete_retention_ms=partition_log.config.delete_retention_ms,
        producer_last_offsets=frozenset(producers.last_offsets()),
        index_interval_bytes=partition_log.config.index_interval_bytes,
    )


class LogCleaner:
    def __init__(
        self,
        logs: LogManager,
        *,
        wall_ms: Callable[[], int],
        run: Callable[
            [Callable[[], compaction.CleanResult]], Awaitable[compaction.CleanResult]
        ] = asyncio.to_thread,
    ) -> None:
        """`run` runs a clean off the event loop: on a worker thread, unless told otherwise."""
        self._logs = logs
        self._wall_ms = wall_ms
        self._run = run
        self.uncleanable: set[TopicPartition] = set()
        self.stats = CleanerStats()

    def gauges(self) -> dict[tuple[str, str], float]:
        """Kafka's kafka.log gauges of the cleaner, by MBean type and name (node/metrics)."""
        stats = self.stats
        recopy = 100 * stats.bytes_written / stats.bytes_read if stats.bytes_read else 0.0
        return {
            ("LogCleaner", "max-clean-time-secs"): stats.max_clean_time_s,
            ("LogCleaner", "cleaner-recopy-percent"): recopy,
            ("LogCleanerManager", "max-dirty-percent"): stats.max_dirty_percent,
            ("LogCleanerManager", "uncleanable-partitions-count"): len(self.uncleanable),
        }

    async def clean_due(self) -> int:
        """Clean every compacted log worth it, filthiest first; how many were cleaned."""
        now_ms = self._wall_ms()
        if self.uncleanable:
            # A partition deleted since is forgotten: its next log starts afresh.
            self.uncleanable = {tp for tp in self.uncleanable if tp in self._logs.logs}
        due = []
        async for tp in each(list(self._logs.logs)):
            partition_log = self._logs.get(tp)
            if partition_log is None or tp in self.uncleanable:
                continue
            ratio = wants_cleaning(partition_log, self._logs.checkpointed_high_watermark(tp), now_ms)
            if ratio is not None:
                due.append((ratio, tp))
        due.sort(key=lambda item: item[0], reverse=True)
        if due:
            self.stats.max_dirty_percent = 100 * due[0][0]
        cleaned = 0
        for _, tp in due:
            if await self.clean(tp):
                cleaned += 1
        return cleaned

    async def clean(self, tp: TopicPartition) -> bool:
        """One clean of the partition's log; whether it was swapped in."""
        partition_log = self._logs.get(tp)
        if partition_log is None or tp in self.uncleanable:
            return False
        started = time.monotonic()
        now_ms = self._wall_ms()
        try:
            plan = plan_clean(partition_log, self._logs.checkpointed_high_watermark(tp), now_ms)
            if plan is None:
                return False
            result = await self._run(lambda: compaction.clean(plan))
        except FileNotFoundError as e:
            # Retention or a deletion took a segment (or the log) while it was read.
            log.debug("%s: a clean was overtaken by a change to the log: %s", tp, e)
            return False
        except KafkaStorageError:
            return False  # the log directory is offline: reported to the failure channel
        except Exception as e:  # the one line Kafka's cleaner logs for an uncleanable partition
            self.uncleanable.add(tp)
            log.error("%s: marked uncleanable, the log cleaner failed on it: %r", tp, e)
            return False
        return self._swap(tp, partition_log, plan, result, started)

    def _swap(
        self,
        tp: TopicPartition,
        partition_log: Log,
        plan: compaction.CleanPlan,
        result: compaction.CleanResult,
        started: float,
    ) -> bool:
        if self._logs.get(tp) is not partition_log:
            compaction.discard(result)
            return False
        swapped = 0
        for group in result.groups:
            try:
                ok = partition_log.replace_segments(group)
            except KafkaStorageError:
                ok = False
            if not ok:
                break
            swapped += 1
        compaction.discard(dataclasses.replace(result, groups=result.groups[swapped:]))
        if swapped < len(result.groups):
            log.info("%s: a clean was overtaken by a change to the log; it goes again later", tp)
            return False
        partition_log.clean_offset = plan.dirty_to
        self._logs.compacted = True
        partition_log.next_delete_horizon_ms = result.next_horizon_ms
        elapsed = time.monotonic() - started
        self.stats.cleans += 1
        self.stats.last_clean_time_s = elapsed
        self.stats.max_clean_time_s = max(self.stats.max_clean_time_s, elapsed)
        self.stats.bytes_read += result.bytes_read
        self.stats.bytes_written += result.bytes_written
        log.info(
            "%s: cleaned offsets %d to %d in %.2f s: %d bytes to %d, %d records kept, %d removed",
            tp,
            partition_log.log_start_offset,
            plan.dirty_to,
            elapsed,
            result.bytes_read,
            result.bytes_written,
            result.records_kept,
            result.records_removed,
        )
        return True
