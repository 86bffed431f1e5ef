"""Ports: the interfaces through which actors reach ZooKeeper and other brokers.

`ClusterStore` is the controller's view of ZooKeeper, phrased in Kafka's terms
(KafkaZkClient's operations) rather than in znodes, so the controller reads like
KafkaController. `node.zk.store.ZkClusterStore` implements it over aiozk; the unit tests'
in-memory fake implements it too, and both pass the contract suite in
`tests/contract/test_cluster_store.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import NamedTuple, Protocol

from wire.api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode


class ControllerMovedError(Exception):
    """A write fenced by `/controller_epoch`'s version found it moved: another controller
    was elected since. The caller must resign (spec §2.4)."""


class BrokerIdTakenError(Exception):
    """`/brokers/ids/<id>` belongs to another live session."""


class SessionExpiredError(Exception):
    """The ZooKeeper session a call was made on expired before the call was answered: what
    it would have done in that session (an ephemeral it would have owned) was not done. The
    new session's watchers redo what must be redone (spec §2.5), so a caller only gives up."""


@dataclasses.dataclass(frozen=True)
class ControllerEpoch:
    """The controller epoch and the ZooKeeper data version of `/controller_epoch` that
    holds it; the version fences every later write of this controller."""

    epoch: int
    zk_version: int


@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration: what `/brokers/ids/<id>` holds."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint_for(self, listener: str) -> Endpoint | None:
        """The endpoint of the named listener, if the broker has it (Kafka's
        `Broker.endPoint(listenerName)`)."""
        return next((e for e in self.endpoints if e.listener == listener), None)


@dataclasses.dataclass(frozen=True)
class RegisteredBroker:
    info: BrokerInfo
    # The czxid of the broker's znode: it changes with every registration.
    broker_epoch: int


class ControllerWatcher(Protocol):
    """Told about `/controller` changes. Implementations only enqueue events."""

    def controller_changed(self) -> None: ...

    def controller_deleted(self) -> None: ...


class SessionWatcher(Protocol):
    """Told when the ZooKeeper session expired and a new one replaced it (spec §2.5)."""

    async def before_new_session(self) -> None:
        """Called first; returns once everything queued before it is drained."""

    def after_new_session(self) -> None: ...


class TopicPartition(NamedTuple):
    """A NamedTuple rather than a dataclass: brokers build one per partition state in every
    LeaderAndIsr, and a tuple is several times cheaper to create and hash."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's full replica list, and which of them a reassignment adds or removes."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    # --- reassignment (spec §4.3; KIP-455) ---

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment (RS minus AR)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment completes (RS minus RR)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        """The full assignment of a reassignment from the origin to `target`: the target
        replicas first, then the origin replicas not in it. Reassigning to the current target
        changes nothing; reassigning to the origin restores the plain origin assignment."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding if r != replica),
            tuple(r for r in self.removing if r != replica),
        )


@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    """What `/brokers/topics/<T>` holds."""

    topic: str
    partitions: dict[int, ReplicaAssignment]
    topic_id: str | None = None


class LeaderAndIsr(NamedTuple):
    """A partition's leadership as written to its state znode. (NamedTuples here and below:
    a failover builds one per partition, and they are several times cheaper than frozen
    dataclasses.)"""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    # The state znode's data version: the partition epoch.
    partition_epoch: int = 0
    recovering: bool = False

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """The next state: every change of leader or ISR by the controller bumps the epoch."""
        return self._replace(leader=leader, isr=isr, leader_epoch=self.leader_epoch + 1)


class LeadershipInfo(NamedTuple):
    leader_and_isr: LeaderAndIsr
    # The epoch of the controller that wrote this state.
    controller_epoch: int


class TopicExistsError(Exception):
    """`/brokers/topics/<T>` exists already."""


class PartitionStateConflict(Exception):
    """A state znode's version moved under a conditional write: re-read and retry."""


class UnknownTopicError(Exception):
    """`/brokers/topics/<T>` does not exist."""


class TopicVersionConflict(Exception):
    """`/brokers/topics/<T>` changed since it was read (BADVERSION): re-read and re-check."""


class TopicAlreadyMarkedForDeletionError(Exception):
    """`/admin/delete_topics/<T>` exists already."""


class TopicDeletionWatcher(Protocol):
    """Told when `/admin/delete_topics` children change. Implementations only enqueue."""

    def topic_deletions_changed(self) -> None: ...


class ClusterWatcher(Protocol):
    """Told about broker and topic changes under ZooKeeper. Implementations only enqueue.
    Each watch fires once per arming (a read with `watch`), and a session hears of a change
    it watches before the answer to its own write that made it and before any later answer."""

    def brokers_changed(self) -> None: ...

    def broker_modified(self, broker_id: int) -> None: ...

    def topics_changed(self) -> None: ...

    def topic_modified(self, topic: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class ControllerView:
    controller_id: int | None
    epoch: ControllerEpoch | None


class ReassignmentWatcher(Protocol):
    """Told when `/admin/reassign_partitions` is created (creation only, spec §3.2), once per
    arming read; the node's rewrites and deletion do not use the watch up. Implementations
    only enqueue."""

    def partition_reassignment_created(self) -> None: ...


class TopicAdminStore(Protocol):
    """The admin's writes of topics, as Kafka's AdminZkClient makes them; the controller
    picks each up from its watches."""

    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str]) -> None:
        """The topic's config, then its assignment; TopicExistsError when it exists."""
        ...

    async def topic_assignment_and_version(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """The assignment and its version, for a conditional `add_partitions`; None when
        the topic does not exist."""
        ...

    async def add_partitions(self, assignment: TopicAssignment, expected_version: int = -1) -> None:
        """The assignment with its new partitions, conditional on `expected_version` (-1:
        any); UnknownTopicError, or TopicVersionConflict when it changed since read."""
        ...

    async def mark_topic_for_deletion(self, topic: str) -> None:
        """UnknownTopicError, or TopicAlreadyMarkedForDeletionError when marked already."""
        ...


class BrokerRegistry(Protocol):
    """The brokers' registrations under `/brokers/ids` (spec §2.1): each broker makes its own;
    the controller, the handlers, the planner and the console read them."""

    async def register_broker(self, info: BrokerInfo) -> int:
        """Checked ephemeral create of `/brokers/ids/<id>`; returns the broker epoch.
        Raises BrokerIdTakenError if another live session holds the id."""
        ...

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        """Every registered broker; `watch` arms the `/brokers/ids` children watch."""
        ...

    async def registered_broker(self, broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        """One broker's registration, or None; `watch` arms its data watch (broker_modified)
        as `getData` does: not on a broker that is not registered, and its deletion uses the
        watch up unreported (`/brokers/ids` reports registrations and their end)."""
        ...


class PartitionChange(NamedTuple):
    """One partition's state in a controller's change record (docs/STANDBY.md)."""

    tp: TopicPartition
    # The state znode's version before the write; -1 where the write created it, or deleted
    # it (a topic's deletion removes its znodes at whatever version).
    before: int
    # The state as written, its partition epoch the znode's version after the write; None
    # where the write deleted it.
    after: LeadershipInfo | None


class ChangeRecord(NamedTuple):
    controller_epoch: int
    changes: tuple[PartitionChange, ...]
    # The topics whose assignment (replicas, adding, removing) the write set: brokers were
    # told of it, so a new controller tells them again unless it was acknowledged.
    topics: tuple[str, ...] = ()

    @property
    def starts_epoch(self) -> bool:
        """The record that a controller writes as it is elected, changing nothing, to say
        that it records its changes (a controller with records off writes none, and a view
        that sees an epoch go by without one cannot be trusted past it)."""
        return not self.changes and not self.topics


class AcknowledgedChanges(NamedTuple):
    """A controller's mark of what every live broker has been told and answered
    (docs/STANDBY.md, "Sending only what changed"): every change record up to `sequence`
    under the records' parent of `generation`, with the brokers live then (id -> broker
    epoch). A new controller resends only what the records after it changed, and everything
    to a broker not among these at the same epoch."""

    controller_epoch: int
    generation: int
    sequence: int
    brokers: dict[int, int]


class ChangeRecordWatcher(Protocol):
    def change_records_changed(self) -> None:
        """A record was written or deleted (the children watch on the records' parent)."""
        ...


class ClusterStore(BrokerRegistry, Protocol):
    """What the controller reads and writes in ZooKeeper: the registry, with its data watches
    reporting to the cluster watcher, and the rest of the cluster's state."""

    async def controller_id(self) -> int | None:
        """The active controller's id, or None; re-arms the `/controller` watch."""
        ...

    async def controller_epoch(self) -> ControllerEpoch | None: ...

    async def read_controller(self) -> ControllerView:
        """Who holds `/controller` and the epoch, re-arming the watch as `exists` does (it
        fires at a creation too). `/controller` is read before `/controller_epoch`, so the
        epoch is never older than the controller named; a newer one means a newer
        controller, which the watch reports."""
        ...

    async def register_controller_and_increment_epoch(
        self, broker_id: int, seen: ControllerEpoch | None = None
    ) -> ControllerEpoch:
        """Create ephemeral `/controller` and bump `/controller_epoch` in one multi-op
        (spec §2.2 step 2), conditional on the epoch's version: `seen` if the caller has just
        read it, else read now. Raises ControllerMovedError if another broker won."""
        ...

    async def delete_controller(self, epoch_zk_version: int) -> None:
        """Delete `/controller`, fenced by the epoch version; raises ControllerMovedError."""
        ...

    async def topics(self, *, watch: bool = False) -> set[str]:
        """Every topic; `watch` arms the `/brokers/topics` children watch."""
        ...

    # The controller's change records (docs/STANDBY.md; actors/controller/standby.py reads
    # them). With `change_records` on, each write of partition states records what it changed.
    change_records: bool

    async def start_change_records(self, controller_epoch: int, epoch_zk_version: int) -> None: ...

    async def change_records_epoch(self) -> int | None: ...

    async def change_records_generation(self) -> int | None: ...

    async def change_record_names(self, *, watch: bool = False) -> list[str]: ...

    async def change_records_named(self, names: list[str]) -> list[ChangeRecord | None]: ...

    def watch_change_records(self, watcher: ChangeRecordWatcher) -> None: ...

    # How many records this store has written: the controller marks what was acknowledged
    # only after new ones.
    records_written: int

    async def acknowledged_changes(self) -> AcknowledgedChanges | None:
        """The last controller's mark (None: none, cleared, or unreadable)."""
        ...

    async def mark_acknowledged(self, mark: AcknowledgedChanges | None, epoch_zk_version: int) -> None:
        """Write the mark, or clear it (None), fenced; raises ControllerMovedError."""
        ...

    async def topic_assignments(self, topics: set[str], *, watch: bool = False) -> dict[str, TopicAssignment]:
        """Assignments of these topics, read pipelined; `watch` arms each topic's data watch
        as `registered_broker` does a registration's: only on the topics found."""
        ...

    async def topic_configs(self, topics: set[str]) -> dict[str, dict[str, str]]:
        """Per-topic config overrides (`/config/topics/<T>`), read pipelined."""
        ...

    async def partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeadershipInfo]:
        """The state znodes that exist among these, read pipelined."""
        ...

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Create state znodes (and their parents), fenced; per partition the state written,
        with its partition epoch, or the error (e.g. it exists already)."""
        ...

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Conditional sets of state znodes, fenced: each expects the `partition_epoch` it
        carries. Per partition the state written with its new partition epoch, or
        PartitionStateConflict (re-read and retry), or another error."""
        ...

    # --- topic deletion and partition expansion (spec §7.5, §7.6) ---

    async def topics_to_delete(self, *, watch: bool = False) -> set[str]:
        """Topics marked under `/admin/delete_topics`; `watch` arms its children watch."""
        ...

    async def delete_topic_deletions(self, topics: set[str], epoch_zk_version: int) -> None:
        """Delete these `/admin/delete_topics/<T>` markers, fenced; missing ones are fine."""
        ...

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        """Delete `/brokers/topics/<T>` recursively, `/config/topics/<T>` and
        `/admin/delete_topics/<T>`, fenced (KafkaZkClient.deleteTopic)."""
        ...

    async def topic_partition_ids(self, topic: str) -> set[int]:
        """The partitions with a node under `/brokers/topics/<T>/partitions`."""
        ...

    async def set_topic_assignment(self, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        """Rewrite `/brokers/topics/<T>`, fenced."""
        ...

    def watch_topic_deletions(self, watcher: TopicDeletionWatcher) -> None: ...

    # --- partition reassignment (spec §1, §7.7) ---

    async def partition_reassignments(
        self, *, watch: bool = False
    ) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The target replicas in `/admin/reassign_partitions`, or None when it does not exist;
        `watch` arms its creation watch. Unreadable content is read as empty, with a warning."""
        ...

    async def set_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]], epoch_zk_version: int
    ) -> None:
        """Rewrite `/admin/reassign_partitions`, fenced; an empty map deletes it."""
        ...

    async def create_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        """What the legacy admin tool does: create `/admin/reassign_partitions` (unfenced).
        Raises FileExistsError while a reassignment through it is in progress."""
        ...

    async def set_partition_assignments(
        self, topic: str, partitions: dict[int, ReplicaAssignment], epoch_zk_version: int
    ) -> None:
        """Replace these partitions' full assignments (RS, AR, RR) in `/brokers/topics/<T>`,
        fenced, keeping its other partitions and its topic id."""
        ...

    def watch_reassignments(self, watcher: ReassignmentWatcher) -> None: ...

    def watch_cluster(self, watcher: ClusterWatcher) -> None: ...

    def watch_controller(self, watcher: ControllerWatcher) -> None: ...

    def watch_session(self, watcher: SessionWatcher) -> None: ...

    # --- preferred replica election (spec §7.8) ---

    async def preferred_replica_election(self) -> list[TopicPartition] | None:
        """The partitions `/admin/preferred_replica_election` names, or None when it is
        absent. Arms the exists watch either way, so that a creation is reported. Content
        Kafka would not have written reads as no partitions, with a warning."""
        ...

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        """Delete `/admin/preferred_replica_election`, fenced by the epoch version (already
        gone is fine); raises ControllerMovedError."""
        ...

    def watch_preferred_replica_election(self, watcher: PreferredReplicaElectionWatcher) -> None: ...

    # --- log-dir failures (spec §7.11) ---

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """A broker's own notification that replicas on it went offline: a sequential
        `/log_dir_event_notification/log_dir_event_<seq>` naming it (unfenced)."""
        ...

    async def log_dir_events(self, *, watch: bool = False) -> dict[str, int | None]:
        """Each notification's name and the broker it names (None if unreadable); `watch`
        arms the children watch."""
        ...

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        """Delete these notifications, fenced; ones already gone are fine."""
        ...

    def watch_log_dir_events(self, watcher: LogDirEventWatcher) -> None: ...


class LogDirEventWatcher(Protocol):
    """Told when `/log_dir_event_notification` children change. Implementations only enqueue."""

    def log_dir_events_changed(self) -> None: ...


class PreferredReplicaElectionWatcher(Protocol):
    """Told when `/admin/preferred_replica_election` is created, once per arming read; its
    deletion does not use the watch up. Implementations only enqueue."""

    def preferred_replica_election_created(self) -> None: ...


ResponseCallback = Callable[[Response], None]


class BrokerChannel(Protocol):
    """The controller's requests to brokers (Kafka's ControllerChannelManager): one FIFO per
    broker, one request in flight at a time, each retried until it is answered or the broker
    is removed. Callbacks run when an answer arrives and must only enqueue."""

    def add_broker(self, broker: RegisteredBroker) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send(self, broker_id: int, request: Request, on_response: ResponseCallback | None = None) -> None:
        """Queue a request; one for a broker without a channel is dropped with a warning."""
        ...

    @property
    def total_queue_size(self) -> int:
        """Requests not yet answered, over every broker (Kafka's TotalQueueSize)."""
        ...

    async def close(self) -> None:
        """Stop every sender and drop what is queued."""
        ...


# --- the replicated log (ports the replica manager reaches storage and other brokers by) ---


class LogCorruption(Exception):
    """A record batch on disk fails its CRC (or its header makes no sense): the log is whole
    only below `offset`. Never served; a follower truncates there and fetches again, a
    leader's replica goes offline."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class PartitionLog(Protocol):
    """One partition's log; `node.broker.log.log.Log` implements it on files. Appends raise
    CorruptMessage or MessageTooLarge (and, as a leader, InvalidRecord or
    UnsupportedCompressionType: node/broker/log/validator.py) and append nothing; reads raise
    OffsetOutOfRange or
    LogCorruption. Any operation raises KafkaStorageError once the log's directory is
    offline (an I/O error there)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def latest_epoch(self) -> int: ...

    @property
    def min_insync_replicas(self) -> int: ...

    def append_as_leader(self, data: bytes, leader_epoch: int) -> tuple[int, int]:
        """Stamp offsets and the epoch, append; the first and last offsets given."""
        ...

    def append_as_follower(self, data: bytes) -> int: ...

    def flush_waiter(self, offset: int) -> asyncio.Future[ErrorCode] | None:
        """A future done (with the answer's error code) once the log is on disk up to
        `offset`, when the append that reached it set off a flush (`flush.messages`); None
        when nothing is to be waited for."""
        ...

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes: ...

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after `offset`, and every leader-epoch entry from the log end
        on, even when no batch goes (Kafka's truncateTo)."""

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def advance_log_start_offset(self, offset: int) -> bool:
        """Records below `offset` gone for readers (DeleteRecords, or a leader's log start
        seen by its follower); never back, never past the log end; whether it moved."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) per Kafka's OffsetsForLeaderEpoch; (-1, -1) when unknown."""
        ...

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record in the leader-epoch cache that `epoch` starts at `start_offset` (Kafka's
        maybeAssignEpochStartOffset), before any batch of that epoch is written."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or after `timestamp`."""
        ...

    def offset_for_max_timestamp(self) -> tuple[int, int, int] | None:
        """The same of the first record with the log's largest timestamp (KIP-734)."""
        ...

    def size_from(self, offset: int) -> int:
        """Bytes from the batch holding `offset` to the log end (the whole log below its start)."""
        ...

    def scrub(self, max_bytes: int) -> int:
        """Check the CRC of about `max_bytes` of batches from where the last scrub stopped
        (wrapping to the log start); the bytes checked. Raises LogCorruption."""
        ...

    @property
    def scrubbed_to_end(self) -> bool:
        """Whether the last scrub reached the log end (the next one starts over)."""
        ...


class LogStore(Protocol):
    """Every log on this broker and the high-watermark checkpoint (Kafka's LogManager)."""

    def get(self, tp: TopicPartition) -> PartitionLog | None: ...

    def get_or_create(self, tp: TopicPartition, topic_configs: dict[str, str]) -> PartitionLog: ...

    def delete(self, tp: TopicPartition) -> None:
        """Remove the log from disk; raises OSError when it cannot (the log stays known)."""
        ...

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int: ...

    async def checkpoint_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Write the checkpoint with `high_watermarks`, those that moved since the last one
        (the others as checkpointed, 0 for a log never checkpointed)."""
        ...


class ReplicaLink(Protocol):
    """A follower's requests to a partition leader, and a leader's to the controller. Each
    raises a WireError (NETWORK_EXCEPTION, REQUEST_TIMED_OUT...) when no answer comes."""

    async def fetch(self, leader: Endpoint, request: FetchRequest) -> FetchResponse: ...

    async def offsets_for_leader_epoch(
        self, leader: Endpoint, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse: ...

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """To the active controller, wherever it is."""
        ...
