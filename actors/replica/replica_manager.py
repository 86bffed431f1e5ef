"""The replica manager actor: the controller's orders and the replicated log on one broker
(spec §9).

It owns the newest controller epoch this broker has seen (shared by LeaderAndIsr,
StopReplica and UpdateMetadata, as in Kafka), the partitions the broker hosts, and the
metadata cache. Every order is checked before anything changes: a stale broker epoch or
controller epoch fails the whole request; then each partition stands or falls on its own
leader epoch. A refused order changes nothing.

The replicated log runs on the same actor, one message at a time, in two parts made with it
over one shared state (`replica_state.py`): the leader's (`leader_path.py`: appends, reads,
the high watermark, ISR changes proposed to the controller) and the follower's
(`follower_path.py`: what to fetch, appending it, truncating by leader epoch). What it asks of
the world around it (start a fetcher, send an ISR change) goes to the `ReplicationEffects`
it is given when it is made. What must wait (an acks=all produce for its
high watermark, a long-poll fetch for data) gets a future; the handle waits on it off the
actor. Logs are created on first use, so a LeaderAndIsr for 100k partitions touches no disk.
Each partition a LeaderAndIsr changes is a line of the state-change log, as Kafka's brokers
write one as a partition's leader or follower starts at its new leader epoch.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Sequence

from actors.base.clock import Clock
from actors.base.loop_slices import SLICE, sliced, turn_if_held
from actors.base.ports import LogCorruption, LogStore
from actors.base.runtime import Actor
from actors.base.state_change_log import StateChangeLogger
from actors.replica.follower_path import FollowerPath
from actors.replica.leader_path import LeaderPath
from actors.replica.partition import Partition, Role, TopicPartition
from actors.replica.replica_messages import (
    ApplyLeaderAndIsr,
    ApplyStopReplica,
    ApplyUpdateMetadata,
    BytesToCopy,
    CountReplicas,
    DeleteRecords,
    EpochEndsFetched,
    Fetched,
    IsrChangeAnswered,
    LeaderEpochEnds,
    ListOffsets,
    LogDirFailed,
    Maintain,
    MetadataFor,
    PlanFetch,
    Produce,
    Read,
    ReplicaMessage,
    Scrub,
    SetThrottles,
    Snapshot,
    TakeSnapshot,
)
from actors.replica.replica_state import ReplicaState
from actors.replica.replication import NoReplication, ReplicationConfig, ReplicationEffects
from wire.api import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode, KafkaStorageError

log = logging.getLogger(__name__)

# StopReplica leader epochs that always pass: -1 unknown, -2 the topic is being deleted.
_UNCHECKED_LEADER_EPOCHS = (-1, -2)

__all__ = ["ReplicaManager", "ReplicaMessage", "Snapshot"]


class ReplicaManager(Actor[ReplicaMessage]):
    """The actor: each message is handled whole, one at a time."""

    def __init__(
        self,
        broker_id: int,
        logs: LogStore,
        *,
        config: ReplicationConfig | None = None,
        clock: Clock | None = None,
        effects: ReplicationEffects | None = None,
    ) -> None:
        self.state = ReplicaState(broker_id, logs, config=config, clock=clock)
        self._effects = effects or NoReplication()
        self.leader_path = LeaderPath(self.state, self._effects)
        self.follower_path = FollowerPath(self.state)
        self._state_change_log = StateChangeLogger.for_broker(broker_id)
        # The partitions of the scrub's current round, and where the next scrub starts in it.
        self._scrub_round: list[TopicPartition] = []
        self._scrub_next = 0

    async def receive(self, message: ReplicaMessage) -> object:
        match message:
            case ApplyLeaderAndIsr(request=request, broker_epoch=epoch):
                self.state.topic_configs.update(message.topic_configs)
                for topic, config in message.topic_configs.items():
                    # A topic created with throttled replicas gets no change notification.
                    self.state.throttle.set_topic_config(topic, config)
                return await self._become_leader_or_follower_in_slices(request, epoch)
            case ApplyStopReplica(request=request, broker_epoch=epoch):
                return self.stop_replicas(request, epoch)
            case ApplyUpdateMetadata(request=request, broker_epoch=epoch):
                return await self._update_metadata_in_slices(request, epoch)
            case MetadataFor(request=MetadataRequest(topics=topics), listener=listener):
                answer = self.state.metadata.describe(topics, listener)
                return dataclasses.replace(answer, controller_epoch=self.state.controller_epoch)
            case Produce(request=request):
                return self.leader_path.append_records(request)
            case Read(request=request, wait=wait, reread=reread, owner=owner):
                return self.leader_path.read(request, wait=wait, reread=reread, owner=owner)
            case ListOffsets(request=request):
                return self.leader_path.list_offsets(request)
            case DeleteRecords(request=request):
                return self.leader_path.delete_records(request)
            case LeaderEpochEnds(request=request):
                return self.leader_path.offsets_for_leader_epoch(request)
            case PlanFetch(source=source, broker_epoch=epoch):
                self.state.broker_epoch = max(self.state.broker_epoch, epoch)
                return self.follower_path.plan_fetch(source)
            case Fetched(source=source, plan=plan, response=response):
                return self.follower_path.process_fetched(source, plan, response)
            case EpochEndsFetched(source=source, plan=plan, response=response):
                return self.follower_path.truncate_to_epoch_ends(source, plan, response)
            case IsrChangeAnswered(tp=tp, proposal=proposal, result=result):
                self.leader_path.isr_change_answered(tp, proposal, result)
                return None
            case Maintain(checkpoint=checkpoint, shrink=shrink):
                if shrink:
                    async for partitions in sliced(list(self.state.partitions.values())):
                        self.leader_path.maybe_shrink_isr(partitions)
                if checkpoint:
                    await self.state.checkpoint_high_watermarks()
                return None
            case CountReplicas():
                return self.state.metadata.replica_counts()
            case BytesToCopy(topics=topics):
                return self.leader_path.bytes_to_copy(None if topics is None else set(topics))
            case SetThrottles(rates=rates, topic_configs=topic_configs):
                self.set_throttles(rates, topic_configs)
                return None
            case Scrub(max_bytes=max_bytes):
                await self.scrub(max_bytes)
                return None
            case LogDirFailed(partitions=partitions):
                if self.state.take_offline(partitions, "their log directory failed"):
                    self._effects.report_offline_replicas()
                return None
            case TakeSnapshot():
                return self.state.snapshot()
            case _:
                raise TypeError(f"replica manager cannot handle {message!r}")

    # --- dynamic configs: replication throttles ---

    def set_throttles(
        self, rates: tuple[int | None, int | None] | None, topic_configs: dict[str, dict[str, str]]
    ) -> None:
        if rates is not None:
            self.state.throttle.set_rates(*rates)
            log.info("replication throttle rates now leader %s, follower %s bytes/s", *rates)
        for topic, config in topic_configs.items():
            self.state.throttle.set_topic_config(topic, config)
            # Logs created from now on see the new configs too.
            self.state.topic_configs[topic] = dict(config)
        if topic_configs:
            # And the logs there are (cleanup.policy, retention, compaction settings...),
            # as Kafka's TopicConfigHandler updates each log's config.
            for partition in self.state.partitions.values():
                if partition.log is not None and partition.tp.topic in topic_configs:
                    self.state.logs.get_or_create(partition.tp, topic_configs[partition.tp.topic])

    # --- storage faults ---

    async def scrub(self, max_bytes: int) -> None:
        """Check about `max_bytes` of the hosted logs, taking up where the last scrub stopped.
        A damaged batch on a follower is cut off with everything after it, and fetched again
        from the leader; on a leader the replica goes offline, so that the controller moves
        leadership to an ISR member whose copy is whole.

        The logs are checked in rounds, each over the partitions hosted when it began, in the
        order the broker came to host them: a scrub goes on with the current round, or begins
        the next. (Sorting the hosted partitions at every scrub held the loop 50 to 100 ms at
        200k partitions.) A log checked to its end is done for the round, even if that took
        the budget: a scrub that stayed on it would start it over."""
        if self._scrub_next >= len(self._scrub_round):
            self._scrub_round = list(self.state.partitions)
            self._scrub_next = 0
        budget = max_bytes
        while self._scrub_next < len(self._scrub_round):
            if self._scrub_next % SLICE == 0:
                await turn_if_held()  # empty logs cost nothing to check, but 200k of them do
            tp = self._scrub_round[self._scrub_next]
            partition = self.state.partitions.get(tp)
            if partition is not None and partition.log is not None and tp not in self.state.offline:
                try:
                    budget -= partition.log.scrub(budget)
                except LogCorruption as e:
                    self.damaged(partition, e)
                except KafkaStorageError:
                    pass  # the log directory failed: its handler takes the replicas offline
                if budget <= 0 and not partition.log.scrubbed_to_end:
                    return  # the next scrub goes on with this log
            self._scrub_next += 1

    def damaged(self, partition: Partition, corruption: LogCorruption) -> None:
        if partition.role is Role.FOLLOWER:
            self.follower_path.refetch_from(partition, corruption.offset)
        elif self.state.take_offline([partition.tp], f"a damaged batch at offset {corruption.offset}"):
            self._effects.report_offline_replicas()

    # --- checks shared by every controller request (spec §2.6, §9) ---

    def _refusal(
        self,
        kind: str,
        controller_id: int,
        controller_epoch: int,
        request_broker_epoch: int,
        broker_epoch: int,
    ) -> ErrorCode | None:
        """Why a controller's request is refused, or None. `broker_epoch`, this broker's own,
        comes with every such request, and is kept: its fetches carry it (KIP-903)."""
        self.state.broker_epoch = max(self.state.broker_epoch, broker_epoch)
        if request_broker_epoch != -1 and request_broker_epoch < broker_epoch:
            log.warning(
                "refusing %s from controller %d: broker epoch %d is older than %d",
                kind,
                controller_id,
                request_broker_epoch,
                broker_epoch,
            )
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.state.controller_epoch:
            log.warning(
                "refusing %s from controller %d: controller epoch %d is older than %d",
                kind,
                controller_id,
                controller_epoch,
                self.state.controller_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return None

    # --- LeaderAndIsr (spec §9.1) ---

    def become_leader_or_follower(
        self, request: LeaderAndIsrRequest, broker_epoch: int
    ) -> LeaderAndIsrResponse:
        refused = self._refused_leader_and_isr(request, broker_epoch)
        if refused is not None:
            return refused
        leaders, now_ms = self._leaders(request), self.state.now_ms()
        codes = [self._apply(s, leaders, now_ms) for s in request.partition_states]
        self._log_started(request.partition_states, codes)
        return self._leader_and_isr_applied(request, leaders, codes)

    async def _become_leader_or_follower_in_slices(
        self, request: LeaderAndIsrRequest, broker_epoch: int
    ) -> LeaderAndIsrResponse:
        """The same, the loop turning between slices of the partition states (actors/base/loop_slices.py)."""
        refused = self._refused_leader_and_isr(request, broker_epoch)
        if refused is not None:
            return refused
        leaders, now_ms = self._leaders(request), self.state.now_ms()
        codes: list[ErrorCode] = []
        async for states in sliced(request.partition_states):
            applied = [self._apply(s, leaders, now_ms) for s in states]
            self._log_started(states, applied)
            codes += applied
        return self._leader_and_isr_applied(request, leaders, codes)

    def _refused_leader_and_isr(
        self, request: LeaderAndIsrRequest, broker_epoch: int
    ) -> LeaderAndIsrResponse | None:
        refusal = self._refusal(
            "LeaderAndIsr",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            broker_epoch,
        )
        if refusal is None:
            self.state.controller_epoch = request.controller_epoch
            return None
        return LeaderAndIsrResponse(
            error_code=refusal,
            error_message=f"{refusal.name} from controller {request.controller_id}",
            partition_errors=[_error(s.topic, s.partition, refusal) for s in request.partition_states],
        )

    def _leaders(self, request: LeaderAndIsrRequest) -> dict[int, Endpoint]:
        listener, protocol = self.state.config.inter_broker_listener
        return {
            leader.broker_id: Endpoint(listener, protocol, leader.host, leader.port)
            for leader in request.live_leaders
        }

    def _log_started(self, states: Sequence[LeaderAndIsrPartitionState], codes: Sequence[ErrorCode]) -> None:
        self._state_change_log.log(
            logging.INFO,
            (self._started(s) for s, code in zip(states, codes, strict=True) if code == ErrorCode.NONE),
        )

    def _leader_and_isr_applied(
        self, request: LeaderAndIsrRequest, leaders: dict[int, Endpoint], codes: Sequence[ErrorCode]
    ) -> LeaderAndIsrResponse:
        """After every state is applied (`codes`): the summary line, the fetchers, the answer."""
        applied = [
            s for s, code in zip(request.partition_states, codes, strict=True) if code == ErrorCode.NONE
        ]
        leading = sum(1 for s in applied if s.leader == self.state.broker_id)
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
            {s.leader for s in applied if s.leader != self.state.broker_id and s.leader in leaders}
        ):
            self._effects.start_fetcher(source)
        # One line per request, not per partition (a failover resends every state).
        awaiting = [
            s
            for s in applied
            if s.leader >= 0 and s.leader not in leaders and s.leader != self.state.broker_id
        ]
        if awaiting:
            log.warning(
                "%d follower(s) with a leader not live, e.g. %s-%d of leader %d: they fetch once a "
                "LeaderAndIsr names it live",
                len(awaiting),
                awaiting[0].topic,
                awaiting[0].partition,
                awaiting[0].leader,
            )
        errors = [
            _error(s.topic, s.partition, code)
            for s, code in zip(request.partition_states, codes, strict=True)
        ]
        return LeaderAndIsrResponse(partition_errors=errors)

    def _started(self, state: LeaderAndIsrPartitionState) -> str:
        """The state-change line of a partition this broker now leads or follows."""
        tp = f"{state.topic}-{state.partition}"
        isr = ",".join(map(str, state.isr))
        if state.leader == self.state.broker_id:
            return (
                f"Leader {tp} starts at leader epoch {state.leader_epoch} with partition epoch "
                f"{state.partition_epoch}, ISR {isr} (controller epoch {state.controller_epoch})"
            )
        return (
            f"Follower {tp} starts at leader epoch {state.leader_epoch} following leader {state.leader} "
            f"with partition epoch {state.partition_epoch}, ISR {isr} "
            f"(controller epoch {state.controller_epoch})"
        )

    def _apply(
        self, state: LeaderAndIsrPartitionState, leaders: dict[int, Endpoint], now_ms: int
    ) -> ErrorCode:
        # One copy of each topic name across the process, not the request's copy per state.
        tp = TopicPartition(sys.intern(state.topic), state.partition)
        if self.state.offline and tp in self.state.offline:
            # Spec §7.11: the controller takes this answer to mean the replica is offline.
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            return self._become(tp, state, leaders, now_ms)
        except KafkaStorageError as e:
            # The log directory failed under this very change; its handler takes it offline.
            log.warning("LeaderAndIsr for %s: %s", tp, e.message)
            return ErrorCode.KAFKA_STORAGE_ERROR

    def _become(
        self, tp: TopicPartition, state: LeaderAndIsrPartitionState, leaders: dict[int, Endpoint], now_ms: int
    ) -> ErrorCode:
        current = self.state.partitions.get(tp)
        held_epoch = -1 if current is None else current.leader_epoch
        if state.leader_epoch <= held_epoch and not _names_the_awaited_leader(current, state, leaders):
            # Expected in bulk after a failover (Kafka resends every state); one summary line
            # per request says how many were refused.
            log.debug(
                "ignoring LeaderAndIsr for %s: leader epoch %d is not newer than %d",
                tp,
                state.leader_epoch,
                held_epoch,
            )
            return ErrorCode.FENCED_LEADER_EPOCH
        if self.state.broker_id not in state.replicas:
            log.debug(
                "ignoring LeaderAndIsr for %s: broker %d is not among replicas %s",
                tp,
                self.state.broker_id,
                state.replicas,
            )
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if current is not None and state.partition_epoch < current.partition_epoch:
            # Kafka's makeLeader/makeFollower skip an older partition epoch but answer NONE.
            return ErrorCode.NONE
        role = Role.LEADER if state.leader == self.state.broker_id else Role.FOLLOWER
        if current is not None and current.role is Role.FOLLOWER:
            self.state.fetch_targets.unfollow(current.leader, tp)
        existing_log = current.log if current is not None else self.state.logs.get(tp)
        if current is not None:
            high_watermark = current.high_watermark
        else:
            high_watermark = self.state.logs.checkpointed_high_watermark(tp)
        partition = Partition(
            tp if current is None else current.tp,
            role,
            state.leader,
            state.leader_epoch,
            self.state.metadata.shared_ids(state.isr),
            state.partition_epoch,
            self.state.metadata.shared_ids(state.replicas),
            tuple(state.adding_replicas) if state.adding_replicas else (),
            tuple(state.removing_replicas) if state.removing_replicas else (),
            state.controller_epoch,
            existing_log,
            high_watermark,
        )
        if existing_log is not None:
            partition.high_watermark = min(high_watermark, existing_log.log_end_offset)
        self.state.partitions[tp] = partition
        if role is Role.LEADER:
            self._make_leader(partition, now_ms)
        else:
            self._make_follower(partition, leaders.get(state.leader))
        return ErrorCode.NONE

    def _make_leader(self, partition: Partition, now_ms: int) -> None:
        # Without a log yet, the epoch starts where the log is made (`ReplicaState.log_of`).
        partition.leader_epoch_start_offset = 0
        if partition.log is not None:
            self.state.start_leader_epoch(partition, partition.log)
        partition.reset_followers(now_ms)
        # Fetch sessions opened before this order answered an error for it: answer again.
        self.state.wake_readers(partition.tp)
        if partition.log is not None:
            self.state.advance_high_watermark(partition)

    def _make_follower(self, partition: Partition, leader: Endpoint | None) -> None:
        if partition.log is not None:
            partition.needs_truncation = partition.log.latest_epoch >= 0
            if not partition.needs_truncation:
                # No epochs to compare: only what is committed is known to agree.
                partition.log.truncate_to(partition.high_watermark)
        if leader is not None:
            self.state.fetch_targets.follow(
                partition.leader, leader, partition.tp, truncate_first=partition.needs_truncation
            )
        elif partition.leader >= 0:  # -1: no leader, nothing to wait for
            # Kafka's makeFollowers leaves a partition whose new leader is not alive untouched,
            # so a later LeaderAndIsr at the same leader epoch still applies. This one takes the
            # new state (it stops leading or following the old leader now) and, for the same
            # reason, takes that leader epoch again from an order that names the leader live.
            partition.leader_unavailable = True
        self.state.fail_produce_waiters(partition.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.state.wake_readers(partition.tp)

    # --- StopReplica (spec §9.2) ---

    def stop_replicas(self, request: StopReplicaRequest, broker_epoch: int) -> StopReplicaResponse:
        refusal = self._refusal(
            "StopReplica", request.controller_id, request.controller_epoch, request.broker_epoch, broker_epoch
        )
        if refusal is not None:
            return StopReplicaResponse(
                error_code=refusal, error_message=f"{refusal.name} from controller {request.controller_id}"
            )
        self.state.controller_epoch = request.controller_epoch
        errors = []
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            hosted = self.state.partitions.get(tp)
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
                    self.state.fetch_targets.unfollow(hosted.leader, tp)
            self.state.fail_produce_waiters(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.state.wake_readers(tp)
            if item.delete_partition:
                self.state.partitions.pop(tp, None)
                try:
                    self.state.logs.delete(tp)
                except OSError as e:
                    # This replica's deletion fails; the controller retries it later.
                    log.error("cannot delete the log of %s: %s", tp, e)
                    errors.append(_error(item.topic, item.partition, ErrorCode.KAFKA_STORAGE_ERROR))
                    continue
            errors.append(_error(item.topic, item.partition, ErrorCode.NONE))
        deleted = {item.topic for item in request.partitions if item.delete_partition}
        if deleted:
            deleted -= {tp.topic for tp in self.state.partitions}
            for topic in deleted:
                self.state.stats.forget_topic(topic)
        return StopReplicaResponse(partition_errors=errors)

    # --- UpdateMetadata (spec §9.3) ---

    def update_metadata(self, request: UpdateMetadataRequest, broker_epoch: int) -> UpdateMetadataResponse:
        refused = self._refused_update_metadata(request, broker_epoch)
        if refused is not None:
            return refused
        was_live = self.state.metadata.live_broker_epochs()
        self.state.metadata.update(request)
        return self._metadata_updated(request, was_live)

    async def _update_metadata_in_slices(
        self, request: UpdateMetadataRequest, broker_epoch: int
    ) -> UpdateMetadataResponse:
        """The same, the loop turning between slices of the partition states (actors/base/loop_slices.py)."""
        refused = self._refused_update_metadata(request, broker_epoch)
        if refused is not None:
            return refused
        was_live = self.state.metadata.live_broker_epochs()
        self.state.metadata.take_brokers(request)
        async for states in sliced(request.partition_states):
            self.state.metadata.take_states(states)
        return self._metadata_updated(request, was_live)

    def _refused_update_metadata(
        self, request: UpdateMetadataRequest, broker_epoch: int
    ) -> UpdateMetadataResponse | None:
        refusal = self._refusal(
            "UpdateMetadata",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            broker_epoch,
        )
        if refusal is None:
            return None
        return UpdateMetadataResponse(
            error_code=refusal, error_message=f"{refusal.name} from controller {request.controller_id}"
        )

    def _metadata_updated(
        self, request: UpdateMetadataRequest, was_live: dict[int, int]
    ) -> UpdateMetadataResponse:
        self.state.controller_epoch = request.controller_epoch
        live = self.state.metadata.live_broker_epochs()
        if any(was_live.get(broker_id) != epoch for broker_id, epoch in live.items()):
            # A follower that caught up while its broker (at this broker epoch) was not yet
            # known live here was not let into the ISR, and its fetches no longer name the
            # partition: look again.
            self.leader_path.expand_caught_up_followers()
        return UpdateMetadataResponse()


def _names_the_awaited_leader(
    current: Partition | None, state: LeaderAndIsrPartitionState, leaders: dict[int, Endpoint]
) -> bool:
    """Whether `state` is the leader epoch a follower holds without fetching (its leader was
    not live when it came), now with that leader live: taken again, not fenced as not newer."""
    return (
        current is not None
        and current.leader_unavailable
        and state.leader_epoch == current.leader_epoch
        and state.leader == current.leader
        and state.leader in leaders
    )


_make_partition_error = PartitionError.make


def _error(topic: str, partition: int, code: ErrorCode) -> PartitionError:
    # One per partition of a LeaderAndIsr of up to 100k: built without the dataclass constructor.
    return _make_partition_error(topic, partition, int(code))
