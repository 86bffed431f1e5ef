"""What the replica manager holds, and the steps its leader and follower parts share: a
partition's log (created on first use), who leads, the high watermark and who waits on it.
One object, handed to both parts when the replica manager is made."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterable

from actors.base.clock import Clock, SystemClock
from actors.base.loop_slices import sliced
from actors.base.ports import LogStore, PartitionLog
from actors.replica.broker_stats import BrokerStats
from actors.replica.fetch_session import FetchSessionCache
from actors.replica.fetch_targets import FetchTargets
from actors.replica.metadata_cache import MetadataCache
from actors.replica.partition import Partition, Role, TopicPartition
from actors.replica.replica_messages import Snapshot
from actors.replica.replication import ReplicationConfig
from actors.replica.replication_quota import ReplicationThrottle
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


class ReplicaState:
    def __init__(
        self,
        broker_id: int,
        logs: LogStore,
        *,
        config: ReplicationConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.config = config or ReplicationConfig()
        self.clock = clock or SystemClock()
        self.controller_epoch = 0
        # This broker's own epoch (its registration's), as the controller's requests last
        # told it: the fetches it sends as a follower carry it (KIP-903).
        self.broker_epoch = -1
        self.partitions: dict[TopicPartition, Partition] = {}
        # Replicas whose log is unusable (Kafka's HostedPartition.Offline): in a failed log
        # directory, or a leader's log with a damaged batch. They answer KAFKA_STORAGE_ERROR
        # until the broker restarts.
        self.offline: set[TopicPartition] = set()
        self.metadata = MetadataCache()
        self.topic_configs: dict[str, dict[str, str]] = {}
        # acks=all produces waiting for the high watermark: (required offset, future).
        self._produce_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        # Long-poll fetches waiting for any change to one of their partitions.
        self._read_waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        self.fetch_sessions = FetchSessionCache()
        # What this broker fetches as a follower, per leader.
        self.fetch_targets = FetchTargets()
        # Replication throttles (dynamic configs): the leader's and the follower's quotas.
        self.throttle = ReplicationThrottle(broker_id, self.clock)
        # Bytes and messages in and out, ISR changes: counted here, read by the exporter.
        self.stats = BrokerStats()

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.controller_epoch,
            {tp: copy.copy(p) for tp, p in self.partitions.items()},
            self.metadata.copy(),
        )

    def now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    def log_of(self, partition: Partition) -> PartitionLog:
        if partition.log is None:
            partition.log = self.logs.get_or_create(
                partition.tp, self.topic_configs.get(partition.tp.topic, {})
            )
            partition.high_watermark = min(partition.high_watermark, partition.log.log_end_offset)
            if partition.role is Role.LEADER:
                self.start_leader_epoch(partition, partition.log)
        return partition.log

    def start_leader_epoch(self, partition: Partition, partition_log: PartitionLog) -> None:
        """This broker leads `partition` at a new epoch from `partition_log`'s end: that is
        the epoch's start offset, and it goes into the log's leader-epoch cache at once, before
        any batch of the epoch, as Kafka's makeLeader puts it. A follower may hold batches of
        an epoch later than any in this log (after an unclean election); asked where that
        epoch ends, the leader answers where its own epoch starts, rather than "unknown",
        which would leave the follower truncating only to its high watermark and keeping a
        batch this log does not have below it."""
        partition.leader_epoch_start_offset = partition_log.log_end_offset
        partition_log.assign_epoch_start_offset(partition.leader_epoch, partition.leader_epoch_start_offset)

    def leader_partition(self, tp: TopicPartition) -> tuple[Partition | None, ErrorCode]:
        if self.offline and tp in self.offline:
            return None, ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get(tp)
        if partition is None or partition.stopped:
            known = self.metadata.knows(tp)
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition.role is not Role.LEADER:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    @staticmethod
    def enough_replicas_reached(partition: Partition, required: int) -> ErrorCode | None:
        """None while the high watermark is below `required` (Kafka's checkEnoughReplicasReachOffset)."""
        if partition.high_watermark < required:
            return None
        assert partition.log is not None
        if len(partition.maximal_isr) < partition.log.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def wait_for_high_watermark(self, tp: TopicPartition, required: int) -> asyncio.Future[ErrorCode]:
        """An acks=all produce's wait: answered once the high watermark reaches `required`,
        or failed when this broker stops leading the partition."""
        waiter: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._produce_waiters.setdefault(tp, []).append((required, waiter))
        return waiter

    def wait_for_change(self, tps: Iterable[TopicPartition]) -> asyncio.Future[None]:
        """A long-poll fetch's wait: answered when any of `tps` changes."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in tps:
            self._read_waiters.setdefault(tp, []).append(waiter)
        return waiter

    def advance_high_watermark(self, partition: Partition) -> None:
        if partition.maybe_advance_high_watermark():
            self.complete_produce_waiters(partition)
            self.wake_readers(partition.tp)

    def complete_produce_waiters(self, partition: Partition) -> None:
        waiters = self._produce_waiters.get(partition.tp)
        if not waiters:
            return
        remaining = []
        for required, waiter in waiters:
            code = self.enough_replicas_reached(partition, required)
            if waiter.done():
                continue
            if code is None:
                remaining.append((required, waiter))
            else:
                waiter.set_result(code)
        self._produce_waiters[partition.tp] = remaining

    def fail_produce_waiters(self, tp: TopicPartition, code: ErrorCode) -> None:
        if not self._produce_waiters:
            return
        for _, waiter in self._produce_waiters.pop(tp, []):
            if not waiter.done():
                waiter.set_result(code)

    def wake_readers(self, tp: TopicPartition) -> None:
        if self.fetch_sessions:
            self.fetch_sessions.mark_dirty(tp)
        if not self._read_waiters:
            return
        for waiter in self._read_waiters.pop(tp, []):
            if not waiter.done():
                waiter.set_result(None)

    def take_offline(self, tps: Iterable[TopicPartition], why: str) -> bool:
        """Stop these replicas for good (until a restart): no more fetching, waiters failed
        with KAFKA_STORAGE_ERROR. Whether any was not offline already."""
        newly = [tp for tp in tps if tp not in self.offline]
        for tp in newly:
            self.offline.add(tp)
            partition = self.partitions.get(tp)
            if partition is not None:
                partition.stopped = True
                if partition.role is Role.FOLLOWER:
                    self.fetch_targets.unfollow(partition.leader, tp)
            self.fail_produce_waiters(tp, ErrorCode.KAFKA_STORAGE_ERROR)
            self.wake_readers(tp)
        if newly:
            log.error("%d replica(s) offline (%s): %s", len(newly), why, ", ".join(map(str, newly[:10])))
        return bool(newly)

    async def checkpoint_high_watermarks(self) -> None:
        """Hand the log store the high watermarks that moved since the last checkpoint: at 1M
        partitions, building every pair every 5 s took a tenth of a core."""
        moved = {}
        partitions, checkpointed = self.partitions, self.logs.checkpointed_high_watermark
        # Over a copy of the keys, not of the items: 200k new pairs would each be tracked by
        # the garbage collector, and collected for (node/broker/gc_tuning.py).
        async for keys in sliced(list(partitions)):
            for tp in keys:
                p = partitions.get(tp)
                if (
                    p is not None
                    and p.log is not None
                    and p.high_watermark != checkpointed(tp)
                    and tp not in self.offline
                ):
                    moved[tp] = p.high_watermark
        await self.logs.checkpoint_high_watermarks(moved)


def epoch_error(requested: int, current: int) -> ErrorCode | None:
    """A client's or follower's view of the leader epoch against this leader's (-1: unchecked)."""
    if requested < 0 or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH
