"""The leader's side of the replicated log (spec §9.5): appends, reads for consumers and
followers (with fetch sessions), ListOffsets and OffsetsForLeaderEpoch, and the ISR changes it
proposes to the controller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from actors.base.ports import LogCorruption
from actors.replica.fetch_session import FULL_EPOCH, FetchSession
from actors.replica.partition import Partition, PendingIsr, Role, TopicPartition
from actors.replica.replica_state import ReplicaState, epoch_error
from actors.replica.replication import ProduceOutcome, ReadOutcome, ReplicationEffects
from wire.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterPartitionResult,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    OffsetForLeaderTopicResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
)
from wire.api.delete_records import HIGH_WATERMARK
from wire.api.list_offsets import MAX_TIMESTAMP
from wire.errors import ErrorCode, KafkaStorageError, OffsetOutOfRange, WireError
from wire.refusals import RefusalLog

log = logging.getLogger(__name__)
# A client sending bad batches over and over is a few lines, not one per batch.
_refusals = RefusalLog(log)

# acks=-1 (every in-sync replica), 1 (the leader), 0 (no answer awaited).
VALID_ACKS = (-1, 0, 1)

# One per partition of a fetch, and a new follower fetches thousands: built without the
# dataclass constructor, in FetchPartitionData's field order.
make_fetch_answer = FetchPartitionData.make

# Answers to an ISR change that leave it pending until the next LeaderAndIsr (spec §9.5).
# Not NOT_CONTROLLER: the AlterPartition manager sends that change again, to the controller
# that replaced the one that answered, which sends no LeaderAndIsr for it.
_WAIT_FOR_LEADER_AND_ISR = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.INVALID_REQUEST,
}


class LeaderPath:
    """The leader's part of the replica manager, over the state it shares with the follower's."""

    def __init__(self, state: ReplicaState, effects: ReplicationEffects) -> None:
        self.state = state
        self._effects = effects
        # Set by a read when the leader quota held a throttled partition back.
        self._held_back = False

    # --- Produce: appends on the leader ---

    def append_records(self, request: ProduceRequest) -> ProduceOutcome:
        outcome = ProduceOutcome()
        stats = self.state.stats
        for topic in request.topic_data:
            for data in topic.partition_data:
                tp = TopicPartition(topic.name, data.index)
                if request.acks not in VALID_ACKS:  # Kafka's answer: nothing is appended
                    answer = ProducePartitionResponse(
                        index=tp.partition,
                        error_code=ErrorCode.INVALID_REQUIRED_ACKS,
                        error_message=f"acks must be -1, 0 or 1, not {request.acks}",
                    )
                    outcome.add(tp, answer)
                    continue
                try:
                    answer = self._append(tp, data.records, request.acks, outcome)
                except Exception:  # one partition's failure never fails the request's others
                    log.exception("appending to %s failed", tp)
                    answer = ProducePartitionResponse(
                        index=tp.partition,
                        error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                        error_message="the append failed on the broker",
                    )
                if tp in self.state.partitions:  # not per topic for any name a client sends
                    stats.produce_requests[topic.name] += 1
                    if answer.error_code:
                        stats.failed_produce_requests[topic.name] += 1
                outcome.add(tp, answer)
        return outcome

    def _append(
        self, tp: TopicPartition, records: bytes, acks: int, outcome: ProduceOutcome
    ) -> ProducePartitionResponse:
        partition, code = self.state.leader_partition(tp)
        if partition is None:
            return ProducePartitionResponse(index=tp.partition, error_code=code)
        try:
            partition_log = self.state.log_of(partition)
        except KafkaStorageError as e:
            return ProducePartitionResponse(index=tp.partition, error_code=e.code, error_message=e.message)
        if acks == -1 and len(partition.isr) < partition_log.min_insync_replicas:
            return ProducePartitionResponse(
                index=tp.partition,
                error_code=ErrorCode.NOT_ENOUGH_REPLICAS,
                error_message=f"the ISR {list(partition.isr)} is smaller than min.insync.replicas "
                f"{partition_log.min_insync_replicas}",
            )
        try:
            first, last = partition_log.append_as_leader(records, partition.leader_epoch)
        except WireError as e:
            _refusals.report("produce", "refused a produce to %s: %s", tp, e.message)
            return ProducePartitionResponse(index=tp.partition, error_code=e.code, error_message=e.message)
        flushed = partition_log.flush_waiter(last + 1)
        if flushed is not None:
            outcome.flushing[tp] = flushed
        stats = self.state.stats
        stats.bytes_in[tp.topic] += len(records)
        stats.messages_in[tp.topic] += last - first + 1
        self.state.advance_high_watermark(partition)
        self.state.wake_readers(tp)
        if acks == -1:
            reached = self.state.enough_replicas_reached(partition, last + 1)
            if reached is None:
                outcome.waiting[tp] = self.state.wait_for_high_watermark(tp, last + 1)
            elif reached:
                return ProducePartitionResponse(index=tp.partition, error_code=reached, base_offset=first)
        return ProducePartitionResponse(
            index=tp.partition, base_offset=first, log_start_offset=partition_log.log_start_offset
        )

    # --- Fetch: consumers and followers read from the leader ---

    def read(
        self, request: FetchRequest, *, wait: bool, reread: int = 0, owner: tuple[str, int] = ("", 0)
    ) -> ReadOutcome:
        if reread:
            session = self.state.fetch_sessions.get(reread)
            if session is None or session.owner != owner:
                return ReadOutcome(FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND), 0)
            wanted = self.state.fetch_sessions.take_dirty(session)
        else:
            session, error, wanted = self.state.fetch_sessions.open_or_update(request, owner)
            if error:
                log.info("fetch from replica %d: %s", request.replica_id, error.name)
                return ReadOutcome(FetchResponse(error_code=error), 0)
        now_ms = self.state.now_ms()
        replica = request.replica_id if request.replica_id >= 0 else None
        budget = min(request.max_bytes, self.state.config.answer_max_bytes)
        self._held_back = False
        by_topic: dict[str, list[FetchPartitionData]] = {}
        total = 0
        errors = False
        stats = self.state.stats
        for tp, item in wanted:
            answer = self._read_partition(
                tp, item, replica, request.replica_epoch, budget=budget, now_ms=now_ms
            )
            if tp in self.state.partitions:  # not per topic for any name a client sends
                stats.fetch_requests[tp.topic] += 1
                if answer.error_code:
                    stats.failed_fetch_requests[tp.topic] += 1
            if session is not None and not self._worth_answering(
                session, tp, item, answer, full=not reread and request.session_epoch == FULL_EPOCH
            ):
                continue
            budget -= len(answer.records)
            total += len(answer.records)
            errors = errors or answer.error_code != ErrorCode.NONE
            by_topic.setdefault(tp.topic, []).append(answer)
        response = FetchResponse(
            session_id=0 if session is None else session.session_id,
            responses=[FetchableTopicResponse(topic=t, partitions=a) for t, a in by_topic.items()],
        )
        outcome = ReadOutcome(response, total)
        if self._held_back:
            outcome.retry_s = self.state.throttle.leader.wait_s()
        if not wait:
            return outcome
        if session is not None:
            if not by_topic and request.session_epoch != FULL_EPOCH:
                outcome.waiter = session.waiter = asyncio.get_running_loop().create_future()
                outcome.session_id = session.session_id
        elif total < request.min_bytes and not errors:
            outcome.waiter = self.state.wait_for_change(tp for tp, _ in wanted)
        return outcome

    def _worth_answering(
        self,
        session: FetchSession,
        tp: TopicPartition,
        item: FetchPartition,
        answer: FetchPartitionData,
        *,
        full: bool,
    ) -> bool:
        """In a session, a partition is answered when it brings records, an error, or a new
        high watermark or log start (all of them in the fetch that opens the session). An
        empty partition (high watermark, log start and fetch offset all 0) tells the follower
        nothing it does not know: a broker that starts following thousands of empty
        partitions is not answered thousands of times."""
        cached = session.partitions.get(tp)
        if cached is None:
            return True
        nothing_new = answer.high_watermark == answer.log_start_offset == item.fetch_offset == 0
        changed = (
            full
            or answer.records
            or answer.error_code != ErrorCode.NONE
            or (
                (
                    answer.high_watermark != cached.sent_high_watermark
                    or answer.log_start_offset != cached.sent_log_start_offset
                )
                and not nothing_new
            )
        )
        if changed:
            cached.sent_high_watermark = answer.high_watermark
            cached.sent_log_start_offset = answer.log_start_offset
        partition = self.state.partitions.get(tp)
        if not answer.records and partition is not None and partition.log_end_offset > item.fetch_offset:
            session.dirty.add(tp)  # the byte budget ran out before this one: next time
        return bool(changed)

    def _read_partition(
        self,
        tp: TopicPartition,
        item: FetchPartition,
        replica: int | None,
        replica_epoch: int,
        *,
        budget: int,
        now_ms: int,
    ) -> FetchPartitionData:
        partition, code = self.state.leader_partition(tp)
        if partition is None:
            return FetchPartitionData(partition_index=item.partition, error_code=code)
        refused = epoch_error(item.current_leader_epoch, partition.leader_epoch)
        if refused is not None:
            return FetchPartitionData(partition_index=item.partition, error_code=refused)
        if (
            replica is not None
            and replica in partition.replicas
            and item.fetch_offset <= partition.log_end_offset
        ):
            if not partition.update_follower_fetch(replica, item.fetch_offset, now_ms, replica_epoch):
                # A fetch of an incarnation that a newer one has replaced.
                return FetchPartitionData(
                    partition_index=item.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
            self._maybe_expand_isr(partition, replica)
            self.state.advance_high_watermark(partition)
        limit = None if replica is not None else partition.high_watermark
        partition_log = partition.log
        if partition_log is None:
            # Nothing was ever written: an empty log, without creating one on disk.
            code = ErrorCode.NONE if item.fetch_offset == 0 else ErrorCode.OFFSET_OUT_OF_RANGE
            return make_fetch_answer(item.partition, code, 0, 0, b"")
        throttled = replica is not None and self.state.throttle.leader_throttled(tp)
        if throttled and self.state.throttle.leader_holds(tp, replica in partition.isr):
            # Kafka's shouldLeaderThrottle: no records for this follower until the quota frees.
            self._held_back = True
            return make_fetch_answer(
                item.partition, ErrorCode.NONE, partition.high_watermark, partition_log.log_start_offset, b""
            )
        try:
            data = partition_log.read(item.fetch_offset, max(0, min(item.partition_max_bytes, budget)), limit)
            if throttled:
                self.state.throttle.leader.record(len(data))
            if replica is None:
                self.state.stats.bytes_out[tp.topic] += len(data)
            else:
                self.state.stats.replication_bytes_out += len(data)
        except LogCorruption as e:
            # Never served. This replica goes offline and the controller elects another ISR
            # member, whose copy of the batch is whole (spec §7.11's path for a failed dir).
            if self.state.take_offline([tp], f"a damaged batch at offset {e.offset}"):
                self._effects.report_offline_replicas()
            return FetchPartitionData(
                partition_index=item.partition, error_code=ErrorCode.KAFKA_STORAGE_ERROR
            )
        except KafkaStorageError:
            return FetchPartitionData(
                partition_index=item.partition, error_code=ErrorCode.KAFKA_STORAGE_ERROR
            )
        except OffsetOutOfRange:
            return FetchPartitionData(
                partition_index=item.partition,
                error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                high_watermark=partition.high_watermark,
                log_start_offset=partition_log.log_start_offset,
            )
        return make_fetch_answer(
            item.partition, ErrorCode.NONE, partition.high_watermark, partition_log.log_start_offset, data
        )

    # --- ListOffsets and OffsetsForLeaderEpoch, on the leader ---

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            answers = []
            for item in topic.partitions:
                partition, code = self.state.leader_partition(
                    TopicPartition(topic.name, item.partition_index)
                )
                refused = (
                    None
                    if partition is None
                    else epoch_error(item.current_leader_epoch, partition.leader_epoch)
                )
                if partition is None or refused is not None:
                    answers.append(
                        ListOffsetsPartitionResponse(
                            partition_index=item.partition_index, error_code=refused or code
                        )
                    )
                    continue
                answers.append(
                    self._offset_for(partition, item.partition_index, item.timestamp, request.replica_id)
                )
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=answers))
        return ListOffsetsResponse(topics=topics)

    def delete_records(self, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        """Each partition's log start moved to the offset asked (-1: the high watermark), at
        its leader, never past the high watermark (Kafka's ReplicaManager.deleteRecords)."""
        topics = []
        for topic in request.topics:
            answers = []
            for item in topic.partitions:
                partition, code = self.state.leader_partition(
                    TopicPartition(topic.name, item.partition_index)
                )
                if partition is None:
                    answers.append(
                        DeleteRecordsPartitionResult(partition_index=item.partition_index, error_code=code)
                    )
                    continue
                partition_log = self.state.log_of(partition)
                offset = partition.high_watermark if item.offset == HIGH_WATERMARK else item.offset
                if offset < 0 or offset > partition.high_watermark:
                    answers.append(
                        DeleteRecordsPartitionResult(
                            partition_index=item.partition_index, error_code=ErrorCode.OFFSET_OUT_OF_RANGE
                        )
                    )
                    continue
                if partition_log.advance_log_start_offset(offset):
                    # The followers' sessions answer the new start (they delete theirs too).
                    self.state.wake_readers(partition.tp)
                answers.append(
                    DeleteRecordsPartitionResult(
                        partition_index=item.partition_index, low_watermark=partition_log.log_start_offset
                    )
                )
            topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=answers))
        return DeleteRecordsResponse(topics=topics)

    def _offset_for(
        self, partition: Partition, index: int, timestamp: int, replica: int
    ) -> ListOffsetsPartitionResponse:
        partition_log = self.state.log_of(partition)
        latest = partition_log.log_end_offset if replica >= 0 else partition.high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            offset = partition_log.log_start_offset
        elif timestamp == LATEST_TIMESTAMP:
            offset = latest
        else:
            if timestamp == MAX_TIMESTAMP:
                found = partition_log.offset_for_max_timestamp()
            else:
                found = partition_log.offset_for_timestamp(timestamp)
            if found is None or found[0] >= latest:
                return ListOffsetsPartitionResponse(partition_index=index, timestamp=-1, offset=-1)
            offset, stamp, epoch = found
            return ListOffsetsPartitionResponse(
                partition_index=index, timestamp=stamp, offset=offset, leader_epoch=epoch
            )
        return ListOffsetsPartitionResponse(
            partition_index=index, timestamp=-1, offset=offset, leader_epoch=partition.leader_epoch
        )

    def offsets_for_leader_epoch(
        self, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            answers = []
            for item in topic.partitions:
                partition, code = self.state.leader_partition(TopicPartition(topic.topic, item.partition))
                if partition is not None:
                    code = epoch_error(item.current_leader_epoch, partition.leader_epoch) or ErrorCode.NONE
                if partition is None or code:
                    answers.append(EpochEndOffset(partition=item.partition, error_code=code))
                    continue
                epoch, end = self.state.log_of(partition).end_offset_for_epoch(item.leader_epoch)
                answers.append(EpochEndOffset(partition=item.partition, leader_epoch=epoch, end_offset=end))
            topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=answers))
        return OffsetsForLeaderEpochResponse(topics=topics)

    # --- reassignment progress ---

    def bytes_to_copy(self, topics: set[str] | None = None) -> dict[TopicPartition, int]:
        """For each partition this broker leads with replicas being added (a reassignment in
        progress): the bytes those replicas still lack, from each one's last fetch offset to
        the log end (the whole log for one that has not fetched yet)."""
        remaining: dict[TopicPartition, int] = {}
        for tp, partition in self.state.partitions.items():
            if not partition.adding_replicas or partition.role is not Role.LEADER or partition.stopped:
                continue
            if topics is not None and tp.topic not in topics:
                continue
            partition_log = partition.log
            total = 0
            if partition_log is not None:
                for replica in partition.adding_replicas:
                    state = partition.followers.get(replica)
                    offset = state.log_end_offset if state is not None else -1
                    total += partition_log.size_from(max(offset, 0))
            remaining[tp] = total
        return remaining

    # --- ISR maintenance on the leader (spec §9.5) ---

    def _maybe_expand_isr(self, partition: Partition, replica: int) -> None:
        if partition.pending_isr is not None:
            return
        if partition.may_join_isr(replica, self.state.metadata.live_broker_epoch(replica)):
            self._propose(partition, (*partition.isr, replica))

    def _expand_caught_up(self, partition: Partition) -> None:
        """After an ISR change, propose the next follower that caught up while it was
        pending: a follower at the log end sends no more fetch offsets for the partition in
        its incremental fetch session, so no later fetch would bring it in. Only one at the
        leader's log end: a follower that stopped fetching (its broker died, and ZooKeeper
        has not said so yet) and was shrunk out of the ISR still reaches the high watermark
        it held back, and would be proposed again at once, for as long as its session lasts."""
        for replica in partition.replicas:
            if partition.pending_isr is not None:
                return
            if replica not in partition.isr:
                state = partition.followers.get(replica)
                if state is not None and state.log_end_offset >= partition.log_end_offset:
                    self._maybe_expand_isr(partition, replica)

    def expand_caught_up_followers(self) -> None:
        """Every partition led here: propose a caught-up follower back into the ISR."""
        for partition in self.state.partitions.values():
            if (
                partition.role is Role.LEADER
                and not partition.stopped
                and len(partition.isr) < len(partition.replicas)
            ):
                self._expand_caught_up(partition)

    def maybe_shrink_isr(self, partitions: Iterable[Partition] | None = None) -> None:
        """Propose smaller ISRs where followers fell behind: among `partitions` (a slice of the
        hosted ones, when the pass is cut into slices), else among every hosted partition."""
        now_ms = self.state.now_ms()
        # A follower whose broker is not registered is the controller's to remove: its broker
        # change (or a new controller's failover) takes every replica of a broker gone out of
        # the ISRs. Proposing it here too, once the lag time passed while that change ran,
        # doubled the work of a broker failure at scale (667k more ISR changes at 1M).
        live = self.state.metadata.live_brokers
        for partition in self.state.partitions.values() if partitions is None else partitions:
            if partition.role is not Role.LEADER or partition.stopped or partition.pending_isr is not None:
                continue
            out = partition.out_of_sync_replicas(now_ms, self.state.config.lag_time_max_ms)
            if live:
                out = {r for r in out if r in live}
            if out:
                log.info(
                    "%s: shrinking the ISR %s: %s out of sync", partition.tp, list(partition.isr), sorted(out)
                )
                self._propose(partition, tuple(r for r in partition.isr if r not in out))

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        proposal = PendingIsr(
            new_isr, partition.leader_epoch, partition.partition_epoch, partition.broker_epochs(new_isr)
        )
        partition.pending_isr = proposal
        self._effects.propose_isr(partition.tp, proposal)

    def isr_change_answered(
        self, tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult
    ) -> None:
        partition = self.state.partitions.get(tp)
        if partition is None or partition.pending_isr != proposal:
            return
        code = ErrorCode(result.error_code) if result.error_code in ErrorCode._value2member_map_ else None
        if result.error_code == ErrorCode.NONE:
            if (
                result.leader_epoch == partition.leader_epoch
                and result.partition_epoch >= partition.partition_epoch
            ):
                log.info("%s: ISR now %s at partition epoch %d", tp, result.isr, result.partition_epoch)
                self.state.stats.isr_changed(len(partition.isr), len(result.isr))
                partition.isr = tuple(result.isr)
                partition.partition_epoch = result.partition_epoch
                partition.pending_isr = None
                self.state.advance_high_watermark(partition)
                self.state.complete_produce_waiters(partition)
                self._expand_caught_up(partition)
            return
        if code in _WAIT_FOR_LEADER_AND_ISR:
            log.info("%s: the ISR change stays pending until the next LeaderAndIsr: %s", tp, code.name)
            return
        # Refused (a replica shutting down: INELIGIBLE_REPLICA) or failed: try again with the
        # next expansion or expiration check. A follower at the log end names the partition
        # in no more incremental fetches, so its next fetch must read it anyway, or no later
        # fetch would propose it (Kafka's leader reads every partition of a session).
        partition.pending_isr = None
        self.state.fetch_sessions.read_again(tp)
