"""The workload of a chaos run, with the project's own clients: acks=all producers writing
unique values (each acknowledgement recorded with its offset), consumers reading from the
beginning (each record recorded), and admin work at a steady rate; and with Kafka's clients
on a topic of their own (node/chaos/kafka_clients.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable

import orjson

from node.chaos.cluster import ChaosCluster
from node.chaos.history import Ack, History, Read
from node.chaos.kafka_clients import KAFKA_TOPIC, KafkaClients
from node.clients.admin import KeelAdminClient
from node.clients.consumer import ConsumedRecord, KeelConsumer
from node.clients.planner import PlannerClient, find_planner
from node.clients.producer import KeelProducer
from node.clients.throttles import clear_throttle_resources, throttle_plan, throttle_resources
from wire.api.create_partitions import CreatePartitionsTopic
from wire.api.create_topics import CreatableTopic
from wire.api.elect_leaders import ElectionType
from wire.api.planner import PlanReassignmentRequest
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

TOPICS = ("chaos-a", "chaos-b")
PARTITIONS = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
RECORDS_PER_SEND = 2
SEND_INTERVAL_S = 0.1
ADMIN_INTERVAL_S = 2.0
# What one admin operation may take (a bound, so that a hung request does not stop the work).
ADMIN_STEP_S = 15.0
PLAN_INTERVAL_S = 5.0
PLAN_STEP_S = 120.0
THROTTLE_BYTES_PER_S = 100_000
# Slow enough that a plan's moves take seconds, so that the planner fault can hit one mid-plan.
PLAN_THROTTLE_BYTES_PER_S = 50_000


class Workload:
    def __init__(
        self, cluster: ChaosCluster, history: History, clock: Callable[[], float], seed: int
    ) -> None:
        self.cluster = cluster
        self.history = history
        self.now = clock
        # The admin work's choices come from the seed too (their outcome from the run).
        self.rng = random.Random(seed * 7919 + 1)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # The admin work and the planner plans stop first, before the heal (see stop_admin).
        self._admin_stop = asyncio.Event()
        self._admin_tasks: list[asyncio.Task[None]] = []
        self._admin_topics: list[str] = []
        self._admin_serial = 0
        self.kafka = KafkaClients(cluster, history, clock, PARTITIONS)

    async def create_topics(self) -> None:
        async with KeelAdminClient(self.cluster.bootstrap, timeout=30) as admin:
            response = await admin.create_topics(
                [
                    CreatableTopic(
                        name=t, num_partitions=PARTITIONS, replication_factor=3, configs=TOPIC_CONFIGS
                    )
                    for t in (*TOPICS, KAFKA_TOPIC)
                ]
            )
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"cannot create {result.name}: {ErrorCode(result.error_code).name}")
        self.history.partitions = [(t, p) for t in (*TOPICS, KAFKA_TOPIC) for p in range(PARTITIONS)]

    def start(self, *, admin: bool = True) -> None:
        self.history.produce_started_s = self.now()
        for topic in TOPICS:
            self._tasks.append(asyncio.create_task(self._produce(topic)))
            self._tasks.append(asyncio.create_task(self._consume(topic, f"consumer-{topic}")))
        self.kafka.start()
        if admin:
            self._admin_tasks.append(asyncio.create_task(self._admin()))
            if self.cluster.planners:
                self._admin_tasks.append(asyncio.create_task(self._plans()))

    async def stop_admin(self) -> None:
        """No more admin work, and the operations under way answered: what was asked before
        the heal is done or in progress when the heal starts the checker's clock, so that a
        plan or a reassignment sent as the faults end does not count against the healing."""
        self._admin_stop.set()
        await asyncio.gather(*self._admin_tasks, return_exceptions=True)

    async def stop(self) -> None:
        self._stop.set()
        self.history.produce_stopped_s = self.now()
        await self.stop_admin()
        await asyncio.gather(*self._tasks, self.kafka.stop(), return_exceptions=True)

    # --- producers ---

    async def _produce(self, topic: str) -> None:
        async with KeelProducer(
            self.cluster.bootstrap, acks=-1, request_timeout=5.0, delivery_timeout=10.0, client_id="chaos"
        ) as producer:
            await asyncio.gather(*(self._produce_partition(producer, topic, p) for p in range(PARTITIONS)))

    async def _produce_partition(self, producer: KeelProducer, topic: str, partition: int) -> None:
        serial = 0
        while not self._stop.is_set():
            values = [f"{topic}-{partition}-{serial + i}" for i in range(RECORDS_PER_SEND)]
            serial += RECORDS_PER_SEND
            self.history.sent += len(values)
            try:
                delivered = await producer.send_many(
                    topic, [(None, v.encode()) for v in values], partition=partition
                )
            except Exception as e:
                # Not acknowledged: written or not, the checker does not count on it.
                self.history.indeterminate += len(values)
                self.history.event(self.now(), "send-failed", f"{topic}-{partition}: {e}")
                why = (f"{topic}-{partition}", _error_name(e))
                self.history.send_failures[why] = self.history.send_failures.get(why, 0) + 1
            else:
                t = self.now()
                for batch in delivered:
                    for i, value in enumerate(values[: batch.count]):
                        self.history.acks.append(Ack(t, topic, batch.partition, batch.base_offset + i, value))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), SEND_INTERVAL_S)

    # --- consumers ---

    async def _consume(self, topic: str, reader: str) -> None:
        incarnation = 0
        while not self._stop.is_set():
            name = f"{reader}#{incarnation}"
            try:
                async with KeelConsumer(
                    self.cluster.bootstrap, topic, from_beginning=True, max_wait_ms=300, timeout=5.0
                ) as consumer:
                    while not self._stop.is_set():
                        self._record(name, topic, await consumer.poll())
            except Exception as e:
                self.history.event(self.now(), "consumer-failed", f"{name}: {e}")
                incarnation += 1
                await asyncio.sleep(0.5)

    def _record(self, reader: str, topic: str, consumed: list[ConsumedRecord]) -> None:
        t = self.now()
        for r in consumed:
            self.history.reads.append(
                Read(t, reader, topic, r.partition, r.offset, (r.value or b"").decode(errors="replace"))
            )

    async def drain(self, timeout: float) -> dict[tuple[str, int], int]:
        """Read every workload partition from the beginning up to its high watermark, as
        reader `drain`; returns the high watermarks."""
        out: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout
        for topic in (*TOPICS, KAFKA_TOPIC):
            async with KeelConsumer(
                self.cluster.bootstrap, topic, from_beginning=True, max_wait_ms=200, timeout=5.0
            ) as consumer:
                while time.monotonic() < deadline:
                    self._record(f"drain-{topic}", topic, await consumer.poll())
                    hws = consumer.high_watermarks
                    if len(hws) == PARTITIONS and all(
                        (consumer.positions.get(p) or 0) >= hw for p, hw in hws.items()
                    ):
                        break
                out.update({(topic, p): hw for p, hw in consumer.high_watermarks.items()})
        return out

    # --- admin work ---

    async def _admin(self) -> None:
        operations = [
            self._create_topic,
            self._delete_topic,
            self._add_partitions,
            self._reassign,
            self._reassign_and_cancel,
            self._reassign_throttled,
            self._preferred_election,
        ]
        while not self._admin_stop.is_set():
            await self._admin_step(self.rng.choice(operations), ADMIN_STEP_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._admin_stop.wait(), ADMIN_INTERVAL_S)

    async def _plans(self) -> None:
        """Planner plans on their own schedule: planning runs Spark jobs, which take longer
        than an admin request (tens of seconds on a loaded machine)."""
        while not self._admin_stop.is_set():
            await self._admin_step(self._execute_plan, PLAN_STEP_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._admin_stop.wait(), PLAN_INTERVAL_S)

    async def _admin_step(
        self, operation: Callable[[KeelAdminClient], Awaitable[str]], bound_s: float
    ) -> None:
        name = operation.__name__.strip("_").replace("_", "-")
        try:
            async with KeelAdminClient(self.cluster.bootstrap, timeout=5.0) as admin:
                detail = await asyncio.wait_for(operation(admin), bound_s)
            self.history.event(self.now(), "admin", f"{name}: {detail}")
        except Exception as e:
            self.history.event(self.now(), "admin-failed", f"{name}: {type(e).__name__}: {e}")

    async def _create_topic(self, admin: KeelAdminClient) -> str:
        self._admin_serial += 1
        name = f"admin-{self._admin_serial}"
        rf = self.rng.choice([2, 3])
        response = await admin.create_topics(
            [CreatableTopic(name=name, num_partitions=2, replication_factor=rf)]
        )
        code = ErrorCode(response.topics[0].error_code)
        if code == ErrorCode.NONE:
            self._admin_topics.append(name)
        return f"{name} (rf {rf}): {code.name}"

    async def _delete_topic(self, admin: KeelAdminClient) -> str:
        if not self._admin_topics:
            return await self._create_topic(admin)
        name = self._admin_topics.pop(self.rng.randrange(len(self._admin_topics)))
        response = await admin.delete_topics([name], timeout_ms=5000)
        return f"{name}: {ErrorCode(response.responses[0].error_code).name}"

    async def _add_partitions(self, admin: KeelAdminClient) -> str:
        if not self._admin_topics:
            return await self._create_topic(admin)
        name = self.rng.choice(self._admin_topics)
        metadata = await admin.metadata([name])
        count = len(metadata.topics[0].partitions) + 1
        response = await admin.create_partitions(
            [CreatePartitionsTopic(name=name, count=count)], timeout_ms=5000
        )
        return f"{name} to {count}: {ErrorCode(response.results[0].error_code).name}"

    def _target(self) -> tuple[tuple[str, int], list[int]]:
        tp = (self.rng.choice(TOPICS), self.rng.randrange(PARTITIONS))
        return tp, self.rng.sample(self.cluster.broker_ids, 3)

    async def _reassign(self, admin: KeelAdminClient) -> str:
        tp, replicas = self._target()
        response = await admin.alter_partition_reassignments({tp: replicas}, timeout_ms=5000)
        return f"{tp[0]}-{tp[1]} to {replicas}: {_first_code(response)}"

    async def _reassign_and_cancel(self, admin: KeelAdminClient) -> str:
        tp, replicas = self._target()
        started = await admin.alter_partition_reassignments({tp: replicas}, timeout_ms=5000)
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        cancelled = await admin.alter_partition_reassignments({tp: None}, timeout_ms=5000)
        return f"{tp[0]}-{tp[1]} to {replicas}: {_first_code(started)}, cancel: {_first_code(cancelled)}"

    async def _reassign_throttled(self, admin: KeelAdminClient) -> str:
        """A move under replication throttles set as Kafka's tool sets them, cleared once the
        move is done (or given up on)."""
        tp, replicas = self._target()
        metadata = await admin.metadata([tp[0]])
        current = {tp: metadata.topics[0].partitions[tp[1]].replicas}
        plan = throttle_plan(current, {tp: replicas})
        await admin.incremental_alter_configs(throttle_resources(plan, THROTTLE_BYTES_PER_S))
        try:
            started = await admin.alter_partition_reassignments({tp: replicas}, timeout_ms=5000)
            done = await self._reassignment_done(admin, tp)
        finally:
            await asyncio.shield(
                admin.incremental_alter_configs(clear_throttle_resources(sorted(plan.brokers), [tp[0]]))
            )
        return f"{tp[0]}-{tp[1]} to {replicas} at {THROTTLE_BYTES_PER_S} B/s: {_first_code(started)}, " + (
            "done" if done else "still moving"
        )

    async def _reassignment_done(self, admin: KeelAdminClient, tp: tuple[str, int]) -> bool:
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline:
            listed = await admin.list_partition_reassignments([tp], timeout_ms=5000)
            if not any(t.partitions for t in listed.topics):
                return True
            await asyncio.sleep(0.5)
        return False

    async def _execute_plan(self, admin: KeelAdminClient) -> str:
        """Ask the active planner for a balancing plan of the workload's topics, executed under
        a throttle (unless one is still running)."""
        endpoint = await find_planner(self.cluster.bootstrap, timeout=5.0)
        async with PlannerClient(endpoint, timeout=5.0, plan_timeout=PLAN_STEP_S) as client:
            status = orjson.loads((await client.status()).status_json)
            if status.get("state") == "running":
                return f"plan {status.get('plan_id')} still running ({status.get('moves_done')} moves done)"
            response = await client.plan(
                PlanReassignmentRequest(
                    goals=["rebalance"],
                    topics=[*TOPICS, *self._admin_topics],
                    execute=True,
                    throttle_bytes_per_s=PLAN_THROTTLE_BYTES_PER_S,
                )
            )
        if response.error_code:
            return f"no plan: {ErrorCode(response.error_code).name}: {response.error_message}"
        moved = len(response.partitions)
        return f"plan {response.plan_id}: {moved} partition(s), executing {response.executing}"

    async def _preferred_election(self, admin: KeelAdminClient) -> str:
        partitions = [(t, p) for t in TOPICS for p in range(PARTITIONS)]
        response = await admin.elect_leaders(ElectionType.PREFERRED, partitions, timeout_ms=5000)
        codes = sorted(
            {
                ErrorCode(p.error_code).name
                for r in response.replica_election_results
                for p in r.partition_result
            }
        )
        return ", ".join(codes)


def _error_name(error: Exception) -> str:
    """The error code a failed send ended with (ProduceFailed and WireError carry one)."""
    code = getattr(error, "code", None)
    return code.name if isinstance(code, ErrorCode) else type(error).__name__


def _first_code(response: object) -> str:
    responses = getattr(response, "responses", [])
    for topic in responses:
        for partition in topic.partitions:
            return ErrorCode(partition.error_code).name
    return ErrorCode(getattr(response, "error_code", 0)).name
