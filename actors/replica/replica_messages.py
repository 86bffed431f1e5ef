"""The messages the replica manager actor takes, and the snapshot it gives. Each message
that is asked names the type of its answer (`Ask[R]`)."""

from __future__ import annotations

import dataclasses

from actors.admin.partition_limits import ReplicaCounts
from actors.base.runtime import Ask
from actors.replica.metadata_cache import MetadataCache
from actors.replica.partition import Partition, PendingIsr, TopicPartition
from actors.replica.replication import FetchPlan, ProduceOutcome, ReadOutcome
from wire.api import (
    AlterPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

# --- the controller's requests, each with this broker's current broker epoch ---


@dataclasses.dataclass(frozen=True)
class ApplyLeaderAndIsr(Ask[LeaderAndIsrResponse]):
    """With the configs of its topics (for the logs it may create)."""

    request: LeaderAndIsrRequest
    broker_epoch: int
    topic_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ApplyStopReplica(Ask[StopReplicaResponse]):
    request: StopReplicaRequest
    broker_epoch: int


@dataclasses.dataclass(frozen=True)
class ApplyUpdateMetadata(Ask[UpdateMetadataResponse]):
    request: UpdateMetadataRequest
    broker_epoch: int


# --- clients' and followers' requests ---


@dataclasses.dataclass(frozen=True)
class Produce(Ask[ProduceOutcome]):
    request: ProduceRequest


@dataclasses.dataclass(frozen=True)
class ListOffsets(Ask[ListOffsetsResponse]):
    request: ListOffsetsRequest


@dataclasses.dataclass(frozen=True)
class DeleteRecords(Ask[DeleteRecordsResponse]):
    request: DeleteRecordsRequest


@dataclasses.dataclass(frozen=True)
class LeaderEpochEnds(Ask[OffsetsForLeaderEpochResponse]):
    """An OffsetsForLeaderEpoch request (a follower's, or a client's)."""

    request: OffsetsForLeaderEpochRequest


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A copy of the state, for Metadata and for tests."""

    controller_epoch: int
    partitions: dict[TopicPartition, Partition]
    metadata: MetadataCache


@dataclasses.dataclass(frozen=True)
class TakeSnapshot(Ask[Snapshot]):
    """A copy of the state (for tests and observers)."""


@dataclasses.dataclass(frozen=True)
class Read(Ask[ReadOutcome]):
    """A Fetch; `wait` registers a future that fires when one of its partitions changes.
    `reread` names the fetch session of a long poll that woke up: only what changed since
    is answered, without a new session epoch."""

    request: FetchRequest
    wait: bool
    reread: int = 0
    # Who sent it (principal, connection): a fetch session is used only by who opened it.
    owner: tuple[str, int] = ("", 0)


@dataclasses.dataclass(frozen=True)
class PlanFetch(Ask[FetchPlan | None]):
    source: int
    # The broker's own epoch as its registration says now: a fetch carries it (KIP-903),
    # even before a controller's request has brought it.
    broker_epoch: int = -1


@dataclasses.dataclass(frozen=True)
class Fetched(Ask[bool]):
    """A fetch's answer, applied; True when the round failed (the fetcher backs off)."""

    source: int
    plan: FetchPlan
    response: FetchResponse


@dataclasses.dataclass(frozen=True)
class EpochEndsFetched(Ask[bool]):
    source: int
    plan: FetchPlan
    response: OffsetsForLeaderEpochResponse


@dataclasses.dataclass(frozen=True)
class IsrChangeAnswered:
    """Told, not asked: the controller's answer to an ISR change this broker proposed."""

    tp: TopicPartition
    proposal: PendingIsr
    result: AlterPartitionResult


@dataclasses.dataclass(frozen=True)
class Maintain(Ask[None]):
    """Periodic work: ISR expiration, and with `checkpoint` the high-watermark file."""

    checkpoint: bool = False
    shrink: bool = True


@dataclasses.dataclass(frozen=True)
class SetThrottles(Ask[None]):
    """Dynamic config changes for replication throttles: the two broker rates in bytes/s
    (None: unlimited) when `rates` is given, and the configs of topics that changed."""

    rates: tuple[int | None, int | None] | None = None
    topic_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class BytesToCopy(Ask[dict[TopicPartition, int]]):
    """Reassignment progress on the leader: bytes the adding replicas still lack, per
    partition, of these topics (None: all)."""

    topics: frozenset[str] | None = None


@dataclasses.dataclass(frozen=True)
class MetadataFor(Ask[MetadataResponse]):
    """A Metadata request as it came in on `listener`: the answer names each broker by its
    endpoint on that listener, and leaves out brokers without one (Kafka's behaviour; None:
    each broker's first endpoint)."""

    request: MetadataRequest
    listener: str | None = None


@dataclasses.dataclass(frozen=True)
class CountReplicas(Ask[ReplicaCounts]):
    """Partition replicas per broker, as this broker's metadata cache knows them."""


@dataclasses.dataclass(frozen=True)
class Scrub(Ask[None]):
    """Periodic work: check the CRC of about `max_bytes` of the hosted logs' batches."""

    max_bytes: int


@dataclasses.dataclass(frozen=True)
class LogDirFailed(Ask[None]):
    """A log directory went offline (an I/O error): these partitions' logs were in it."""

    partitions: tuple[TopicPartition, ...]


ReplicaMessage = (
    ApplyLeaderAndIsr
    | ApplyStopReplica
    | ApplyUpdateMetadata
    | MetadataFor
    | Produce
    | Read
    | ListOffsets
    | DeleteRecords
    | LeaderEpochEnds
    | PlanFetch
    | Fetched
    | EpochEndsFetched
    | IsrChangeAnswered
    | Maintain
    | SetThrottles
    | BytesToCopy
    | CountReplicas
    | Scrub
    | LogDirFailed
    | TakeSnapshot
)
