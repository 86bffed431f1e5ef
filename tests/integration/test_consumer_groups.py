"""Consumer groups through Kafka's own clients against real brokers: the group coordinator
on the leader of a `__consumer_offsets` partition, rebalances among members, committed
offsets that outlive the coordinator's broker, and the admin side (list, describe, delete)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings
from collections.abc import Iterator

import orjson
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError
from kafka.structs import OffsetAndMetadata
from kazoo.client import KazooClient

from actors.group.coordinator import partition_for
from tests.integration.conftest import Brokers
from tests.integration.test_kafka_listener import start_with_kafka_listeners
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually_sync

pytestmark = pytest.mark.plain_pass_only("its Kafka listeners are PLAINTEXT, which the secured pass refuses")

OFFSETS_PARTITIONS = 5
GROUP_SETTINGS = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(autouse=True)
def _collect_kafka_python_sockets() -> Iterator[None]:
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


async def _topic_with_records(
    brokers: Brokers, kazoo: KazooClient, bootstrap: str, topic: str, count: int
) -> None:
    await create_topic(brokers.by_id(await controller_of(brokers)), topic, partitions=4, rf=3)
    await settled_to(
        brokers, kazoo, topic, lambda s: len(s) == 4 and all(len(p[2]) == 3 for p in s.values()), "no ISR"
    )

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            for i in range(count):
                producer.send(topic, key=str(i % 13).encode(), value=f"{i}".encode())
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)

    await asyncio.to_thread(produce)


def _coordinator(kazoo: KazooClient, group: str) -> int:
    state = kazoo.get(
        f"/brokers/topics/__consumer_offsets/partitions/{partition_for(group, OFFSETS_PARTITIONS)}/state"
    )
    return int(orjson.loads(state[0])["leader"])


async def test_a_group_resumes_from_its_commits_after_its_coordinators_broker_is_killed(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """A member reads part of a topic and commits; the coordinator's broker is killed -9; a
    new member of the group, served by the coordinator elected next, starts exactly at the
    committed offsets: nothing before them again, nothing after them lost."""
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await _topic_with_records(brokers, kazoo, bootstrap, "events", 400)

    def read_some() -> set[bytes]:
        consumer = KafkaConsumer(
            "events",
            bootstrap_servers=bootstrap,
            group_id="billing",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=25,
        )
        try:
            seen: set[bytes] = set()
            deadline_polls = 200
            while len(seen) < 150 and deadline_polls:
                deadline_polls -= 1
                for records in consumer.poll(timeout_ms=500).values():
                    seen.update(r.value for r in records)
            consumer.commit()
            return seen
        finally:
            consumer.close()

    first = await asyncio.to_thread(read_some)
    assert len(first) >= 150
    coordinator = _coordinator(kazoo, "billing")
    brokers.by_id(coordinator).kill()

    expected = {f"{i}".encode() for i in range(400)}

    def read_rest() -> list[bytes]:
        consumer = KafkaConsumer(
            "events",
            bootstrap_servers=bootstrap,
            group_id="billing",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            rest: list[bytes] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and first | set(rest) != expected:
                try:
                    batches = consumer.poll(timeout_ms=500)
                except KafkaConnectionError:
                    # kafka-python 3.0.12 raises a refused connection to the killed broker
                    # (a metadata refresh sent to it) out of poll() rather than trying
                    # another: an application polls again, and so does this.
                    time.sleep(0.1)
                    continue
                rest += [r.value for records in batches.values() for r in records]
            return rest
        finally:
            consumer.close()

    rest = await asyncio.to_thread(read_rest)
    assert _coordinator(kazoo, "billing") != coordinator, "another broker coordinates the group"
    assert not first & set(rest), "nothing read before the commit is read again"
    assert first | set(rest) == expected, "nothing after it is lost"
    assert len(rest) == len(set(rest))


class _Poller:
    """A kafka-python consumer polled from a thread of its own, as an application polls it.

    One thread polling several consumers in turn with short timeouts makes kafka-python
    3.0.12 rejoin for nothing: a poll that times out while its JoinGroup waits for the other
    members leaves the join in flight, and if it completes before the next poll, that poll
    starts a new JoinGroup instead of taking the finished one (`join_group_async` tests
    `is_done` rather than taking the result), so the group rebalances again, for good."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.consumer.poll(timeout_ms=500)
        finally:
            self.consumer.close()

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


async def test_three_members_share_the_partitions_and_take_over_a_leaving_members(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await _topic_with_records(brokers, kazoo, bootstrap, "jobs", 100)
    members = [
        _Poller(
            KafkaConsumer(
                "jobs",
                bootstrap_servers=bootstrap,
                group_id="workers",
                auto_offset_reset="earliest",
                session_timeout_ms=10_000,
                heartbeat_interval_ms=500,
            )
        )
        for _ in range(3)
    ]
    try:

        def shared() -> list[set[TopicPartition]] | None:
            shares = [m.assignment() for m in members]
            whole = all(shares) and sum(len(s) for s in shares) == 4
            return shares if whole and len(set().union(*shares)) == 4 else None

        shares = await asyncio.to_thread(
            eventually_sync, shared, timeout=60, message="three members never shared the partitions"
        )
        assert sorted(len(s) for s in shares) == [1, 1, 2]
        leaving = members.pop()
        await asyncio.to_thread(leaving.close)
        shares = await asyncio.to_thread(
            eventually_sync, shared, timeout=60, message="the third member's partitions were not taken over"
        )
        assert sorted(len(s) for s in shares) == [2, 2]
    finally:
        for m in members:
            await asyncio.to_thread(m.close)


async def test_groups_are_listed_described_and_deleted_by_an_admin_client(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await _topic_with_records(brokers, kazoo, bootstrap, "audit", 20)

    def commit_and_look() -> tuple[object, ...]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="auditors", enable_auto_commit=False)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            consumer.commit({TopicPartition("audit", 2): OffsetAndMetadata(7, "checkpoint", -1)})
            listed = admin.list_groups()
            described = admin.describe_groups(["auditors"])
            offsets = admin.list_group_offsets("auditors")
            deleted = admin.delete_groups(["auditors"])
            after = admin.describe_groups(["auditors"]), admin.list_group_offsets("auditors")
            return listed, described, offsets, deleted, after
        finally:
            consumer.close()
            admin.close()

    listed, described, offsets, deleted, after = await asyncio.to_thread(commit_and_look)
    assert {"group_id": "auditors", "protocol_type": "", "group_state": "Empty"} in listed  # type: ignore[operator]
    assert described["auditors"]["group_state"] == "Empty"  # type: ignore[index]
    assert offsets == {"auditors": {TopicPartition("audit", 2): OffsetAndMetadata(7, "checkpoint", -1)}}
    assert deleted == {"auditors": "OK"}
    assert after[0]["auditors"]["group_state"] == "Dead"  # type: ignore[index]
    assert after[1] == {"auditors": {}}, "its offsets went with it"


async def test_librdkafka_and_aiokafka_groups_commit_and_resume_where_the_other_stopped(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """confluent-kafka (librdkafka) reads part of a topic in a group and commits; aiokafka,
    in the same group, resumes at exactly the committed offsets and reads the rest."""
    from aiokafka import AIOKafkaConsumer
    from confluent_kafka import Consumer

    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await _topic_with_records(brokers, kazoo, bootstrap, "payments", 300)

    def rdkafka_reads_some() -> set[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "ledger",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["payments"])
            seen: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(seen) < 120 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.add(message.value())
            consumer.commit(asynchronous=False)
            return seen
        finally:
            consumer.close()

    first = await asyncio.to_thread(rdkafka_reads_some)
    assert len(first) >= 120
    consumer = AIOKafkaConsumer(
        "payments",
        bootstrap_servers=bootstrap,
        group_id="ledger",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    rest: list[bytes] = []
    try:
        async with asyncio.timeout(60):
            while len(first) + len(rest) < 300:
                batches = await consumer.getmany(timeout_ms=1_000)
                rest += [r.value for records_of in batches.values() for r in records_of]
        await consumer.commit()
    finally:
        await consumer.stop()
    assert not first & set(rest), "aiokafka resumed at librdkafka's commits"
    assert first | set(rest) == {f"{i}".encode() for i in range(300)}


async def test_a_static_member_restarted_within_its_session_gets_its_partitions_back_without_a_rebalance(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """KIP-345 with aiokafka: a consumer with `group_instance_id` closes (a static member
    sends no LeaveGroup) and a new one with the same instance id takes its place: same
    generation, same partitions, the other member undisturbed. Once it stays away past its
    session timeout, the other member takes everything."""
    from aiokafka import AIOKafkaConsumer

    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await _topic_with_records(brokers, kazoo, bootstrap, "stock", 40)

    def static_member(instance: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            "stock",
            bootstrap_servers=bootstrap,
            group_id="warehouse",
            group_instance_id=instance,
            session_timeout_ms=6_000,
            heartbeat_interval_ms=300,
            auto_offset_reset="earliest",
        )

    async def assigned(*consumers: AIOKafkaConsumer, total: int = 4) -> None:
        async with asyncio.timeout(60):
            while sum(len(c.assignment()) for c in consumers) != total or not all(
                c.assignment() for c in consumers
            ):
                for c in consumers:
                    await c.getmany(timeout_ms=100)

    first, second = static_member("shelf-1"), static_member("shelf-2")
    await first.start()
    await second.start()
    try:
        await assigned(first, second)
        generation = second._coordinator.generation
        assert first._coordinator.generation == generation, "both in the same generation"
        kept, taken = first.assignment(), second.assignment()
        await second.stop()
        second = static_member("shelf-2")
        await second.start()
        await assigned(second, total=len(taken))
        assert second.assignment() == taken, "the old incarnation's partitions"
        assert second._coordinator.generation == generation, "no rebalance for a returning static member"
        await first.getmany(timeout_ms=500)
        assert first.assignment() == kept and first._coordinator.generation == generation
        await second.stop()
        # Gone for good: its session expires and the group rebalances around it.
        async with asyncio.timeout(60):
            while len(first.assignment()) != 4:
                await first.getmany(timeout_ms=200)
        assert first._coordinator.generation > generation
    finally:
        await first.stop()
        await second.stop()
