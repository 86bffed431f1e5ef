"""The chaos workload's Kafka clients: aiokafka on the brokers' Kafka listeners. An idempotent
acks=all producer per partition of KAFKA_TOPIC writes unique values (each acknowledgement
recorded with its offset), and a consumer group of two members reads the topic and commits,
after each read, the offset after the last record it read of each partition (each read and
each successful commit recorded).

A member's reads are recorded under a reader name that changes with each assignment it is
given: a member that gets a partition back starts again at the group's last commit, which may
be below what it read before, and the per-reader monotonic-read check holds within one
assignment only. A client that fails is replaced by a new one (a new reader name, and for a
producer a new producer id), as the Keel consumer of the workload is."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

# aiokafka ships no type information (a test dependency, as kafka-python is).
from aiokafka import (  # type: ignore[import-untyped]
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    TopicPartition,
)
from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped]
from aiokafka.errors import CommitFailedError, KafkaTimeoutError  # type: ignore[import-untyped]

from node.chaos.cluster import ChaosCluster
from node.chaos.history import Ack, Commit, History, Read

KAFKA_TOPIC = "chaos-k"
GROUP = "chaos-group"
MEMBERS = 2
# Per partition: about ten sends a second over the three, a modest load beside Keel's clients.
SEND_INTERVAL_S = 0.3
# An idempotent aiokafka producer retries a batch for as long as its errors are retriable:
# one not answered within this bound counts as not acknowledged, and its producer is replaced.
SEND_BOUND_S = 15.0
COMMIT_BOUND_S = 15.0
# aiokafka's producer stop() cancels its sender and then awaits the produce requests it has in
# flight, and after a batch given up it can raise (a KeyError for a batch it removes from its
# pending set twice); a member's stop() leaves the group through a coordinator that may be
# under a fault. Past this bound, or on a raise, the client is left behind and a new one
# takes over, so that the partition's writes, or the member's reads, go on.
CLOSE_BOUND_S = 5.0
START_BOUND_S = 30.0
# How long getmany may wait for a rebalance to end before the loop looks at the stop flag.
POLL_BOUND_S = 2.0
RESTART_AFTER_S = 0.5
# The group's timeouts, short so that a member gone is noticed within a fault's length
# (6 s is the brokers' group.min.session.timeout.ms).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
REBALANCE_TIMEOUT_MS = 10000
REQUEST_TIMEOUT_MS = 10000
METADATA_MAX_AGE_MS = 5000
# Between two attempts to reach a broker: a killed broker is retried by five clients.
RETRY_BACKOFF_MS = 300


class _Assignments(ConsumerRebalanceListener):  # type: ignore[misc]
    """Counts a member's assignment changes: each revocation and each new assignment."""

    def __init__(self) -> None:
        self.changes = 0

    async def on_partitions_revoked(self, revoked: object) -> None:
        self.changes += 1

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.changes += 1


class KafkaClients:
    def __init__(
        self, cluster: ChaosCluster, history: History, clock: Callable[[], float], partitions: int
    ) -> None:
        self.cluster = cluster
        self.history = history
        self.now = clock
        self.partitions = partitions
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        # aiokafka logs every refused connection and failed request of a broker under a fault,
        # hundreds of lines per run; what matters to the run is recorded as its events.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        self.history.idempotent_topics.append(KAFKA_TOPIC)
        for p in range(self.partitions):
            self._tasks.append(asyncio.create_task(self._produce(p)))
        for m in range(1, MEMBERS + 1):
            self._tasks.append(asyncio.create_task(self._member(f"group-member-{m}")))

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    # --- the idempotent producer ---

    async def _produce(self, partition: int) -> None:
        serial = 0
        incarnation = 0
        while not self._stop.is_set():
            name = f"kafka-producer-{partition}#{incarnation}"
            producer = AIOKafkaProducer(
                bootstrap_servers=self.cluster.kafka_bootstrap,
                client_id=name,
                acks="all",
                enable_idempotence=True,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                metadata_max_age_ms=METADATA_MAX_AGE_MS,
                retry_backoff_ms=RETRY_BACKOFF_MS,
            )
            try:
                await asyncio.wait_for(producer.start(), START_BOUND_S)
                while not self._stop.is_set():
                    value = f"{KAFKA_TOPIC}-{partition}-{serial}"
                    serial += 1
                    await self._send(producer, partition, value)
                    await self._pause(SEND_INTERVAL_S)
            except Exception as e:
                self.history.event(self.now(), "kafka-producer-failed", f"{name}: {type(e).__name__}: {e}")
            finally:
                left = await _close_producer(producer)
                if left is not None:
                    self.history.event(self.now(), "kafka-producer-left", f"{name}: {left}")
            incarnation += 1
            await self._pause(RESTART_AFTER_S)

    async def _send(self, producer: AIOKafkaProducer, partition: int, value: str) -> None:
        """Send one value and record its acknowledgement; a failed send is counted as not
        acknowledged and raised, so that the next value goes through a new producer (a batch
        given up leaves a gap in this producer's sequence numbers that the broker refuses)."""
        self.history.sent += 1
        try:
            metadata = await asyncio.wait_for(
                producer.send_and_wait(KAFKA_TOPIC, value.encode(), partition=partition), SEND_BOUND_S
            )
        except Exception as e:
            self.history.indeterminate += 1
            why = (f"{KAFKA_TOPIC}-{partition}", type(e).__name__)
            self.history.send_failures[why] = self.history.send_failures.get(why, 0) + 1
            self.history.event(self.now(), "send-failed", f"{KAFKA_TOPIC}-{partition} (aiokafka): {e!r}")
            raise
        if metadata.offset < 0:
            # DUPLICATE_SEQUENCE_NUMBER: written, but the broker no longer knew where.
            self.history.indeterminate += 1
            self.history.event(self.now(), "ack-without-offset", f"{KAFKA_TOPIC}-{partition}: {value}")
            return
        self.history.acks.append(Ack(self.now(), KAFKA_TOPIC, metadata.partition, metadata.offset, value))

    # --- the consumer group ---

    async def _member(self, member: str) -> None:
        incarnation = 0
        while not self._stop.is_set():
            name = f"{member}#{incarnation}"
            assignments = _Assignments()
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.cluster.kafka_bootstrap,
                client_id=name,
                group_id=GROUP,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_TIMEOUT_MS,
                heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                metadata_max_age_ms=METADATA_MAX_AGE_MS,
                retry_backoff_ms=RETRY_BACKOFF_MS,
                fetch_max_wait_ms=300,
            )
            consumer.subscribe([KAFKA_TOPIC], listener=assignments)
            try:
                await asyncio.wait_for(consumer.start(), START_BOUND_S)
                while not self._stop.is_set():
                    await self._poll(consumer, assignments, name)
            except Exception as e:
                self.history.event(self.now(), "consumer-failed", f"{name}: {type(e).__name__}: {e}")
            finally:
                left = await _close_consumer(consumer)
                if left is not None:
                    self.history.event(self.now(), "kafka-consumer-left", f"{name}: {left}")
            incarnation += 1
            await self._pause(RESTART_AFTER_S)

    async def _poll(self, consumer: AIOKafkaConsumer, assignments: _Assignments, name: str) -> None:
        """One getmany: its records recorded, then committed."""
        try:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=300), POLL_BOUND_S)
        except TimeoutError:
            return  # a rebalance under way
        reader = f"{name}.{assignments.changes}"
        t = self.now()
        offsets: dict[TopicPartition, int] = {}
        for tp, records in batches.items():
            for r in records:
                value = (r.value or b"").decode(errors="replace")
                self.history.reads.append(Read(t, reader, tp.topic, tp.partition, r.offset, value))
            if records:
                offsets[tp] = records[-1].offset + 1
        if offsets:
            await self._commit(consumer, assignments, reader, offsets)

    async def _commit(
        self,
        consumer: AIOKafkaConsumer,
        assignments: _Assignments,
        reader: str,
        offsets: dict[TopicPartition, int],
    ) -> None:
        """Commit `offsets`, recorded when answered while the member still has the assignment
        it read them under. aiokafka retries a commit that failed retriably under whatever
        generation its member has by then, so one answered after a rebalance may be a stale
        member's commit taken under its new generation: not the group's guarantee, not
        counted on. A commit refused (the group rebalanced) or not answered in time is
        counted as failed; the member goes on."""
        changes = assignments.changes
        where = ", ".join(f"{tp.topic}-{tp.partition}@{o}" for tp, o in sorted(offsets.items()))
        try:
            await asyncio.wait_for(consumer.commit(offsets), COMMIT_BOUND_S)
        except (CommitFailedError, TimeoutError) as e:
            self.history.commits_failed += len(offsets)
            self.history.event(self.now(), "commit-failed", f"{reader} {where}: {type(e).__name__}")
            return
        if assignments.changes != changes:
            self.history.commits_failed += len(offsets)
            self.history.event(self.now(), "commit-after-rebalance", f"{reader} {where}")
            return
        t = self.now()
        for tp, offset in offsets.items():
            self.history.commits.append(Commit(t, reader, tp.topic, tp.partition, offset))


async def _close_producer(producer: AIOKafkaProducer) -> str | None:
    """Stop a producer without waiting for a batch it still retries (its idempotence never
    gives a retriable one up, and stop() waits for every batch): such a batch is failed first,
    as aiokafka fails them itself when its sender stops. Answers None once it stopped, or why
    it was left behind (see `_close`)."""
    producer._message_accumulator.fail_all(KafkaTimeoutError("the producer is stopped"))
    return await _close(producer.stop, producer.client)


async def _close_consumer(consumer: AIOKafkaConsumer) -> str | None:
    """Stop a group member (its coordinator leaves the group, which needs a broker that
    answers); None once it stopped, or why it was left behind (see `_close`)."""
    return await _close(consumer.stop, consumer._client)


async def _close(stop: Callable[[], Awaitable[None]], client: AIOKafkaClient) -> str | None:
    """Run an aiokafka client's stop(), bounded: None once it returned, or why the client was
    left behind (its connections closed): not stopped within CLOSE_BOUND_S, or what stop()
    raised, a CancelledError of aiokafka's own included. Nothing cancels the workload's tasks
    (they end on its stop event), and an exception out of here would end the producer's or
    member's task for good, its partition's writes or the member's reads with it."""
    try:
        await asyncio.wait_for(stop(), CLOSE_BOUND_S)
        return None
    except TimeoutError:
        why = f"not stopped within {CLOSE_BOUND_S} s"
    except (Exception, asyncio.CancelledError) as e:
        task = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and task is not None and task.cancelling():
            raise
        why = f"stop() raised {type(e).__name__}: {e}"
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.close(), CLOSE_BOUND_S)
    return why
