"""Acceptance on a SASL_PLAINTEXT cluster with the authorizer on: two brokers whose only
listener is SASL_PLAINTEXT, their users (`broker`, the super user of the controller channel
and fetchers, and `admin`) written with `keel user add` before they start.

An unauthenticated connection gets nothing but its connection closed, whatever it sends; a
wrong password is refused with 58; an authenticated user who is neither a super user nor
named by an ACL is refused with 31 for the controller's requests and 29 for a topic, until
`keel acl add` names it (no restart).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.cluster.zookeeper import free_ports
from node.security.jaas import SCRAM_LOGIN_MODULE
from node.security.settings import client_security_from_properties
from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually, keel
from wire import records
from wire.api import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    Request,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
)
from wire.client import RpcClient
from wire.errors import ErrorCode, NetworkException, SaslAuthenticationFailed
from wire.security import ClientSecurity

pytestmark = pytest.mark.plain_pass_only(
    "its brokers listen on SASL_PLAINTEXT with users of their own, and it checks unauthenticated clients"
)

PROTOCOL = "SASL_PLAINTEXT"
MECHANISM = "SCRAM-SHA-256"
PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}
HUGE_EPOCH = 2**31 - 1


def jaas(user: str, password: str) -> str:
    return f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{password}";'


def as_user(user: str, password: str | None = None) -> ClientSecurity:
    return client_security_from_properties(
        {
            "security.protocol": PROTOCOL,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas(user, PASSWORDS[user] if password is None else password),
        }
    )


def add_user(zk_connect: str, user: str) -> None:
    added = keel(
        "user",
        "add",
        user,
        "--mechanism",
        MECHANISM,
        "--password",
        PASSWORDS[user],
        "--zookeeper",
        zk_connect,
    )
    assert added.returncode == 0, added.stderr


@dataclass
class SaslCluster:
    brokers: list[BrokerProcess]
    zk_connect: str

    def by_id(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)


async def ask(broker: BrokerProcess, request: Request, security: ClientSecurity) -> Response:
    client = await RpcClient.connect(
        "127.0.0.1", broker.port, security_protocol=security.security_protocol, security=security
    )
    try:
        return await client.send(request, timeout=10)
    finally:
        await client.close()


async def unauthenticated(broker: BrokerProcess, request: Request) -> None:
    """Send `request` on a connection that never authenticates: the broker must close it."""
    client = await RpcClient.connect("127.0.0.1", broker.port, security_protocol="PLAINTEXT")
    try:
        with pytest.raises(NetworkException):
            await client.send(request, timeout=10)
    finally:
        await client.close()


def produce(topic: str) -> ProduceRequest:
    batch = records.build_batch([(None, b"x")], timestamp=1)
    return ProduceRequest(
        acks=-1,
        topic_data=[
            ProduceTopicData(name=topic, partition_data=[ProducePartitionData(index=0, records=batch)])
        ],
    )


async def produce_error(broker: BrokerProcess, topic: str, security: ClientSecurity) -> int:
    answer = await ask(broker, produce(topic), security)
    assert isinstance(answer, ProduceResponse)
    return answer.responses[0].partition_responses[0].error_code


async def log_end(broker: BrokerProcess, topic: str) -> int:
    request = ListOffsetsRequest(
        topics=[ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0)])]
    )
    answer = await ask(broker, request, as_user("admin"))
    assert isinstance(answer, ListOffsetsResponse)
    return answer.topics[0].partitions[0].offset


async def controller_epoch_seen(broker: BrokerProcess) -> int:
    answer = await ask(broker, MetadataRequest(topics=[]), as_user("admin"))
    assert isinstance(answer, MetadataResponse)
    return answer.controller_epoch


def leader_of(kazoo: KazooClient, topic: str) -> int:
    return int(orjson.loads(kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["leader"])


@pytest.fixture
async def cluster(brokers: Brokers, zk_connect: str, kazoo: KazooClient) -> AsyncIterator[SaslCluster]:
    """Two SASL_PLAINTEXT brokers and a topic `orders` on both, holding one record."""
    for user in ("broker", "admin"):
        add_user(zk_connect, user)
    started = []
    for broker_id, port in zip((1, 2), free_ports(2), strict=True):
        settings = {
            "listeners": f"{PROTOCOL}://127.0.0.1:{port}",
            "security.inter.broker.protocol": PROTOCOL,
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": jaas("broker", PASSWORDS["broker"]),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
        }
        started.append(brokers.new(broker_id, settings, port=port).start())
    sasl = SaslCluster(started, zk_connect)
    admin = as_user("admin")

    async def both_registered() -> bool:
        try:
            async with KeelAdminClient(sasl.bootstrap, timeout=5, security=admin) as client:
                described = await client.describe_cluster()
        except Exception:
            return False
        return described.controller_id in (1, 2) and len(described.brokers) == 2

    await eventually(both_registered, timeout=60, interval=0.2, message="no controller over SASL_PLAINTEXT")
    async with KeelAdminClient(sasl.bootstrap, timeout=20, security=admin) as client:
        created = await client.create_topics(
            [CreatableTopic(name="orders", num_partitions=1, replication_factor=2)]
        )
        assert created.topics[0].error_code == ErrorCode.NONE, created

    async def written() -> bool:
        if kazoo.exists("/brokers/topics/orders/partitions/0/state") is None:
            return False
        return await produce_error(sasl.by_id(leader_of(kazoo, "orders")), "orders", admin) == ErrorCode.NONE

    # acks=-1 on two replicas: the follower fetched over SASL_PLAINTEXT as `broker`.
    await eventually(written, timeout=30, interval=0.2, message="the admin could not write to orders")
    yield sasl


async def test_unauthenticated_requests_are_refused_and_change_nothing(
    cluster: SaslCluster, kazoo: KazooClient
) -> None:
    leader = cluster.by_id(leader_of(kazoo, "orders"))
    epoch_before = await controller_epoch_seen(leader)
    state_before = kazoo.get("/brokers/topics/orders/partitions/0/state")[0]
    forged_order = LeaderAndIsrRequest(
        controller_id=leader.broker_id,
        controller_epoch=HUGE_EPOCH,
        broker_epoch=-1,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="orders", partition=0, controller_epoch=HUGE_EPOCH, leader=leader.broker_id,
                leader_epoch=HUGE_EPOCH, isr=[leader.broker_id], partition_epoch=HUGE_EPOCH, replicas=[1, 2],
            )
        ],
    )  # fmt: skip
    forged_stop = StopReplicaRequest(
        controller_id=leader.broker_id,
        controller_epoch=HUGE_EPOCH,
        broker_epoch=-1,
        partitions=[
            StopReplicaPartition(topic="orders", partition=0, leader_epoch=-2, delete_partition=True)
        ],
    )
    create = CreateTopicsRequest(
        topics=[CreatableTopic(name="intruder", num_partitions=1, replication_factor=1)]
    )
    for request in (forged_order, forged_stop, produce("orders"), create):
        await unauthenticated(leader, request)
    log = leader.log()
    for api in ("LEADER_AND_ISR", "STOP_REPLICA", "PRODUCE", "CREATE_TOPICS"):
        assert f"{api} before SASL authentication completed" in log, api

    assert (leader.home / "data" / "orders-0").is_dir()
    assert await log_end(leader, "orders") == 1
    assert await controller_epoch_seen(leader) == epoch_before
    assert kazoo.get("/brokers/topics/orders/partitions/0/state")[0] == state_before
    assert kazoo.exists("/brokers/topics/intruder") is None


async def test_a_wrong_password_fails_with_58(cluster: SaslCluster) -> None:
    with pytest.raises(SaslAuthenticationFailed) as caught:
        await ask(cluster.brokers[0], MetadataRequest(topics=[]), as_user("admin", "not-the-password"))
    assert caught.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED == 58


async def test_a_user_without_acls_is_refused_until_keel_acl_adds_one(
    cluster: SaslCluster, kazoo: KazooClient
) -> None:
    add_user(cluster.zk_connect, "alice")
    alice = as_user("alice")
    leader = cluster.by_id(leader_of(kazoo, "orders"))

    async def known() -> Response | None:
        try:
            return await ask(leader, MetadataRequest(topics=[]), alice)
        except SaslAuthenticationFailed:
            return None

    await eventually(known, timeout=10, interval=0.1, message="the brokers did not learn of alice")
    state_before = kazoo.get("/brokers/topics/orders/partitions/0/state")[0]
    order = LeaderAndIsrRequest(
        controller_id=leader.broker_id,
        controller_epoch=HUGE_EPOCH,
        broker_epoch=-1,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="orders", partition=0, controller_epoch=HUGE_EPOCH, leader=leader.broker_id,
                leader_epoch=HUGE_EPOCH, isr=[leader.broker_id], partition_epoch=HUGE_EPOCH, replicas=[1, 2],
            )
        ],
    )  # fmt: skip
    assert (await ask(leader, order, alice)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED == 31
    assert await produce_error(leader, "orders", alice) == ErrorCode.TOPIC_AUTHORIZATION_FAILED == 29
    created = await ask(
        leader, CreateTopicsRequest(topics=[CreatableTopic(name="alices", num_partitions=1)]), alice
    )
    assert isinstance(created, CreateTopicsResponse)
    assert [t.error_code for t in created.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert await log_end(leader, "orders") == 1
    assert kazoo.get("/brokers/topics/orders/partitions/0/state")[0] == state_before
    assert kazoo.exists("/brokers/topics/alices") is None

    granted = keel(
        "acl", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders",
        "--zookeeper-connect", cluster.zk_connect,
    )  # fmt: skip
    assert granted.returncode == 0, granted.stderr

    async def allowed() -> bool:
        return await produce_error(leader, "orders", alice) == ErrorCode.NONE

    await eventually(allowed, timeout=10, interval=0.1, message="the ACL did not apply without a restart")
    assert await log_end(leader, "orders") == 2
    assert (await ask(leader, order, alice)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
