"""The replica manager actor: applies the controller's orders on one broker (spec §9).

It owns the newest controller epoch this broker has seen (shared by LeaderAndIsr,
StopReplica and UpdateMetadata, as in Kafka), the partitions the broker hosts, and the
metadata cache. Every order is checked before anything changes: a stale broker epoch or
controller epoch fails the whole request; then each partition stands or falls on its own
leader epoch. A refused order changes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import logging

from actors.broker.metadata_cache import MetadataCache
from actors.broker.partition import Partition, Role, TopicPartition
from actors.runtime import Actor, ActorHandle
from wire.api import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

# StopReplica leader epochs that always pass: -1 unknown, -2 the topic is being deleted.
_UNCHECKED_LEADER_EPOCHS = (-1, -2)


@dataclasses.dataclass(frozen=True)
class ControlRequest:
    """A controller request together with this broker's current broker epoch."""

    request: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
    broker_epoch: int


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A copy of the state, for Metadata and for tests."""

    controller_epoch: int
    partitions: dict[TopicPartition, Partition]
    metadata: MetadataCache


ReplicaMessage = ControlRequest | MetadataRequest | None


class ReplicaManager(Actor[ReplicaMessage]):
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata = MetadataCache()

    async def receive(self, message: ReplicaMessage) -> object:
        match message:
            case ControlRequest(request=LeaderAndIsrRequest() as request, broker_epoch=epoch):
                return self.become_leader_or_follower(request, epoch)
            case ControlRequest(request=StopReplicaRequest() as request, broker_epoch=epoch):
                return self.stop_replicas(request, epoch)
            case ControlRequest(request=UpdateMetadataRequest() as request, broker_epoch=epoch):
                return self.update_metadata(request, epoch)
            case MetadataRequest(topics=topics):
                return dataclasses.replace(
                    self.metadata.describe(topics), controller_epoch=self.controller_epoch
                )
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
        codes = [self._apply(s) for s in request.partition_states]
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
        errors = [
            _error(s.topic, s.partition, code)
            for s, code in zip(request.partition_states, codes, strict=True)
        ]
        return LeaderAndIsrResponse(partition_errors=errors)

    def _apply(self, state: LeaderAndIsrPartitionState) -> ErrorCode:
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
        self.partitions[tp] = Partition(
            tp=tp,
            role=role,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=tuple(state.isr),
            partition_epoch=state.partition_epoch,
            replicas=tuple(state.replicas),
            adding_replicas=tuple(state.adding_replicas),
            removing_replicas=tuple(state.removing_replicas),
            controller_epoch=state.controller_epoch,
        )
        return ErrorCode.NONE

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
            if item.delete_partition:
                # No log yet: deleting the partition drops its state.
                self.partitions.pop(tp, None)
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


def _error(topic: str, partition: int, code: ErrorCode) -> PartitionError:
    return PartitionError(topic=topic, partition=partition, error_code=int(code))


class ReplicaManagerHandle(ActorHandle[ReplicaMessage]):
    """Typed entry points; each request is applied whole, one at a time, on the actor's task."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(ReplicaManager(broker_id), name=f"replica-manager-{broker_id}")

    async def leader_and_isr(self, request: LeaderAndIsrRequest, broker_epoch: int) -> LeaderAndIsrResponse:
        response = await self.ask(ControlRequest(request, broker_epoch))
        assert isinstance(response, LeaderAndIsrResponse)
        return response

    async def stop_replica(self, request: StopReplicaRequest, broker_epoch: int) -> StopReplicaResponse:
        response = await self.ask(ControlRequest(request, broker_epoch))
        assert isinstance(response, StopReplicaResponse)
        return response

    async def update_metadata(
        self, request: UpdateMetadataRequest, broker_epoch: int
    ) -> UpdateMetadataResponse:
        response = await self.ask(ControlRequest(request, broker_epoch))
        assert isinstance(response, UpdateMetadataResponse)
        return response

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        response = await self.ask(request)
        assert isinstance(response, MetadataResponse)
        return response

    async def snapshot(self) -> Snapshot:
        snapshot = await self.ask(None)
        assert isinstance(snapshot, Snapshot)
        return snapshot
