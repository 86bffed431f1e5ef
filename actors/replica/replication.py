"""Values the replica manager hands out for replication: its settings, what to fetch next,
the outcomes of a produce or a read that the handle may have to wait on, and the effects it
asks of the world around it."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Protocol

from actors.base.ports import TopicPartition
from actors.replica.partition import PendingIsr
from wire.api import FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest, ProducePartitionResponse
from wire.endpoint import Endpoint
from wire.errors import ErrorCode


@dataclasses.dataclass(frozen=True)
class ReplicationConfig:
    """Kafka's `replica.*` settings (milliseconds and bytes)."""

    lag_time_max_ms: int = 30_000
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1_048_576
    fetch_response_max_bytes: int = 10_485_760
    fetch_backoff_ms: int = 1_000
    # Kafka's broker `fetch.max.bytes`: the most one Fetch answer carries, whatever its
    # `max_bytes` asks (the first batch still goes whole).
    answer_max_bytes: int = 57_671_680
    # The listener (name, security protocol) a follower reaches its leader on: LeaderAndIsr
    # names the leader's host and port on it (Kafka's inter.broker.listener.name).
    inter_broker_listener: tuple[str, str] = ("PLAINTEXT", "PLAINTEXT")


@dataclasses.dataclass(frozen=True)
class FetchPlan:
    """One request a fetcher is to send to a leader. For epoch end offsets, the leader epoch of
    each partition asked about: an answer for one whose epoch has moved on is dropped. (Fetch
    answers are matched against the fetch session instead.)"""

    endpoint: Endpoint
    leader_epochs: dict[TopicPartition, int]
    fetch_request: FetchRequest | None = None
    epoch_request: OffsetsForLeaderEpochRequest | None = None


@dataclasses.dataclass
class ProduceOutcome:
    """Per-partition answers in request order; acks=all appends wait on `waiting`, and an
    append that set off a flush on `flushing`."""

    answers: dict[TopicPartition, ProducePartitionResponse] = dataclasses.field(default_factory=dict)
    waiting: dict[TopicPartition, asyncio.Future[ErrorCode]] = dataclasses.field(default_factory=dict)
    # Appends that set off a flush (flush.messages): answered once it is on disk.
    flushing: dict[TopicPartition, asyncio.Future[ErrorCode]] = dataclasses.field(default_factory=dict)

    def add(self, tp: TopicPartition, answer: ProducePartitionResponse) -> None:
        self.answers[tp] = answer


@dataclasses.dataclass
class ReadOutcome:
    response: FetchResponse
    bytes_read: int
    # Set when the read found less than min_bytes: fires when one of its partitions changes.
    waiter: asyncio.Future[None] | None = None
    # The fetch session to reread when the waiter fires (0: reread the request itself).
    session_id: int = 0
    # Set when the leader quota held a throttled partition back: seconds until it frees.
    retry_s: float | None = None


class ReplicationEffects(Protocol):
    """What the replica manager asks of the world around it, given to it when it is made. It
    calls these on its own task and does not wait: the broker's handle performs them with
    tasks (a fetcher per leader, the AlterPartition sender); a test records them."""

    def start_fetcher(self, source: int) -> None:
        """Fetch from the leader `source` (a no-op while a fetcher for it runs)."""

    def propose_isr(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        """Send an ISR change to the controller; its answer comes back as IsrChangeAnswered."""

    def report_offline_replicas(self) -> None:
        """Tell the controller that replicas here went offline (a log directory failed, or a
        leader's log holds a damaged batch): Kafka writes a log-dir event notification, and
        the controller then resends LeaderAndIsr, which such replicas answer with
        KAFKA_STORAGE_ERROR (spec §7.11)."""


class NoReplication:
    """A broker that does not replicate: no fetchers, no ISR changes sent (tests, benchmarks of
    the control path)."""

    def start_fetcher(self, source: int) -> None:
        pass

    def propose_isr(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        pass

    def report_offline_replicas(self) -> None:
        pass
