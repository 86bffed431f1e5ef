"""The controller's events: a closed set of frozen dataclasses (Kafka's ControllerEvent).

Each event names the ControllerState the controller is in while processing it. Events that
carry a caller's reply derive from `CallbackEvent`; when pre-empted by `clear_and_put` their
caller gets NOT_CONTROLLER, as Kafka's `preempt` answers, and the controller `fail`s any reply
that processing left unanswered.
"""

from __future__ import annotations

import asyncio
import dataclasses
from enum import Enum, IntEnum
from typing import ClassVar

from actors.base.ports import TopicPartition
from wire.api import AlterPartitionRequest, ControlledShutdownResponse, ElectionType
from wire.api.base import Response
from wire.errors import ErrorCode, NotController, WireError


class ControllerState(IntEnum):
    """Kafka's ControllerState bytes, exposed as the ControllerState metric."""

    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17


@dataclasses.dataclass(frozen=True)
class Event:
    state: ClassVar[ControllerState]

    def preempt(self) -> None:
        """Called instead of processing when `clear_and_put` drops this event."""
        self.fail(NotController(f"{type(self).__name__} pre-empted: controller moved"))

    def fail(self, error: WireError) -> None:
        """Answer the caller, if it waits and has no answer yet, with `error`: the event was
        pre-empted, or processing it raised or gave no answer."""


@dataclasses.dataclass(frozen=True)
class CallbackEvent(Event):
    reply: asyncio.Future[object] = dataclasses.field(compare=False, repr=False)

    def fail(self, error: WireError) -> None:
        if not self.reply.done():
            self.reply.set_exception(error)


@dataclasses.dataclass(frozen=True)
class Startup(Event):
    """Watch `/controller`, then elect."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclasses.dataclass(frozen=True)
class ControllerChange(Event):
    """`/controller` was created or changed: re-read it, maybe resign, and elect if it is
    gone again by then."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclasses.dataclass(frozen=True)
class Reelect(Event):
    """`/controller` was deleted: re-read it, maybe resign, and elect if it is still gone."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclasses.dataclass(frozen=True)
class Expire(Event):
    """The ZooKeeper session expired: resign, whatever this broker was."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclasses.dataclass(frozen=True)
class RegisterBrokerAndReelect(Event):
    """A new session exists: register the broker again (new broker epoch), then reelect."""

    state = ControllerState.CONTROLLER_CHANGE


@dataclasses.dataclass(frozen=True)
class ShutdownEventThread(Event):
    """Never processed; wakes the event loop so it can stop."""

    state = ControllerState.CONTROLLER_SHUTDOWN


@dataclasses.dataclass(frozen=True)
class BrokerChange(Event):
    """`/brokers/ids` children changed: brokers started, died or bounced."""

    state = ControllerState.BROKER_CHANGE


@dataclasses.dataclass(frozen=True)
class BrokerModifications(Event):
    """`/brokers/ids/<id>` data changed: the broker's endpoints or rack may differ."""

    state = ControllerState.BROKER_CHANGE
    broker_id: int


@dataclasses.dataclass(frozen=True)
class TopicChange(Event):
    """`/brokers/topics` children changed: topics created or deleted."""

    state = ControllerState.TOPIC_CHANGE


@dataclasses.dataclass(frozen=True)
class RetryPartitionInitialization(Event):
    """Partitions whose state znode could not be created are due to be tried again
    (actors/controller/initialization_retries.py); the controller knows which."""

    state = ControllerState.TOPIC_CHANGE


@dataclasses.dataclass(frozen=True)
class PartitionModifications(Event):
    """`/brokers/topics/<T>` data changed: partitions may have been added."""

    state = ControllerState.TOPIC_CHANGE
    topic: str


@dataclasses.dataclass(frozen=True)
class AlterPartitionReceived(CallbackEvent):
    """A partition leader's ISR change (spec §7.10); answered through `reply`."""

    state = ControllerState.ISR_CHANGE
    request: AlterPartitionRequest = dataclasses.field(kw_only=True)


class ElectionTrigger(Enum):
    """Who asked for a leader election (Kafka's ElectionTrigger)."""

    ZK_TRIGGERED = "zookeeper"
    ADMIN_CLIENT_TRIGGERED = "admin client"
    AUTO_TRIGGERED = "auto rebalance"


@dataclasses.dataclass(frozen=True)
class ReplicaLeaderElection(Event):
    """A preferred or unclean election (spec §7.8). `partitions` None: those named in
    `/admin/preferred_replica_election` (ZooKeeper-triggered), or every partition (admin).
    An admin election is answered through `reply` with a result per partition; when
    pre-empted, its caller gets NotController."""

    state = ControllerState.MANUAL_LEADER_BALANCE
    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType
    trigger: ElectionTrigger
    reply: asyncio.Future[object] | None = dataclasses.field(default=None, compare=False, repr=False)

    def fail(self, error: WireError) -> None:
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(error)


@dataclasses.dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(Event):
    """The auto-rebalance task is due (spec §7.8, `auto.leader.rebalance.enable`)."""

    state = ControllerState.AUTO_LEADER_BALANCE


@dataclasses.dataclass(frozen=True)
class TopicDeletion(Event):
    """`/admin/delete_topics` children changed: topics were marked for deletion (spec §7.6)."""

    state = ControllerState.TOPIC_DELETION


@dataclasses.dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived(Event):
    """A broker answered StopReplica with delete for replicas of topics being deleted: the
    top-level error, and the error of each of those partitions (spec §7.6)."""

    state = ControllerState.TOPIC_DELETION
    broker_id: int
    # The broker epoch the request was sent to.
    broker_epoch: int
    error_code: int
    partition_errors: tuple[tuple[TopicPartition, int], ...]


@dataclasses.dataclass(frozen=True)
class ZkPartitionReassignment(Event):
    """`/admin/reassign_partitions` was created (or must be re-watched): start what it asks."""

    state = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclasses.dataclass(frozen=True)
class ApiPartitionReassignment(CallbackEvent):
    """AlterPartitionReassignments: per partition the target replicas, None to cancel."""

    state = ControllerState.ALTER_PARTITION_REASSIGNMENT
    reassignments: dict[TopicPartition, tuple[int, ...] | None] = dataclasses.field(kw_only=True)


@dataclasses.dataclass(frozen=True)
class ListPartitionReassignments(CallbackEvent):
    """ListPartitionReassignments: these partitions, or every one (None) being reassigned."""

    state = ControllerState.LIST_PARTITION_REASSIGNMENT
    partitions: list[TopicPartition] | None = dataclasses.field(kw_only=True)


@dataclasses.dataclass(frozen=True)
class ControlledShutdown(CallbackEvent):
    """A broker asks to move its leaders away before it stops (spec §7.3); answered through
    `reply` with a ControlledShutdownResponse."""

    state = ControllerState.CONTROLLED_SHUTDOWN
    broker_id: int = dataclasses.field(kw_only=True)
    broker_epoch: int = dataclasses.field(kw_only=True)

    def fail(self, error: WireError) -> None:
        # Kafka answers a controlled shutdown the controller could not finish because it
        # moved (or was pre-empted) as ControllerMovedException: STALE_CONTROLLER_EPOCH.
        code = ErrorCode.STALE_CONTROLLER_EPOCH if isinstance(error, NotController) else error.error_code
        if not self.reply.done():
            self.reply.set_result(ControlledShutdownResponse(error_code=code, error_message=error.message))


@dataclasses.dataclass(frozen=True)
class LogDirEventNotification(Event):
    """`/log_dir_event_notification` children changed: brokers' log directories failed
    (spec §7.11)."""

    state = ControllerState.LOG_DIR_CHANGE


@dataclasses.dataclass(frozen=True)
class LeaderAndIsrResponseReceived(Event):
    """A broker answered LeaderAndIsr: its KAFKA_STORAGE_ERROR partitions are offline there
    (spec §7.11)."""

    state = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED
    broker_id: int
    response: Response = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class MarkAcknowledged(Event):
    """Time to mark what every live broker has answered (actors/controller/acknowledged.py).
    Kafka has no such event; its nearest state is that of brokers' answers arriving."""

    state = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED


ControllerEvent = (
    Startup
    | ControllerChange
    | Reelect
    | Expire
    | RegisterBrokerAndReelect
    | ShutdownEventThread
    | BrokerChange
    | BrokerModifications
    | TopicChange
    | PartitionModifications
    | RetryPartitionInitialization
    | AlterPartitionReceived
    | ReplicaLeaderElection
    | AutoPreferredReplicaLeaderElection
    | TopicDeletion
    | TopicDeletionStopReplicaResponseReceived
    | ZkPartitionReassignment
    | ApiPartitionReassignment
    | ListPartitionReassignments
    | ControlledShutdown
    | LogDirEventNotification
    | LeaderAndIsrResponseReceived
    | MarkAcknowledged
)
