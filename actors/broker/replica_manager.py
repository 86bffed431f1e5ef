"""The replica manager actor: the controller's orders and the replicated log on one broker
(spec §9).

It owns the newest controller epoch this broker has seen (shared by LeaderAndIsr,
StopReplica and UpdateMetadata, as in Kafka), the partitions the broker hosts, and the
metadata cache. Every order is checked before anything changes: a stale broker epoch or
controller epoch fails the whole request; then each partition stands or falls on its own
leader epoch. A refused order changes nothing.

The data path runs here too, one message at a time: appends on the leader, reads, each
follower's progress, the high watermark, and ISR changes proposed to the controller. What
must wait (an acks=all produce for its high watermark, a long-poll fetch for data) gets a
future; the handle waits on it off the actor. Logs are created on first use, so a
LeaderAndIsr for 100k partitions touches no disk.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Callable

from actors.broker.fetch_session import FULL_EPOCH, FetchSession, FetchSessionCache
from actors.broker.fetch_targets import FetchTargets
from actors.broker.metadata_cache import MetadataCache
from actors.broker.partition import Partition, PendingIsr, Role, TopicPartition
from actors.broker.replication import (
    FetchPlan,
    ProduceOutcome,
    ReadOutcome,
    ReplicationConfig,
)
from actors.clock import Clock, SystemClock
from actors.ports import EndPoint, LogStore, PartitionLog
from actors.runtime import Actor
from wire.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterPartitionResult,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionError,
    ProducePartitionResponse,
    ProduceRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from wire.errors import ErrorCode, OffsetOutOfRange, WireError

log = logging.getLogger(__name__)

# StopReplica leader epochs that always pass: -1 unknown, -2 the topic is being deleted.
_UNCHECKED_LEADER_EPOCHS = (-1, -2)
# Answers to an ISR change that leave it pending until the next LeaderAndIsr (spec §9.5).
_WAIT_FOR_LEADER_AND_ISR = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.NOT_CONTROLLER,
}


@dataclasses.dataclass(frozen=True)
class ControlRequest:
    """A controller request together with this broker's current broker epoch, and for
    LeaderAndIsr the configs of its topics (for the logs it may create)."""

    request: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
    broker_epoch: int
    topic_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A copy of the state, for Metadata and for tests."""

    controller_epoch: int
    partitions: dict[TopicPartition, Partition]
    metadata: MetadataCache


@dataclasses.dataclass(frozen=True)
class Read:
    """A Fetch; `wait` registers a future that fires when one of its partitions changes.
    `reread` names the fetch session of a long poll that woke up: only what changed since
    is answered, without a new session epoch."""

    request: FetchRequest
    wait: bool
    reread: int = 0


@dataclasses.dataclass(frozen=True)
class PlanFetch:
    source: int


@dataclasses.dataclass(frozen=True)
class Fetched:
    source: int
    plan: FetchPlan
    response: FetchResponse


@dataclasses.dataclass(frozen=True)
class EpochEndsFetched:
    source: int
    plan: FetchPlan
    response: OffsetsForLeaderEpochResponse


@dataclasses.dataclass(frozen=True)
class IsrChangeAnswered:
    tp: TopicPartition
    proposal: PendingIsr
    result: AlterPartitionResult


@dataclasses.dataclass(frozen=True)
class Maintain:
    """Periodic work: ISR expiration, and with `checkpoint` the high-watermark file."""

    checkpoint: bool = False
    shrink: bool = True


ReplicaMessage = (
    ControlRequest
    | MetadataRequest
    | ProduceRequest
    | Read
    | ListOffsetsRequest
    | OffsetsForLeaderEpochRequest
    | PlanFetch
    | Fetched
    | EpochEndsFetched
    | IsrChangeAnswered
    | Maintain
    | None
)


class ReplicaManager(Actor[ReplicaMessage]):
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
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata = MetadataCache()
        self.topic_configs: dict[str, dict[str, str]] = {}
        # Set by the handle: start a fetcher for a source broker; send an ISR change.
        self.start_fetcher: Callable[[int], None] = lambda source: None
        self.propose_isr: Callable[[TopicPartition, PendingIsr], None] = lambda tp, proposal: None
        # acks=all produces waiting for the high watermark: (required offset, future).
        self._produce_waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        # Long-poll fetches waiting for any change to one of their partitions.
        self._read_waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        self.fetch_sessions = FetchSessionCache()
        # What this broker fetches as a follower, per leader.
        self.fetch_targets = FetchTargets()

    async def receive(self, message: ReplicaMessage) -> object:
        match message:
            case ControlRequest(request=LeaderAndIsrRequest() as request, broker_epoch=epoch):
                self.topic_configs.update(message.topic_configs)
                return self.become_leader_or_follower(request, epoch)
            case ControlRequest(request=StopReplicaRequest() as request, broker_epoch=epoch):
                return self.stop_replicas(request, epoch)
            case ControlRequest(request=UpdateMetadataRequest() as request, broker_epoch=epoch):
                return self.update_metadata(request, epoch)
            case MetadataRequest(topics=topics):
                return dataclasses.replace(
                    self.metadata.describe(topics), controller_epoch=self.controller_epoch
                )
            case ProduceRequest():
                return self.append_records(message)
            case Read(request=request, wait=wait, reread=reread):
                return self.read(request, wait=wait, reread=reread)
            case ListOffsetsRequest():
                return self.list_offsets(message)
            case OffsetsForLeaderEpochRequest():
                return self.offsets_for_leader_epoch(message)
            case PlanFetch(source=source):
                return self.plan_fetch(source)
            case Fetched(source=source, plan=plan, response=response):
                return self.process_fetched(source, plan, response)
            case EpochEndsFetched(source=source, plan=plan, response=response):
                return self.truncate_to_epoch_ends(source, plan, response)
            case IsrChangeAnswered(tp=tp, proposal=proposal, result=result):
                self.isr_change_answered(tp, proposal, result)
                return None
            case Maintain(checkpoint=checkpoint, shrink=shrink):
                if shrink:
                    self.maybe_shrink_isr()
                if checkpoint:
                    self.checkpoint_high_watermarks()
                return None
            case None:
                return self.snapshot()
            case _:
                raise TypeError(f"replica manager cannot handle {message!r}")

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.controller_epoch,
            {tp: copy.copy(p) for tp, p in self.partitions.items()},
            dataclasses.replace(
                self.metadata,
                live_brokers=dict(self.metadata.live_brokers),
                partitions=dict(self.metadata.partitions),
            ),
        )

    def _now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    # --- checks shared by every controller request (spec §2.6, §9) ---

    def _refusal(
        self,
        kind: str,
        controller_id: int,
        controller_epoch: int,
        request_broker_epoch: int,
        broker_epoch: int,
    ) -> ErrorCode | None:
        if request_broker_epoch != -1 and request_broker_epoch < broker_epoch:
            log.warning(
                "refusing %s from controller %d: broker epoch %d is older than %d",
                kind,
                controller_id,
                request_broker_epoch,
                broker_epoch,
            )
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            log.warning(
                "refusing %s from controller %d: controller epoch %d is older than %d",
                kind,
                controller_id,
                controller_epoch,
                self.controller_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return None

    # --- LeaderAndIsr (spec §9.1) ---

    def become_leader_or_follower(
        self, request: LeaderAndIsrRequest, broker_epoch: int
    ) -> LeaderAndIsrResponse:
        refusal = self._refusal(
            "LeaderAndIsr",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            broker_epoch,
        )
        if refusal is not None:
            return LeaderAndIsrResponse(
                error_code=refusal,
                error_message=f"{refusal.name} from controller {request.controller_id}",
                partition_errors=[_error(s.topic, s.partition, refusal) for s in request.partition_states],
            )
        self.controller_epoch = request.controller_epoch
        leaders = {
            leader.broker_id: EndPoint("PLAINTEXT", "PLAINTEXT", leader.host, leader.port)
            for leader in request.live_leaders
        }
        now_ms = self._now_ms()
        codes = [self._apply(s, leaders, now_ms) for s in request.partition_states]
        applied = [
            s for s, code in zip(request.partition_states, codes, strict=True) if code == ErrorCode.NONE
        ]
        leading = sum(1 for s in applied if s.leader == self.broker_id)
        log.log(
            logging.WARNING if len(applied) < len(codes) else logging.INFO,
            "LeaderAndIsr from controller %d at epoch %d: leader of %d, follower of %d, refused %d",
            request.controller_id,
            request.controller_epoch,
            leading,
            len(applied) - leading,
            len(codes) - len(applied),
        )
        for source in sorted(
            {s.leader for s in applied if s.leader != self.broker_id and s.leader in leaders}
        ):
            self.start_fetcher(source)
        errors = [
            _error(s.topic, s.partition, code)
            for s, code in zip(request.partition_states, codes, strict=True)
        ]
        return LeaderAndIsrResponse(partition_errors=errors)

    def _apply(
        self, state: LeaderAndIsrPartitionState, leaders: dict[int, EndPoint], now_ms: int
    ) -> ErrorCode:
        tp = TopicPartition(state.topic, state.partition)
        current = self.partitions.get(tp)
        held_epoch = -1 if current is None else current.leader_epoch
        if state.leader_epoch <= held_epoch:
            # Expected in bulk after a failover (Kafka resends every state); one summary line
            # per request says how many were refused.
            log.debug(
                "ignoring LeaderAndIsr for %s: leader epoch %d is not newer than %d",
                tp,
                state.leader_epoch,
                held_epoch,
            )
            return ErrorCode.FENCED_LEADER_EPOCH
        if self.broker_id not in state.replicas:
            log.debug(
                "ignoring LeaderAndIsr for %s: broker %d is not among replicas %s",
                tp,
                self.broker_id,
                state.replicas,
            )
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if current is not None and state.partition_epoch < current.partition_epoch:
            # Kafka's makeLeader/makeFollower skip an older partition epoch but answer NONE.
            return ErrorCode.NONE
        role = Role.LEADER if state.leader == self.broker_id else Role.FOLLOWER
        if current is not None and current.role is Role.FOLLOWER:
            self.fetch_targets.unfollow(current.leader, tp)
        existing_log = current.log if current is not None else self.logs.get(tp)
        if current is not None:
            high_watermark = current.high_watermark
        else:
            high_watermark = self.logs.checkpointed_high_watermark(tp)
        partition = Partition(
            tp,
            role,
            state.leader,
            state.leader_epoch,
            tuple(state.isr),
            state.partition_epoch,
            tuple(state.replicas),
            tuple(state.adding_replicas) if state.adding_replicas else (),
            tuple(state.removing_replicas) if state.removing_replicas else (),
            state.controller_epoch,
            existing_log,
            high_watermark,
        )
        if existing_log is not None:
            partition.high_watermark = min(high_watermark, existing_log.log_end_offset)
        self.partitions[tp] = partition
        if role is Role.LEADER:
            self._make_leader(partition, now_ms)
        else:
            self._make_follower(partition, leaders.get(state.leader))
        return ErrorCode.NONE

    def _make_leader(self, partition: Partition, now_ms: int) -> None:
        partition.leader_epoch_start_offset = 0 if partition.log is None else partition.log.log_end_offset
        partition.reset_followers(now_ms)
        # Fetch sessions opened before this order answered an error for it: answer again.
        self._wake_readers(partition.tp)
        if partition.log is not None:
            self._advance_high_watermark(partition)

    def _make_follower(self, partition: Partition, leader: EndPoint | None) -> None:
        if partition.log is not None:
            partition.needs_truncation = partition.log.latest_epoch >= 0
            if not partition.needs_truncation:
                # No epochs to compare: only what is committed is known to agree.
                partition.log.truncate_to(partition.high_watermark)
        if leader is not None:
            self.fetch_targets.follow(
                partition.leader, leader, partition.tp, truncate_first=partition.needs_truncation
            )
        self._fail_produce_waiters(partition.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._wake_readers(partition.tp)

    def _log(self, partition: Partition) -> PartitionLog:
        if partition.log is None:
            partition.log = self.logs.get_or_create(
                partition.tp, self.topic_configs.get(partition.tp.topic, {})
            )
            partition.high_watermark = min(partition.high_watermark, partition.log.log_end_offset)
            if partition.role is Role.LEADER:
                partition.leader_epoch_start_offset = partition.log.log_end_offset
        return partition.log

    # --- StopReplica (spec §9.2) ---

    def stop_replicas(self, request: StopReplicaRequest, broker_epoch: int) -> StopReplicaResponse:
        refusal = self._refusal(
            "StopReplica", request.controller_id, request.controller_epoch, request.broker_epoch, broker_epoch
        )
        if refusal is not None:
            return StopReplicaResponse(
                error_code=refusal, error_message=f"{refusal.name} from controller {request.controller_id}"
            )
        self.controller_epoch = request.controller_epoch
        errors = []
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            hosted = self.partitions.get(tp)
            if (
                hosted is not None
                and item.leader_epoch not in _UNCHECKED_LEADER_EPOCHS
                and item.leader_epoch < hosted.leader_epoch
            ):
                errors.append(_error(item.topic, item.partition, ErrorCode.FENCED_LEADER_EPOCH))
                continue
            if hosted is not None:
                hosted.stopped = True
                if hosted.role is Role.FOLLOWER:
                    self.fetch_targets.unfollow(hosted.leader, tp)
            self._fail_produce_waiters(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._wake_readers(tp)
            if item.delete_partition:
                self.partitions.pop(tp, None)
                self.logs.delete(tp)
            errors.append(_error(item.topic, item.partition, ErrorCode.NONE))
        return StopReplicaResponse(partition_errors=errors)

    # --- UpdateMetadata (spec §9.3) ---

    def update_metadata(self, request: UpdateMetadataRequest, broker_epoch: int) -> UpdateMetadataResponse:
        refusal = self._refusal(
            "UpdateMetadata",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            broker_epoch,
        )
        if refusal is not None:
            return UpdateMetadataResponse(
                error_code=refusal, error_message=f"{refusal.name} from controller {request.controller_id}"
            )
        self.metadata.update(request)
        self.controller_epoch = request.controller_epoch
        return UpdateMetadataResponse()

    # --- Produce: appends on the leader ---

    def append_records(self, request: ProduceRequest) -> ProduceOutcome:
        outcome = ProduceOutcome()
        for topic in request.topic_data:
            for data in topic.partition_data:
                tp = TopicPartition(topic.name, data.index)
                outcome.add(tp, self._append(tp, data.records, request.acks, outcome))
        return outcome

    def _append(
        self, tp: TopicPartition, records: bytes, acks: int, outcome: ProduceOutcome
    ) -> ProducePartitionResponse:
        partition, code = self._leader_partition(tp)
        if partition is None:
            return ProducePartitionResponse(index=tp.partition, error_code=code)
        partition_log = self._log(partition)
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
            log.warning("refused a produce to %s: %s", tp, e.message)
            return ProducePartitionResponse(index=tp.partition, error_code=e.code, error_message=e.message)
        self._advance_high_watermark(partition)
        self._wake_readers(tp)
        if acks == -1:
            reached = self._enough_replicas_reached(partition, last + 1)
            if reached is None:
                waiter: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
                self._produce_waiters.setdefault(tp, []).append((last + 1, waiter))
                outcome.waiting[tp] = waiter
            elif reached:
                return ProducePartitionResponse(index=tp.partition, error_code=reached, base_offset=first)
        return ProducePartitionResponse(
            index=tp.partition, base_offset=first, log_start_offset=partition_log.log_start_offset
        )

    def _leader_partition(self, tp: TopicPartition) -> tuple[Partition | None, ErrorCode]:
        partition = self.partitions.get(tp)
        if partition is None or partition.stopped:
            known = tp in self.metadata.partitions
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition.role is not Role.LEADER:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    @staticmethod
    def _enough_replicas_reached(partition: Partition, required: int) -> ErrorCode | None:
        """None while the high watermark is below `required` (Kafka's checkEnoughReplicasReachOffset)."""
        if partition.high_watermark < required:
            return None
        assert partition.log is not None
        if len(partition.maximal_isr) < partition.log.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _advance_high_watermark(self, partition: Partition) -> None:
        if partition.maybe_advance_high_watermark():
            self._complete_produce_waiters(partition)
            self._wake_readers(partition.tp)

    def _complete_produce_waiters(self, partition: Partition) -> None:
        waiters = self._produce_waiters.get(partition.tp)
        if not waiters:
            return
        remaining = []
        for required, waiter in waiters:
            code = self._enough_replicas_reached(partition, required)
            if waiter.done():
                continue
            if code is None:
                remaining.append((required, waiter))
            else:
                waiter.set_result(code)
        self._produce_waiters[partition.tp] = remaining

    def _fail_produce_waiters(self, tp: TopicPartition, code: ErrorCode) -> None:
        if not self._produce_waiters:
            return
        for _, waiter in self._produce_waiters.pop(tp, []):
            if not waiter.done():
                waiter.set_result(code)

    def _wake_readers(self, tp: TopicPartition) -> None:
        if self.fetch_sessions:
            self.fetch_sessions.mark_dirty(tp)
        if not self._read_waiters:
            return
        for waiter in self._read_waiters.pop(tp, []):
            if not waiter.done():
                waiter.set_result(None)

    # --- Fetch: consumers and followers read from the leader ---

    def read(self, request: FetchRequest, *, wait: bool, reread: int = 0) -> ReadOutcome:
        if reread:
            session = self.fetch_sessions.get(reread)
            if session is None:
                return ReadOutcome(FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND), 0)
            wanted = self.fetch_sessions.take_dirty(session)
        else:
            session, error, wanted = self.fetch_sessions.open_or_update(request)
            if error:
                log.info("fetch from replica %d: %s", request.replica_id, error.name)
                return ReadOutcome(FetchResponse(error_code=error), 0)
        now_ms = self._now_ms()
        replica = request.replica_id if request.replica_id >= 0 else None
        budget = request.max_bytes
        by_topic: dict[str, list[FetchPartitionData]] = {}
        total = 0
        errors = False
        for tp, item in wanted:
            answer = self._read_partition(tp, item, replica, budget, now_ms)
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
        if not wait:
            return outcome
        if session is not None:
            if not by_topic and request.session_epoch != FULL_EPOCH:
                outcome.waiter = session.waiter = asyncio.get_running_loop().create_future()
                outcome.session_id = session.session_id
        elif total < request.min_bytes and not errors:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for tp, _ in wanted:
                self._read_waiters.setdefault(tp, []).append(waiter)
            outcome.waiter = waiter
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
        high watermark or log start (all of them in the fetch that opens the session)."""
        cached = session.partitions.get(tp)
        if cached is None:
            return True
        changed = (
            full
            or answer.records
            or answer.error_code != ErrorCode.NONE
            or answer.high_watermark != cached.sent_high_watermark
            or answer.log_start_offset != cached.sent_log_start_offset
        )
        if changed:
            cached.sent_high_watermark = answer.high_watermark
            cached.sent_log_start_offset = answer.log_start_offset
        partition = self.partitions.get(tp)
        if not answer.records and partition is not None and partition.log_end_offset > item.fetch_offset:
            session.dirty.add(tp)  # the byte budget ran out before this one: next time
        return bool(changed)

    def _read_partition(
        self, tp: TopicPartition, item: FetchPartition, replica: int | None, budget: int, now_ms: int
    ) -> FetchPartitionData:
        partition, code = self._leader_partition(tp)
        if partition is None:
            return FetchPartitionData(partition_index=item.partition, error_code=code)
        epoch_error = _epoch_error(item.current_leader_epoch, partition.leader_epoch)
        if epoch_error is not None:
            return FetchPartitionData(partition_index=item.partition, error_code=epoch_error)
        if (
            replica is not None
            and replica in partition.replicas
            and item.fetch_offset <= partition.log_end_offset
        ):
            partition.update_follower_fetch(replica, item.fetch_offset, now_ms)
            self._maybe_expand_isr(partition, replica)
            self._advance_high_watermark(partition)
        limit = None if replica is not None else partition.high_watermark
        partition_log = partition.log
        if partition_log is None:
            # Nothing was ever written: an empty log, without creating one on disk.
            code = ErrorCode.NONE if item.fetch_offset == 0 else ErrorCode.OFFSET_OUT_OF_RANGE
            return FetchPartitionData(
                partition_index=item.partition, error_code=code, high_watermark=0, log_start_offset=0
            )
        try:
            data = partition_log.read(item.fetch_offset, max(0, min(item.partition_max_bytes, budget)), limit)
        except OffsetOutOfRange:
            return FetchPartitionData(
                partition_index=item.partition,
                error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                high_watermark=partition.high_watermark,
                log_start_offset=partition_log.log_start_offset,
            )
        return FetchPartitionData(
            partition_index=item.partition,
            high_watermark=partition.high_watermark,
            log_start_offset=partition_log.log_start_offset,
            records=data,
        )

    # --- ListOffsets and OffsetsForLeaderEpoch, on the leader ---

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            answers = []
            for item in topic.partitions:
                partition, code = self._leader_partition(TopicPartition(topic.name, item.partition_index))
                epoch_error = (
                    None
                    if partition is None
                    else _epoch_error(item.current_leader_epoch, partition.leader_epoch)
                )
                if partition is None or epoch_error is not None:
                    answers.append(
                        ListOffsetsPartitionResponse(
                            partition_index=item.partition_index, error_code=epoch_error or code
                        )
                    )
                    continue
                answers.append(
                    self._offset_for(partition, item.partition_index, item.timestamp, request.replica_id)
                )
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=answers))
        return ListOffsetsResponse(topics=topics)

    def _offset_for(
        self, partition: Partition, index: int, timestamp: int, replica: int
    ) -> ListOffsetsPartitionResponse:
        partition_log = self._log(partition)
        latest = partition_log.log_end_offset if replica >= 0 else partition.high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            offset = partition_log.log_start_offset
        elif timestamp == LATEST_TIMESTAMP:
            offset = latest
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
                partition, code = self._leader_partition(TopicPartition(topic.topic, item.partition))
                if partition is not None:
                    code = _epoch_error(item.current_leader_epoch, partition.leader_epoch) or ErrorCode.NONE
                if partition is None or code:
                    answers.append(EpochEndOffset(partition=item.partition, error_code=code))
                    continue
                epoch, end = self._log(partition).end_offset_for_epoch(item.leader_epoch)
                answers.append(EpochEndOffset(partition=item.partition, leader_epoch=epoch, end_offset=end))
            topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=answers))
        return OffsetsForLeaderEpochResponse(topics=topics)

    # --- the follower side: what to fetch, and what came back (Kafka's fetcher thread) ---

    def _fetch_state(self, tp: TopicPartition) -> tuple[int, int]:
        partition = self.partitions[tp]
        return partition.log_end_offset, partition.leader_epoch

    def plan_fetch(self, source: int) -> FetchPlan | None:
        """The next request to the leader `source`: epoch end offsets for partitions that must
        truncate first, else a fetch in the session with it. None when nothing follows it
        (the fetcher stops)."""
        state = self.fetch_targets.get(source)
        if state is None or not state.followed:
            self.fetch_targets.drop(source)
            return None
        if state.truncating:
            truncating = [self.partitions[tp] for tp in sorted(state.truncating)]
            by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
            for p in truncating:
                by_topic.setdefault(p.tp.topic, []).append(
                    OffsetForLeaderPartition(
                        partition=p.tp.partition,
                        current_leader_epoch=p.leader_epoch,
                        leader_epoch=self._log(p).latest_epoch,
                    )
                )
            epoch_request = OffsetsForLeaderEpochRequest(
                replica_id=self.broker_id,
                topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
            epochs = {p.tp: p.leader_epoch for p in truncating}
            return FetchPlan(state.endpoint, epochs, epoch_request=epoch_request)
        session = state.session
        if session.needs_full_fetch:
            session_id, session_epoch, changed = session.build_full(
                {tp: self._fetch_state(tp) for tp in state.followed}
            )
            forgotten: dict[str, list[int]] = {}
        else:
            session_id, session_epoch, changed, forgotten = session.build_incremental(
                {tp: self._fetch_state(tp) for tp in state.updates}, state.removed
            )
        state.updates.clear()
        state.removed.clear()
        fetches: dict[str, list[FetchPartition]] = {}
        for tp in changed:
            offset, epoch = session.sent[tp]
            fetches.setdefault(tp.topic, []).append(
                FetchPartition(
                    partition=tp.partition,
                    fetch_offset=offset,
                    current_leader_epoch=epoch,
                    partition_max_bytes=self.config.fetch_max_bytes,
                )
            )
        request = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=self.config.fetch_wait_max_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_response_max_bytes,
            session_id=session_id,
            session_epoch=session_epoch,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in fetches.items()],
            forgotten_topics_data=session.forgotten_topics(forgotten),
        )
        return FetchPlan(state.endpoint, {}, fetch_request=request)

    def _still_following(self, tp: TopicPartition, source: int, leader_epoch: int | None) -> Partition | None:
        """The partition, if it still follows `source` at the leader epoch an answer is for."""
        partition = self.partitions.get(tp)
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
        state = self.fetch_targets.get(source)
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
                if self._apply_fetched(partition, data):
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
        partition_log = self._log(partition)
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if partition_log.log_end_offset < data.log_start_offset:
                partition_log.truncate_fully_and_start_at(data.log_start_offset)
                partition.high_watermark = data.log_start_offset
                self.fetch_targets.moved(partition.leader, partition.tp)
            else:
                partition.needs_truncation = True
                self.fetch_targets.must_truncate(partition.leader, partition.tp)
            return False
        if data.records:
            try:
                partition_log.append_as_follower(data.records)
            except WireError as e:
                # A stale answer (the log moved since the request was built) or a corrupt one:
                # nothing was appended; the next fetch starts from the log end again.
                log.warning("dropping fetched data for %s: %s", partition.tp, e.message)
                return True
            self.fetch_targets.moved(partition.leader, partition.tp)
        partition.high_watermark = min(data.high_watermark, partition_log.log_end_offset)
        self._wake_readers(partition.tp)
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
                partition_log = self._log(partition)
                if item.leader_epoch < 0 or item.end_offset < 0:
                    offset = partition.high_watermark
                else:
                    _, own_end = partition_log.end_offset_for_epoch(item.leader_epoch)
                    if own_end < 0:
                        own_end = partition_log.log_end_offset
                    offset = min(item.end_offset, own_end, partition_log.log_end_offset)
                if offset < partition_log.log_end_offset:
                    log.info(
                        "%s: truncating to offset %d, where the log agrees with leader %d at epoch %d",
                        partition.tp,
                        offset,
                        source,
                        item.leader_epoch,
                    )
                    partition_log.truncate_to(offset)
                partition.high_watermark = min(partition.high_watermark, partition_log.log_end_offset)
                partition.needs_truncation = False
                self.fetch_targets.truncated(source, tp)
        return failed

    # --- ISR maintenance on the leader (spec §9.5) ---

    def _maybe_expand_isr(self, partition: Partition, replica: int) -> None:
        if partition.pending_isr is not None or replica not in self.metadata.live_brokers:
            return
        if partition.may_join_isr(replica):
            self._propose(partition, (*partition.isr, replica))

    def maybe_shrink_isr(self) -> None:
        now_ms = self._now_ms()
        for partition in self.partitions.values():
            if partition.role is not Role.LEADER or partition.stopped or partition.pending_isr is not None:
                continue
            out = partition.out_of_sync_replicas(now_ms, self.config.lag_time_max_ms)
            if out:
                log.info(
                    "%s: shrinking the ISR %s: %s out of sync", partition.tp, list(partition.isr), sorted(out)
                )
                self._propose(partition, tuple(r for r in partition.isr if r not in out))

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        proposal = PendingIsr(new_isr, partition.leader_epoch, partition.partition_epoch)
        partition.pending_isr = proposal
        self.propose_isr(partition.tp, proposal)

    def isr_change_answered(
        self, tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult
    ) -> None:
        partition = self.partitions.get(tp)
        if partition is None or partition.pending_isr != proposal:
            return
        code = ErrorCode(result.error_code) if result.error_code in ErrorCode._value2member_map_ else None
        if result.error_code == ErrorCode.NONE:
            if (
                result.leader_epoch == partition.leader_epoch
                and result.partition_epoch >= partition.partition_epoch
            ):
                log.info("%s: ISR now %s at partition epoch %d", tp, result.isr, result.partition_epoch)
                partition.isr = tuple(result.isr)
                partition.partition_epoch = result.partition_epoch
                partition.pending_isr = None
                self._advance_high_watermark(partition)
                self._complete_produce_waiters(partition)
            return
        if code in (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA):
            partition.pending_isr = None
            return
        if code in _WAIT_FOR_LEADER_AND_ISR:
            log.info("%s: the ISR change stays pending until the next LeaderAndIsr: %s", tp, code.name)
            return
        # Anything else: try again with the next expansion or expiration check.
        partition.pending_isr = None

    def checkpoint_high_watermarks(self) -> None:
        self.logs.checkpoint_high_watermarks(
            {tp: p.high_watermark for tp, p in self.partitions.items() if p.log is not None}
        )


def _epoch_error(requested: int, current: int) -> ErrorCode | None:
    """A client's or follower's view of the leader epoch against this leader's (-1: unchecked)."""
    if requested < 0 or requested == current:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


_make_partition_error = PartitionError.make


def _error(topic: str, partition: int, code: ErrorCode) -> PartitionError:
    # One per partition of a LeaderAndIsr of up to 100k: built without the dataclass constructor.
    return _make_partition_error(topic, partition, int(code))
