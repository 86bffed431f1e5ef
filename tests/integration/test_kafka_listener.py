"""Kafka's own clients against real brokers on a Kafka listener (`kafka.listeners`): the
version table, produce and fetch of record batches in Kafka's format, offsets by time, and
the protocol's traps (an unknown ApiVersions version, an API not served, acks=0)."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kazoo.client import KazooClient

from node.cluster.zookeeper import free_ports
from tests.integration.conftest import Brokers
from tests.integration.test_authorization import leader_of
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.integration.test_reassignment import request_reassignment
from tests.support import eventually_sync
from wire import compression, records
from wire.errors import ErrorCode
from wire.kafka.versions import ADVERTISED

T = TypeVar("T")

pytestmark = pytest.mark.plain_pass_only(
    "its Kafka listeners are PLAINTEXT, or SASL with users of its own, which the secured pass refuses"
)


@pytest.fixture(autouse=True)
def _collect_kafka_python_sockets() -> Iterator[None]:
    """kafka-python 3.0 leaves the socket of a connect that failed (a broker killed or stopped
    under a client) for the collector: collected at the end of each test here, rather than as
    a ResourceWarning in whichever test runs next."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def start_with_kafka_listeners(brokers: Brokers, *broker_ids: int, **settings: str) -> str:
    """The brokers started, each with a Kafka listener and `settings`; the Kafka bootstrap list."""
    ports = free_ports(len(broker_ids))
    for broker_id, port in zip(broker_ids, ports, strict=True):
        brokers.new(broker_id, {"kafka.listeners": f"PLAINTEXT://127.0.0.1:{port}", **settings}).start()
    return ",".join(f"127.0.0.1:{port}" for port in ports)


async def test_kafka_python_produces_and_reads_back_every_record_in_order(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "orders", partitions=3, rf=3)
    await settled_to(brokers, kazoo, "orders", lambda s: len(s) == 3, "topic never agreed")
    sent = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(1_000)]

    def produce() -> list[tuple[int, int]]:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5
        )
        try:
            futures = [producer.send("orders", key=k, value=v) for k, v in sent]
            producer.flush(timeout=30)
            return [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]
        finally:
            producer.close(timeout=10)

    acknowledged = await asyncio.to_thread(produce)
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for (partition, offset), record in zip(acknowledged, sent, strict=True):
        by_partition.setdefault(partition, []).append(record)
        assert offset == len(by_partition[partition]) - 1, "offsets are dense from 0, in send order"

    def consume() -> dict[int, list[tuple[bytes, bytes]]]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2_000
        )
        try:
            consumer.assign([TopicPartition("orders", p) for p in range(3)])
            consumer.seek_to_beginning()
            got: dict[int, list[tuple[bytes, bytes]]] = {}
            deadline = time.monotonic() + 30
            while sum(len(v) for v in got.values()) < len(sent) and time.monotonic() < deadline:
                for record in consumer:
                    got.setdefault(record.partition, []).append((record.key, record.value))
            return got
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == by_partition


async def test_kafka_python_infers_kafka_3_0_and_sees_the_kafka_listeners(brokers: Brokers) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    await controller_of(brokers)

    def look() -> tuple[object, set[tuple[str, int]]]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            consumer.topics()
            cluster = consumer._client.cluster
            return consumer.config["api_version"], {(b.host, b.port) for b in cluster.brokers()}
        finally:
            consumer.close()

    version, addresses = await asyncio.to_thread(look)
    assert version == (3, 0), "magic-2 batches and idempotence need a broker seen as 0.11 or later"
    assert {f"{h}:{p}" for h, p in addresses} == set(bootstrap.split(","))


def exchange(port: int, api_key: int, version: int, body: bytes, correlation_id: int = 9) -> bytes | None:
    """One request frame with a v1 header; the answer's payload, or None if the broker closed."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        prefix = sock.recv(4, socket.MSG_WAITALL)
        if len(prefix) < 4:
            return None
        (length,) = struct.unpack(">i", prefix)
        return sock.recv(length, socket.MSG_WAITALL)


async def test_an_unknown_api_versions_version_is_answered_at_v0_and_an_unserved_api_closes(
    brokers: Brokers,
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await controller_of(brokers)
    port = int(bootstrap.split(":")[1])
    answer = await asyncio.to_thread(exchange, port, 18, 99, b"")
    assert answer is not None
    decoded = ApiVersionsResponse[0].decode(answer[4:])
    assert struct.unpack(">i", answer[:4]) == (9,)
    assert decoded.error_code == 35, "UNSUPPORTED_VERSION"
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ADVERTISED
    # AddPartitionsToTxn is not advertised (no transactions): Kafka's broker closes such a connection.
    assert await asyncio.to_thread(exchange, port, 24, 0, b"\x00" * 40) is None
    # Produce v2 carries magic 0/1 message sets: refused the same way, though v0-2 are listed.
    assert await asyncio.to_thread(exchange, port, 0, 2, b"\x00" * 40) is None
    # And the listener still serves the next client.
    again = await asyncio.to_thread(exchange, port, 18, 0, b"")
    assert again is not None and ApiVersionsResponse[0].decode(again[4:]).error_code == 0


async def test_acks_0_gets_no_answer_and_the_records_land(brokers: Brokers, kazoo: KazooClient) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await create_topic(brokers.by_id(await controller_of(brokers)), "events", partitions=1, rf=1)
    await settled_to(brokers, kazoo, "events", lambda s: len(s) == 1, "topic never agreed")

    def produce_and_count() -> int:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=0, enable_idempotence=False)
        try:
            for i in range(100):
                producer.send("events", value=f"fire-{i}".encode())
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2_000)
        try:
            partition = TopicPartition("events", 0)
            consumer.assign([partition])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if consumer.end_offsets([partition])[partition] == 100:
                    break
                time.sleep(0.05)
            return int(consumer.end_offsets([partition])[partition])
        finally:
            consumer.close()

    assert await asyncio.to_thread(produce_and_count) == 100
    # One that fails (here a partition that does not exist) closes its connection instead, as
    # Kafka's broker does: the one thing a producer reading no answers notices.
    port = int(bootstrap.split(":")[1])
    failing = _produce(7, "events", 5, records.build_batch([(None, b"lost")], timestamp=1), acks=0)
    assert await asyncio.to_thread(exchange, port, 0, 7, failing) is None


async def test_an_acks_0_producer_follows_a_moved_leader(brokers: Brokers, kazoo: KazooClient) -> None:
    """The leader moves away from a broker that stays up: kafka-python's acks=0 producer learns
    of it from the connection its first failed produce closes, and its records land on the
    new leader, long before its metadata would have aged (5 minutes)."""
    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "fire", assignment={0: [1]})
    await settled_to(brokers, kazoo, "fire", lambda s: s[0][0] == 1, "topic never agreed")
    partition = TopicPartition("fire", 0)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=0, enable_idempotence=False, metadata_max_age_ms=300_000
    )
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, metadata_max_age_ms=1_000)
    try:

        def produce_until_landed(base: int, prefix: str) -> int:
            """Sends until the partition's end passes `base`; how many were sent."""
            deadline = time.monotonic() + 20
            sent = 0
            while time.monotonic() < deadline:
                producer.send("fire", value=f"{prefix}-{sent}".encode(), partition=0)
                producer.flush(timeout=10)
                sent += 1
                if sent % 10 == 0 and consumer.end_offsets([partition])[partition] > base:
                    return sent
                time.sleep(0.05)
            raise AssertionError(f"no {prefix} record landed within 20 s ({sent} sent)")

        await asyncio.to_thread(produce_until_landed, 0, "before")
        request_reassignment(kazoo, "fire", 0, [2])
        await settled_to(brokers, kazoo, "fire", lambda s: s[0][:1] == (2,) and s[0][2] == [2], "2 never led")
        moved_end = await asyncio.to_thread(lambda: consumer.end_offsets([partition])[partition])
        await asyncio.to_thread(produce_until_landed, moved_end, "after")
    finally:
        producer.close(timeout=10)
        consumer.close()
    closed = [
        line for line in brokers.by_id(1).broker_log().splitlines() if "Produce with acks=0 failed" in line
    ]
    assert closed and "(fire-0 " in closed[0], "the old leader closed the producer's connection"


def _produce(version: int, topic: str, partition: int, batch: bytes, *, acks: int = -1) -> bytes:
    """A Produce request's body, as kafka-python encodes it."""
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=batch)
    return bytes(
        ProduceRequest[version](
            transactional_id=None,
            acks=acks,
            timeout_ms=10_000,
            topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])],
        ).encode()
    )


def _fetch(version: int, topic: str) -> bytes:
    """A Fetch request's body for partition 0 of `topic` from offset 0, as kafka-python encodes it."""
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return bytes(
        FetchRequest[version](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])],
        ).encode()
    )


async def test_kafka_python_administers_topics_through_the_kafka_listener(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """CreateTopics, DescribeConfigs, AlterConfigs, CreatePartitions, DescribeCluster and
    DeleteTopics from kafka-python's KafkaAdminClient, each seen to take effect in ZooKeeper."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    await controller_of(brokers)

    def administer() -> tuple[dict[str, str], int, int]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:
            admin.create_topics(
                [
                    NewTopic(
                        "ledger",
                        num_partitions=2,
                        replication_factor=2,
                        topic_configs={"retention.ms": "60000"},
                    )
                ]
            )
            described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ledger")])
            configs = {name: c["value"] for name, c in described["topic"]["ledger"].items()}
            admin.create_partitions({"ledger": NewPartitions(total_count=3)})
            cluster = admin.describe_cluster()
            return configs, len(cluster["brokers"]), cluster["controller_id"]
        finally:
            admin.close()

    configs, broker_count, controller_id = await asyncio.to_thread(administer)
    assert configs.get("retention.ms") == "60000"
    assert broker_count == 2 and controller_id in (1, 2)
    # AlterConfigs v0 replaces the topic's dynamic configs: retention.ms goes, cleanup.policy
    # comes (kafka-python's alter_configs would send retention.ms again to keep it).
    name, key, value = b"ledger", b"cleanup.policy", b"compact"
    body = struct.pack(">ibh", 1, 2, len(name)) + name + struct.pack(">ih", 1, len(key)) + key
    body += struct.pack(">h", len(value)) + value + b"\x00"
    answer = await asyncio.to_thread(exchange, int(bootstrap.split(",")[0].split(":")[1]), 33, 0, body)
    assert answer is not None and struct.unpack(">iiih", answer[:14])[3] == 0, "AlterConfigs answered NONE"
    assert orjson.loads(kazoo.get("/config/topics/ledger")[0])["config"] == {"cleanup.policy": "compact"}
    eventually_sync(
        lambda: len(orjson.loads(kazoo.get("/brokers/topics/ledger")[0])["partitions"]) == 3,
        timeout=20,
        interval=0.1,
        message="the third partition never reached ZooKeeper",
    )

    def delete() -> None:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
        try:
            admin.delete_topics(["ledger"])
        finally:
            admin.close()

    await asyncio.to_thread(delete)
    eventually_sync(
        lambda: kazoo.exists("/brokers/topics/ledger") is None,
        timeout=30,
        interval=0.1,
        message="ledger never went away",
    )


async def test_a_topic_created_through_the_kafka_listener_is_led_in_the_next_metadata(
    brokers: Brokers,
) -> None:
    """CreateTopics with a timeout is answered once the broker knows a leader of every new
    partition, as Kafka's is, so the client's next Metadata shows the topic led (aiokafka's
    test_list_topics and test_create_partitions ask at once)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bootstrap = start_with_kafka_listeners(brokers, 1)
    await controller_of(brokers)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for name in ("ledger", "orders", "payments"):
            [created] = (await admin.create_topics([NewTopic(name, 3, 1)])).topic_errors
            assert created[1] == 0, created
            [described] = await admin.describe_topics([name])
            assert sorted((p["partition"], p["leader"]) for p in described["partitions"]) == [
                (0, 1),
                (1, 1),
                (2, 1),
            ]
    finally:
        await admin.close()


def sasl_kafka_cluster(brokers: Brokers, zk_connect: str) -> str:
    """Two brokers whose listeners, Keel's and Kafka's, are SASL_PLAINTEXT with SCRAM users
    `broker`, `admin` (super users) and `alice` (no ACL), the authorizer on; the Kafka
    bootstrap list."""
    from tests.integration.test_sasl_plaintext import MECHANISM, PASSWORDS, PROTOCOL, add_user, jaas

    for user in ("broker", "admin", "alice"):
        add_user(zk_connect, user)
    ports = free_ports(4)
    for broker_id, port, kafka_port in ((1, ports[0], ports[1]), (2, ports[2], ports[3])):
        settings = {
            "listeners": f"{PROTOCOL}://127.0.0.1:{port}",
            "kafka.listeners": f"{PROTOCOL}://127.0.0.1:{kafka_port}",
            "security.inter.broker.protocol": PROTOCOL,
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": jaas("broker", PASSWORDS["broker"]),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
        }
        brokers.new(broker_id, settings, port=port).start()
    return f"127.0.0.1:{ports[1]},127.0.0.1:{ports[3]}"


def kafka_user(bootstrap: str, user: str, password: str | None = None) -> dict[str, object]:
    """kafka-python's settings for SCRAM as `user`."""
    from tests.integration.test_sasl_plaintext import MECHANISM, PASSWORDS, PROTOCOL

    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": PROTOCOL,
        "sasl_mechanism": MECHANISM,
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user] if password is None else password,
    }


def retrying(action: Callable[[], T], *, timeout: float) -> T:
    """`action()` until it raises no KafkaError (a cluster or topic still settling)."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def topics_listed(bootstrap: str, user: str | None, password: str | None = None) -> set[str]:
    """The topics librdkafka (confluent-kafka) lists over SCRAM as `user` (None: without
    SASL); raises KafkaException when it cannot."""
    from confluent_kafka.admin import AdminClient

    from tests.integration.test_sasl_plaintext import MECHANISM, PASSWORDS, PROTOCOL

    config: dict[str, str | int] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5_000}
    if user is not None:
        config |= {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": PASSWORDS[user] if password is None else password,
        }
    return set(AdminClient(config).list_topics(timeout=5).topics)


def brokers_listed(bootstrap: str, user: str) -> int:
    """How many brokers librdkafka's Metadata shows `user`; 0 while it cannot connect."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from tests.integration.test_sasl_plaintext import MECHANISM, PASSWORDS, PROTOCOL

    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": PROTOCOL,
        "sasl.mechanism": MECHANISM,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }
    try:
        return len(AdminClient(config).list_topics(timeout=2).brokers)
    except KafkaException as e:
        print("LISTED", e)
        return 0


def produce_one(settings: dict[str, object], topic: str, value: bytes) -> None:
    producer = KafkaProducer(**settings, acks="all", enable_idempotence=False, max_block_ms=10_000)
    try:
        producer.send(topic, value=value).get(timeout=20)
    finally:
        producer.close(timeout=10)


def read_all(settings: dict[str, object], topic: str) -> list[bytes]:
    consumer = KafkaConsumer(**settings, consumer_timeout_ms=3_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        return [record.value for record in consumer]
    finally:
        consumer.close()


async def test_sasl_scram_and_acls_hold_on_a_kafka_listener(brokers: Brokers, zk_connect: str) -> None:
    """The admin creates, writes and reads; alice, named by no ACL, is refused the topic; a
    wrong password and a client that does not authenticate get nothing."""
    from confluent_kafka import KafkaException
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAuthorizationFailedError

    bootstrap = sasl_kafka_cluster(brokers, zk_connect)
    admin = kafka_user(bootstrap, "admin")

    def create() -> None:
        client = KafkaAdminClient(**admin, request_timeout_ms=20_000)
        try:
            client.create_topics([NewTopic("payroll", num_partitions=1, replication_factor=2)])
        finally:
            client.close()

    # Both brokers up first: a kafka-python client that cannot bootstrap keeps reconnecting
    # in the background after its constructor fails.
    await asyncio.to_thread(
        eventually_sync,
        lambda: brokers_listed(bootstrap, "admin") == 2,
        timeout=60,
        interval=0.2,
        message="the brokers never answered over SASL",
    )
    await asyncio.to_thread(create)
    await asyncio.to_thread(retrying, lambda: produce_one(admin, "payroll", b"salary"), timeout=30)
    assert await asyncio.to_thread(read_all, admin, "payroll") == [b"salary"]
    with pytest.raises(TopicAuthorizationFailedError):
        await asyncio.to_thread(produce_one, kafka_user(bootstrap, "alice"), "payroll", b"raise")
    # The broker answers a wrong password with SASL_AUTHENTICATION_FAILED and closes, and
    # closes a connection that does not authenticate: neither lists anything (librdkafka
    # here: kafka-python's client keeps retrying in the background after such a failure).
    with pytest.raises(KafkaException):
        await asyncio.to_thread(topics_listed, bootstrap, "admin", "guess")
    with pytest.raises(KafkaException):
        await asyncio.to_thread(topics_listed, bootstrap, None)
    assert await asyncio.to_thread(topics_listed, bootstrap, "admin") == {"payroll"}
    assert await asyncio.to_thread(read_all, admin, "payroll") == [b"salary"], "nothing else landed"


async def test_a_kafka_producer_creates_its_topic_through_metadata(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """auto.create.topics.enable (on by default): kafka-python's producer asks Metadata for a
    topic that does not exist, the broker creates it with num.partitions and
    default.replication.factor, and the records land."""
    bootstrap = start_with_kafka_listeners(
        brokers, 1, 2, **{"num.partitions": "4", "default.replication.factor": "2"}
    )
    await controller_of(brokers)

    def produce() -> set[int]:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
        try:
            futures = [producer.send("signups", key=f"user-{i}".encode(), value=b"x") for i in range(40)]
            return {f.get(timeout=30).partition for f in futures}
        finally:
            producer.close(timeout=10)

    partitions_written = await asyncio.to_thread(produce)
    assert partitions_written <= set(range(4)) and len(partitions_written) > 1
    assignment = orjson.loads(kazoo.get("/brokers/topics/signups")[0])["partitions"]
    assert len(assignment) == 4 and all(len(replicas) == 2 for replicas in assignment.values())


async def test_with_auto_creation_off_an_unknown_topic_stays_unknown(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, **{"auto.create.topics.enable": "false"})
    await controller_of(brokers)

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, max_block_ms=3_000)
        try:
            producer.send("nowhere", value=b"x").get(timeout=10)
        finally:
            producer.close(timeout=10)

    from kafka.errors import KafkaTimeoutError

    with pytest.raises(KafkaTimeoutError):
        await asyncio.to_thread(produce)
    assert kazoo.exists("/brokers/topics/nowhere") is None


async def test_confluent_kafka_and_aiokafka_produce_and_read_back(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """librdkafka (confluent-kafka) and aiokafka each write 200 records and read back both
    clients' records in order, through the same Kafka listeners."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as RdTopicPartition

    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    await create_topic(brokers.by_id(await controller_of(brokers)), "mixed", partitions=1, rf=2)
    await settled_to(brokers, kazoo, "mixed", lambda s: len(s) == 1, "topic never agreed")

    def rdkafka_produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False})
        failures: list[object] = []
        for i in range(200):
            producer.produce(
                "mixed", value=f"rd-{i}".encode(), on_delivery=lambda e, _m: e and failures.append(e)
            )
        assert producer.flush(30) == 0 and not failures, failures

    await asyncio.to_thread(rdkafka_produce)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(200):
            await producer.send_and_wait("mixed", f"aio-{i}".encode())
    finally:
        await producer.stop()
    expected = [f"rd-{i}".encode() for i in range(200)] + [f"aio-{i}".encode() for i in range(200)]

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([AioTopicPartition("mixed", 0)])
        await consumer.seek_to_beginning()
        seen: list[bytes] = []
        async with asyncio.timeout(30):
            while len(seen) < len(expected):
                batches = await consumer.getmany(timeout_ms=1_000)
                seen += [r.value for records_of in batches.values() for r in records_of]
    finally:
        await consumer.stop()
    assert seen == expected

    def rdkafka_consume() -> list[bytes]:
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
        try:
            reader.assign([RdTopicPartition("mixed", 0, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < len(expected) and time.monotonic() < deadline:
                message = reader.poll(1.0)
                if message is not None and message.error() is None:
                    got.append(message.value())
            return got
        finally:
            reader.close()

    assert await asyncio.to_thread(rdkafka_consume) == expected


async def test_every_codec_is_produced_kept_and_fetched(brokers: Brokers, kazoo: KazooClient) -> None:
    """kafka-python writes with gzip, snappy, lz4 and zstd, librdkafka with zstd; the leader
    checks each batch's records, keeps it compressed, and both clients read every record."""
    from confluent_kafka import Producer

    bootstrap = start_with_kafka_listeners(brokers, 1, 2)
    await create_topic(brokers.by_id(await controller_of(brokers)), "squeezed", partitions=1, rf=2)
    await settled_to(brokers, kazoo, "squeezed", lambda s: len(s) == 1, "topic never agreed")
    codecs = ["gzip", "snappy", "lz4", "zstd"]

    def produce() -> list[bytes]:
        sent = []
        for codec in codecs:
            producer = KafkaProducer(
                bootstrap_servers=bootstrap,
                acks="all",
                enable_idempotence=False,
                compression_type=codec,
                linger_ms=20,
            )
            try:
                values = [f"{codec}-{i}-".encode() * 10 for i in range(100)]
                for future in [producer.send("squeezed", value=v) for v in values]:
                    future.get(timeout=30)
                sent += values
            finally:
                producer.close(timeout=10)
        rdkafka = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": "zstd", "enable.idempotence": False}
        )
        values = [f"rd-zstd-{i}-".encode() * 10 for i in range(100)]
        for value in values:
            rdkafka.produce("squeezed", value=value)
        assert rdkafka.flush(30) == 0
        return sent + values

    sent = await asyncio.to_thread(produce)

    def consume() -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3_000)
        try:
            consumer.assign([TopicPartition("squeezed", 0)])
            consumer.seek_to_beginning()
            return [record.value for record in consumer]
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == sent
    # Kept as the producers compressed them: the log on disk holds fewer bytes than the values.
    logs = [p for b in brokers.all for p in (b.home / "data" / "squeezed-0").glob("*.log")]
    assert logs and all(p.stat().st_size < sum(map(len, sent)) for p in logs)
    # zstd needs Produce v7 and Fetch v10 (KIP-110): an older version is refused for the
    # partition, and nothing is appended.
    leader = int(bootstrap.split(",")[leader_of(kazoo, "squeezed") - 1].split(":")[1])
    late = records.build_batch([(None, b"late")], timestamp=1, compression_codec=compression.ZSTD)
    produced = await asyncio.to_thread(exchange, leader, 0, 5, _produce(5, "squeezed", 0, late))
    assert produced is not None
    [refused] = ProduceResponse[5].decode(produced[4:]).responses[0].partition_responses
    assert refused.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    old = await asyncio.to_thread(exchange, leader, 1, 9, _fetch(9, "squeezed"))
    new = await asyncio.to_thread(exchange, leader, 1, 10, _fetch(10, "squeezed"))
    assert old is not None and new is not None
    [old_partition] = FetchResponse[9].decode(old[4:]).responses[0].partitions
    [new_partition] = FetchResponse[10].decode(new[4:]).responses[0].partitions
    assert old_partition.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "the topic holds zstd batches"
    assert (new_partition.error_code, new_partition.high_watermark) == (ErrorCode.NONE, len(sent)), (
        "the late batch is not there"
    )


async def test_an_idempotent_producer_across_a_leader_kill_writes_each_record_once_in_order(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """kafka-python's default producer (idempotent, acks=all, retries) sends 3,000 records to
    one partition while its leader is killed with -9: a consumer then reads exactly the
    records sent, each once, in send order. The new leader dedupes the retries of batches its
    predecessor appended, from the producer state it kept as a follower."""
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3)
    await create_topic(brokers.by_id(await controller_of(brokers)), "ledger", partitions=1, rf=3)
    await settled_to(brokers, kazoo, "ledger", lambda s: len(s) == 1 and len(s[0][2]) == 3, "ISR never full")
    leader = int(orjson.loads(kazoo.get("/brokers/topics/ledger/partitions/0/state")[0])["leader"])
    sent = [f"entry-{i}".encode() for i in range(3_000)]

    def produce() -> list[int]:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, retries=1_000)
        assert producer.config["enable_idempotence"], "kafka-python's default, negotiated with Keel"
        try:
            futures = []
            for i, value in enumerate(sent):
                futures.append(producer.send("ledger", value=value))
                if i == 1_000:
                    brokers.by_id(leader).kill()
            producer.flush(timeout=60)
            return [f.get(timeout=60).offset for f in futures]
        finally:
            producer.close(timeout=10)

    acknowledged = await asyncio.to_thread(produce)
    assert acknowledged == list(range(len(sent))), "every record acknowledged once, at its place"

    def consume() -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5_000)
        try:
            consumer.assign([TopicPartition("ledger", 0)])
            consumer.seek_to_beginning()
            return [record.value for record in consumer]
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == sent


async def test_keels_own_producer_compresses_and_a_kafka_consumer_reads_it(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    from node.clients.producer import KeelProducer
    from tests.integration.replication import bootstrap as keel_bootstrap

    bootstrap = start_with_kafka_listeners(brokers, 1)
    await create_topic(brokers.by_id(await controller_of(brokers)), "zipped", partitions=1, rf=1)
    await settled_to(brokers, kazoo, "zipped", lambda s: len(s) == 1, "topic never agreed")
    values = [f"compressed-{i}".encode() * 8 for i in range(300)]
    async with KeelProducer(keel_bootstrap(brokers), compression_type="zstd") as producer:
        await producer.send_many("zipped", [(None, v) for v in values])

    def consume() -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3_000)
        try:
            consumer.assign([TopicPartition("zipped", 0)])
            consumer.seek_to_beginning()
            return [record.value for record in consumer]
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == values


async def test_acls_are_created_described_and_deleted_through_the_kafka_listener(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """kafka-python's admin writes a binding (it lands in ZooKeeper where `keel acl` writes
    them, and the authorizer applies it: the denied principal's reads are refused), lists it
    and deletes it."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    bootstrap = start_with_kafka_listeners(
        brokers,
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    await create_topic(brokers.by_id(await controller_of(brokers)), "secret", partitions=1, rf=1)
    deny = ACL(
        principal="User:ANONYMOUS",
        host="*",
        operation=ACLOperation.READ,
        permission_type=ACLPermissionType.DENY,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, "secret"),
    )
    everything = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, "secret"),
    )

    def create_and_list() -> tuple[object, list[object]]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            created = admin.create_acls([deny])
            listed, _ = admin.describe_acls(everything)
            return created, listed
        finally:
            admin.close()

    created, listed = await asyncio.to_thread(create_and_list)
    assert len(created["succeeded"]) == 1 and not created["failed"]  # type: ignore[index]
    assert [(a.principal, a.operation, a.permission_type) for a in listed] == [  # type: ignore[attr-defined]
        ("User:ANONYMOUS", ACLOperation.READ, ACLPermissionType.DENY)
    ]
    assert kazoo.exists("/kafka-acl/Topic/secret") is not None

    def metadata_error() -> int:
        """The error Metadata answers for `secret` (29: TOPIC_AUTHORIZATION_FAILED): Deny Read
        denies Describe too, as Kafka's authorizer reads it."""
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            return int(admin.describe_topics(["secret"])[0]["error_code"])
        finally:
            admin.close()

    await asyncio.to_thread(
        eventually_sync, lambda: metadata_error() == 29, timeout=20, message="the DENY never applied"
    )

    def delete() -> object:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            return admin.delete_acls([everything])
        finally:
            admin.close()

    deleted = await asyncio.to_thread(delete)
    assert len(deleted[0][1]) == 1  # type: ignore[index]
    assert kazoo.exists("/kafka-acl/Topic/secret") is None
    await asyncio.to_thread(
        eventually_sync,
        lambda: metadata_error() == 0,
        timeout=20,
        message="still denied with no binding left",
    )


async def test_delete_records_moves_the_log_start_on_the_leader_and_its_followers(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """kafka-python's delete_records: the partition then starts at the offset asked, on its
    leader and, once they fetch again, on its followers; a consumer from the beginning reads
    from there; an offset past the high watermark is refused."""
    from kafka import KafkaAdminClient
    from kafka.errors import OffsetOutOfRangeError

    bootstrap = start_with_kafka_listeners(
        brokers, 1, 2, 3, **{"log.flush.offset.checkpoint.interval.ms": "200"}
    )
    await create_topic(brokers.by_id(await controller_of(brokers)), "trimmed", partitions=1, rf=3)
    await settled_to(brokers, kazoo, "trimmed", lambda s: len(s) == 1 and len(s[0][2]) == 3, "ISR never full")

    def produce_and_trim() -> tuple[object, list[bytes]]:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(100):
            producer.send("trimmed", value=f"{i}".encode())
        producer.flush(timeout=30)
        producer.close(timeout=10)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            trimmed = admin.delete_records({TopicPartition("trimmed", 0): 40})
            with pytest.raises(OffsetOutOfRangeError):
                admin.delete_records({TopicPartition("trimmed", 0): 1_000})
        finally:
            admin.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5_000)
        try:
            consumer.assign([TopicPartition("trimmed", 0)])
            consumer.seek_to_beginning()
            return trimmed, [r.value for r in consumer]
        finally:
            consumer.close()

    trimmed, read = await asyncio.to_thread(produce_and_trim)
    assert trimmed[TopicPartition("trimmed", 0)]["low_watermark"] == 40  # type: ignore[index]
    assert read == [f"{i}".encode() for i in range(40, 100)]

    def every_replica_starts_at_40() -> bool:
        """Each broker's log-start-offset checkpoint (written every 200 ms here)."""
        starts = []
        for broker in brokers.all:
            checkpoint = broker.log_dir / "log-start-offset-checkpoint"
            lines = checkpoint.read_text().splitlines() if checkpoint.exists() else []
            starts.append("trimmed 0 40" in lines)
        return all(starts)

    await asyncio.to_thread(
        eventually_sync,
        every_replica_starts_at_40,
        timeout=20,
        message="the followers kept the deleted records",
    )


async def test_kafka_python_reads_a_compacted_topic_and_a_record_without_a_key_is_refused(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """An idempotent kafka-python producer on a compacted topic; once the cleaner has run, a
    kafka-python consumer reads the log with its gaps (and any emptied batch) to its end, and
    sees each key's latest value."""
    broker_settings = {
        "log.internal.segment.bytes": "4096",
        "log.cleaner.backoff.ms": "200",
        "replica.high.watermark.checkpoint.interval.ms": "200",
    }
    bootstrap = start_with_kafka_listeners(brokers, 1, **broker_settings)
    broker = brokers.by_id(1)
    await controller_of(brokers)
    await create_topic(broker, "prices", assignment={0: [1]}, cleanup_policy="compact")
    await settled_to(brokers, kazoo, "prices", lambda s: s[0][0] == 1, "topic never agreed")
    sent = [(f"key-{i % 10}".encode(), f"value-{i}".encode()) for i in range(600)]

    def produce() -> None:
        # Batches of at most 512 bytes, so that the 4 KiB segments roll and the cleaner has a
        # closed one to clean, however the sender's timing groups the records: all 600 fit
        # one batch of kafka-python's default 16 KiB, which stays in the active segment.
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=2, batch_size=512
        )
        try:
            for key, value in sent:
                producer.send("prices", key=key, value=value)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
        plain = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=0)
        try:
            with pytest.raises(KafkaError) as refused:
                plain.send("prices", key=None, value=b"no key").get(timeout=30)
            assert refused.value.errno == 87, refused.value  # INVALID_RECORD
        finally:
            plain.close(timeout=10)

    await asyncio.to_thread(produce)
    eventually_sync(
        lambda: "prices-0: cleaned offsets" in broker.broker_log(),
        timeout=60,
        interval=0.2,
        message="the cleaner never cleaned prices-0",
    )

    def consume() -> list[tuple[int, bytes, bytes]]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        try:
            partition = TopicPartition("prices", 0)
            consumer.assign([partition])
            consumer.seek_to_beginning()
            end = consumer.end_offsets([partition])[partition]
            got = []
            deadline = time.monotonic() + 30
            while consumer.position(partition) < end and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    got += [(r.offset, r.key, r.value) for r in records]
            assert consumer.position(partition) == end, "the consumer reached the log end"
            return got
        finally:
            consumer.close()

    got = await asyncio.to_thread(consume)
    offsets = [offset for offset, _, _ in got]
    assert offsets == sorted(set(offsets)) and len(got) < len(sent), "a compacted log, offsets rising"
    assert {key: value for _, key, value in got} == dict(sent), "each key's latest value"
