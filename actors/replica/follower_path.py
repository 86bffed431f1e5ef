"""The follower's side of the replicated log (Kafka's fetcher thread, run on the replica
manager): what to fetch from each leader, appending what comes back, and truncating by leader
epoch after a leader change."""

from __future__ import annotations

import itertools
import logging
import math

from actors.replica.partition import Partition, Role, TopicPartition
from actors.replica.replica_state import ReplicaState
from actors.replica.replication import FetchPlan
from wire.api import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from wire.errors import ErrorCode, KafkaStorageError, WireError

log = logging.getLogger(__name__)

# A follower may start fetching tens of thousands of partitions at once: built without the
# dataclass constructor, in FetchPartition's field order.
make_fetch_partition = FetchPartition.make


class FollowerPath:
    """The follower's part of the replica manager, over the state it shares with the leader's."""

    def __init__(self, state: ReplicaState) -> None:
        self.state = state

    # --- the follower side: what to fetch, and what came back (Kafka's fetcher thread) ---

    def _fetch_state(self, tp: TopicPartition) -> tuple[int, int]:
        partition = self.state.partitions[tp]
        return partition.log_end_offset, partition.leader_epoch

    def plan_fetch(self, source: int) -> FetchPlan | None:
        """The next request to the leader `source`: epoch end offsets for partitions that must
        truncate first, else a fetch in the session with it. None when nothing follows it
        (the fetcher stops)."""
        state = self.state.fetch_targets.get(source)
        if state is None or not state.followed:
            self.state.fetch_targets.drop(source)
            return None
        if state.truncating and not state.truncation_failed:
            truncating = [self.state.partitions[tp] for tp in sorted(state.truncating)]
            by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
            for p in truncating:
                by_topic.setdefault(p.tp.topic, []).append(
                    OffsetForLeaderPartition(
                        partition=p.tp.partition,
                        current_leader_epoch=p.leader_epoch,
                        leader_epoch=self.state.log_of(p).latest_epoch,
                    )
                )
            epoch_request = OffsetsForLeaderEpochRequest(
                replica_id=self.state.broker_id,
                topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
            epochs = {p.tp: p.leader_epoch for p in truncating}
            return FetchPlan(state.endpoint, epochs, epoch_request=epoch_request)
        session = state.session
        # After epoch end offsets that failed for some partitions (a stale leader, a replica
        # the controller has since moved), fetch the others before asking again: one
        # partition stuck in truncation must not starve every other partition on this
        # leader (Kafka delays only the partitions in error). Those still truncating leave
        # the session meanwhile, as throttled ones do, and come back once truncated.
        state.truncation_failed = False
        throttled = self._held_by_follower_quota(state.followed)
        held = throttled | state.truncating
        released, state.held = state.held - held, held
        for tp in held:
            session.waiting.discard(tp)  # back with the released once the hold ends
        if session.needs_full_fetch:
            # What was in the session joins the new one, with what changed since, not every
            # partition followed: against a leader that is down, each retry is a full fetch,
            # and a pass over the hundreds of thousands it led cost a second per retry.
            opening = session.split_additions(
                tp
                for tp in itertools.chain(session.sent, state.updates, released)
                if tp in state.followed and tp not in held
            )
            session_id, session_epoch, changed = session.build_full(
                {tp: self._fetch_state(tp) for tp in opening}
            )
            forgotten: dict[str, list[int]] = {}
        else:
            # A held partition leaves the session (else the leader would still answer it)
            # and comes back as new once the quota frees, as in Kafka's fetch sessions.
            sent = session.split_additions(tp for tp in state.updates | released if tp not in held)
            session_id, session_epoch, changed, forgotten = session.build_incremental(
                {tp: self._fetch_state(tp) for tp in sent},
                state.removed | (held & session.sent.keys()),
            )
        state.updates.clear()
        state.removed.clear()
        wait_ms = self.state.config.fetch_wait_max_ms
        if session.waiting:
            wait_ms = 0  # more partitions to add: the leader answers at once, not at the poll's end
        if throttled:
            # (A zero rate waits forever: the long poll's own limit still applies.)
            wait_s = min(wait_ms / 1000, self.state.throttle.follower.wait_s())
            wait_ms = max(1, math.ceil(wait_s * 1000))
        fetches: dict[str, list[FetchPartition]] = {}
        for tp in changed:
            offset, epoch = session.sent[tp]
            fetches.setdefault(tp.topic, []).append(
                make_fetch_partition(tp.partition, offset, epoch, self.state.config.fetch_max_bytes)
            )
        request = FetchRequest(
            replica_id=self.state.broker_id,
            replica_epoch=self.state.broker_epoch,
            max_wait_ms=wait_ms,
            min_bytes=self.state.config.fetch_min_bytes,
            max_bytes=self.state.config.fetch_response_max_bytes,
            session_id=session_id,
            session_epoch=session_epoch,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in fetches.items()],
            forgotten_topics_data=session.forgotten_topics(forgotten),
        )
        return FetchPlan(state.endpoint, {}, fetch_request=request)

    def _held_by_follower_quota(self, followed: set[TopicPartition]) -> set[TopicPartition]:
        """Kafka's shouldFollowerThrottle over the partitions followed on one leader."""
        throttle = self.state.throttle
        if not throttle.follows_throttled or not throttle.follower.exceeded():
            return set()
        return {
            tp
            for tp in followed
            if throttle.follower_throttled(tp) and self.state.broker_id not in self.state.partitions[tp].isr
        }

    def _still_following(self, tp: TopicPartition, source: int, leader_epoch: int | None) -> Partition | None:
        """The partition, if it still follows `source` at the leader epoch an answer is for."""
        partition = self.state.partitions.get(tp)
        if (
            partition is None
            or partition.stopped
            or partition.role is not Role.FOLLOWER
            or partition.leader != source
            or leader_epoch != partition.leader_epoch
        ):
            return None
        return partition

    def process_fetched(self, source: int, plan: FetchPlan, response: FetchResponse) -> bool:
        """Append what the leader sent; returns whether the fetcher should back off: a
        top-level error, or only failures."""
        state = self.state.fetch_targets.get(source)
        if state is None:
            return False
        session = state.session
        # What this answer is for: `answered` may reset the session, which replaces the map.
        sent = session.sent
        session.answered(response.error_code, response.session_id)
        if response.error_code in (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ):
            return False  # the next fetch opens a new session at once
        failures = successes = 0
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                partition = self._still_following(tp, source, sent.get(tp, (-1, None))[1])
                if partition is None:
                    continue
                try:
                    failed = self._apply_fetched(partition, data)
                except KafkaStorageError as e:
                    # The log directory failed; its handler takes the replica offline.
                    log.warning("cannot apply fetched data for %s: %s", tp, e.message)
                    failed = True
                if failed:
                    failures += 1
                else:
                    successes += 1
        return response.error_code != ErrorCode.NONE or (failures > 0 and successes == 0)

    def _apply_fetched(self, partition: Partition, data: FetchPartitionData) -> bool:
        if data.error_code not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            log.debug(
                "fetch of %s from %d failed: %s",
                partition.tp,
                partition.leader,
                ErrorCode(data.error_code).name,
            )
            return True
        if data.error_code == ErrorCode.NONE and not data.records and partition.log is None:
            return False  # nothing on either side yet: no log to create
        partition_log = self.state.log_of(partition)
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if partition_log.log_end_offset < data.log_start_offset:
                partition_log.truncate_fully_and_start_at(data.log_start_offset)
                partition.high_watermark = data.log_start_offset
                self.state.fetch_targets.moved(partition.leader, partition.tp)
            else:
                partition.needs_truncation = True
                self.state.fetch_targets.must_truncate(partition.leader, partition.tp)
            return False
        if data.records:
            try:
                partition_log.append_as_follower(data.records)
            except WireError as e:
                # A stale answer (the log moved since the request was built) or a corrupt one:
                # nothing was appended; the next fetch starts from the log end again.
                log.warning("dropping fetched data for %s: %s", partition.tp, e.message)
                return True
            if self.state.throttle.follower_throttled(partition.tp):
                self.state.throttle.follower.record(len(data.records))
            self.state.stats.replication_bytes_in += len(data.records)
            self.state.fetch_targets.moved(partition.leader, partition.tp)
        partition.high_watermark = min(data.high_watermark, partition_log.log_end_offset)
        if data.log_start_offset > partition_log.log_start_offset:
            # The leader's records below its start were deleted (DeleteRecords, retention):
            # so are this replica's, up to what it holds (Kafka's maybeIncrementLogStartOffset).
            partition_log.advance_log_start_offset(min(data.log_start_offset, partition.high_watermark))
        self.state.wake_readers(partition.tp)
        return False

    def truncate_to_epoch_ends(
        self, source: int, plan: FetchPlan, response: OffsetsForLeaderEpochResponse
    ) -> bool:
        """Truncate each follower log to where it agrees with the leader's (Kafka's
        truncation by leader epoch, KIP-101/279); returns whether anything failed."""
        failed = response.error_code != ErrorCode.NONE
        for topic in response.topics:
            for item in topic.partitions:
                tp = TopicPartition(topic.topic, item.partition)
                partition = self._still_following(tp, source, plan.leader_epochs.get(tp))
                if partition is None or not partition.needs_truncation:
                    continue
                if item.error_code != ErrorCode.NONE:
                    failed = True
                    continue
                try:
                    self._truncate_to_epoch_end(partition, source, item.leader_epoch, item.end_offset)
                except KafkaStorageError as e:
                    log.warning("cannot truncate %s: %s", tp, e.message)
                    failed = True
        self.state.fetch_targets.truncation_answered(source, failed=failed)
        return failed

    def _truncate_to_epoch_end(self, partition: Partition, source: int, epoch: int, end_offset: int) -> None:
        """Kafka's getOffsetTruncationState: the leader answered `epoch`, the largest of its
        epochs not after the one asked, and where it ends in its log."""
        partition_log = self.state.log_of(partition)
        complete = True
        if epoch < 0 or end_offset < 0:
            offset = partition.high_watermark
        else:
            own_epoch, own_end = partition_log.end_offset_for_epoch(epoch)
            if own_end < 0:
                offset = min(end_offset, partition_log.log_end_offset)
            elif own_epoch != epoch:
                # This log never had the leader's epoch (KIP-279): where the leader's epoch
                # ends says nothing about where the logs part, which may be lower, inside an
                # epoch both had. Cut back to the end of this log's largest epoch before the
                # leader's, then ask again with that epoch.
                offset = min(own_end, partition_log.log_end_offset)
                complete = False
            else:
                offset = min(end_offset, own_end, partition_log.log_end_offset)
        if not complete:
            log.info(
                "%s: leader %d answered epoch %d, which this log never had: truncating to offset %d "
                "and asking again",
                partition.tp,
                source,
                epoch,
                offset,
            )
        elif offset < partition_log.log_end_offset:
            log.info(
                "%s: truncating to offset %d, where the log agrees with leader %d at epoch %d",
                partition.tp,
                offset,
                source,
                epoch,
            )
        # Even at the log end: there may be an entry of this log's own latest epoch there (it
        # led and wrote nothing in it), which must go so that the next question asks an
        # earlier epoch (`PartitionLog.truncate_to`).
        partition_log.truncate_to(offset)
        partition.high_watermark = min(partition.high_watermark, partition_log.log_end_offset)
        if complete:
            partition.needs_truncation = False
            self.state.fetch_targets.truncated(source, partition.tp)

    def refetch_from(self, partition: Partition, offset: int) -> None:
        """A damaged batch at `offset` in this follower's log: cut it and everything after it
        off, and fetch them again from the leader."""
        partition_log = self.state.log_of(partition)
        log.warning(
            "%s: truncating to offset %d, before a damaged batch, to fetch it again from leader %d",
            partition.tp,
            offset,
            partition.leader,
        )
        partition_log.truncate_to(offset)
        partition.high_watermark = min(partition.high_watermark, partition_log.log_end_offset)
        self.state.fetch_targets.moved(partition.leader, partition.tp)
