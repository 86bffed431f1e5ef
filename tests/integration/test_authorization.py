"""ACL authorization on real brokers and ZooKeeper (Kafka's AclAuthorizer).

Every connection is PLAINTEXT, so every client is `User:ANONYMOUS`; what tells the brokers
from an outsider is the host. The brokers (and the test's own setup) reach each other from
127.0.0.1, which the ACLs grant ClusterAction, Create and Describe on the cluster and
Describe on every topic, written with `keel acl` before the brokers start. The outsider
connects from 127.0.0.2 (another loopback address), which no ACL names until the test adds
one. So the brokers' own traffic (the controller's requests, follower fetches, AlterPartition)
passes on ACLs alone, with no super user, and the refusals are the outsider's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually, keel
from wire import records
from wire.api import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    FetchRequest,
    FetchResponse,
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
    ReelectControllerRequest,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from wire.client import RpcClient
from wire.errors import ErrorCode
from wire.frames import DEFAULT_MAX_FRAME_SIZE

pytestmark = pytest.mark.plain_pass_only(
    "its principals are anonymous PLAINTEXT clients told apart by host, with ACLs instead of super users"
)

OUTSIDER = "127.0.0.2"
HUGE_EPOCH = 2**31 - 1
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}


def acl(zk_connect: str, *args: str) -> None:
    result = keel("acl", *args, "--zookeeper-connect", zk_connect)
    assert result.returncode == 0, result.stderr


async def connect(broker: BrokerProcess, source: str) -> RpcClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port, local_addr=(source, 0))
    return RpcClient(
        reader,
        writer,
        address=f"127.0.0.1:{broker.port}",
        client_id=f"from-{source}",
        request_timeout=10,
        max_frame_size=DEFAULT_MAX_FRAME_SIZE,
    )


async def ask(broker: BrokerProcess, request: object, source: str = OUTSIDER) -> Response:
    client = await connect(broker, source)
    try:
        return await client.send(request)  # type: ignore[arg-type]
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


async def produce_error(broker: BrokerProcess, topic: str, source: str = OUTSIDER) -> int:
    answer = await ask(broker, produce(topic), source)
    assert isinstance(answer, ProduceResponse)
    (topic_answer,) = answer.responses
    return topic_answer.partition_responses[0].error_code


async def log_end(broker: BrokerProcess, topic: str) -> int:
    request = ListOffsetsRequest(
        topics=[ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0)])]
    )
    answer = await ask(broker, request, source="127.0.0.1")
    assert isinstance(answer, ListOffsetsResponse)
    return answer.topics[0].partitions[0].offset


async def controller_epoch_seen(broker: BrokerProcess) -> int:
    answer = await ask(broker, MetadataRequest(topics=[]), source="127.0.0.1")
    assert isinstance(answer, MetadataResponse)
    return answer.controller_epoch


@pytest.fixture
async def secured(
    brokers: Brokers, zk_connect: str, kazoo: KazooClient
) -> AsyncIterator[list[BrokerProcess]]:
    """Two brokers with the authorizer on, the trusted host's ACLs, and a topic `orders`
    (replicated on both, so follower fetches must pass) and `payments`."""
    acl(
        zk_connect,
        "add",
        "--allow-principal", "User:ANONYMOUS",
        "--allow-host", "127.0.0.1",
        "--operation", "ClusterAction",
        "--operation", "Create",
        "--operation", "Describe",
        "--cluster",
    )  # fmt: skip
    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--allow-host", "127.0.0.1",
        "--operation", "Describe", "--topic", "*")  # fmt: skip
    started = [brokers.new(i, AUTHORIZER).start() for i in (1, 2)]
    await brokers.wait_for_controller(timeout=30)
    async with KeelAdminClient(f"127.0.0.1:{started[0].port}", timeout=20) as admin:
        for topic in ("orders", "payments"):
            created = await admin.create_topics(
                [CreatableTopic(name=topic, num_partitions=1, replication_factor=2)]
            )
            assert created.topics[0].error_code == 0, created

    async def replicated() -> bool:
        answer = await ask(started[0], MetadataRequest(topics=["orders", "payments"]), source="127.0.0.1")
        assert isinstance(answer, MetadataResponse)
        return all(len(t.partitions) == 1 and len(t.partitions[0].isr) == 2 for t in answer.topics)

    await eventually(replicated, timeout=30, message="the topics did not get both replicas in sync")
    yield started


def leader_of(kazoo: KazooClient, topic: str) -> int:
    import orjson

    state, _ = kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")
    return int(orjson.loads(state)["leader"])


async def test_forged_control_requests_are_refused_and_change_nothing(
    secured: list[BrokerProcess], kazoo: KazooClient, zk_connect: str
) -> None:
    broker = next(b for b in secured if b.broker_id == leader_of(kazoo, "orders"))
    # A record in the log (the trusted host may write it), so there is a log to lose.
    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--allow-host", "127.0.0.1",
        "--operation", "Write", "--topic", "orders")  # fmt: skip

    async def written() -> bool:
        return await produce_error(broker, "orders", "127.0.0.1") == ErrorCode.NONE

    await eventually(written, timeout=10, message="the trusted host could not write")
    assert (broker.home / "data" / "orders-0").is_dir()
    epoch_before = await controller_epoch_seen(broker)
    state_before = kazoo.get("/brokers/topics/orders/partitions/0/state")[0]
    forged_order = LeaderAndIsrRequest(
        controller_id=2,
        controller_epoch=HUGE_EPOCH,
        broker_epoch=-1,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="orders", partition=0, controller_epoch=HUGE_EPOCH, leader=broker.broker_id,
                leader_epoch=HUGE_EPOCH, isr=[broker.broker_id], partition_epoch=HUGE_EPOCH, replicas=[1, 2],
            )
        ],
    )  # fmt: skip
    forged_stop = StopReplicaRequest(
        controller_id=2,
        controller_epoch=HUGE_EPOCH,
        broker_epoch=-1,
        partitions=[
            StopReplicaPartition(topic="orders", partition=0, leader_epoch=-2, delete_partition=True)
        ],
    )
    forged_update = UpdateMetadataRequest(controller_id=2, controller_epoch=HUGE_EPOCH)
    for forged in (forged_order, forged_stop, forged_update):
        answer = await ask(broker, forged)
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, forged
    assert (
        await ask(broker, ReelectControllerRequest())
    ).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # ElectLeaders is refused as Kafka refuses it: 31 at the top and for each named partition.
    elect = ElectLeadersRequest(
        election_type=1, topic_partitions=[ElectLeadersTopicPartitions(topic="orders", partitions=[0])]
    )
    refused = await ask(broker, elect)
    assert isinstance(refused, ElectLeadersResponse)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [
        (r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
        for r in refused.replica_election_results
    ] == [("orders", [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])]

    # Nothing changed: the log is there, the stored controller epoch was not raised, the
    # partition's state and /controller are as they were.
    assert (broker.home / "data" / "orders-0").is_dir()
    assert await log_end(broker, "orders") == 1
    assert await controller_epoch_seen(broker) == epoch_before
    assert kazoo.get("/brokers/topics/orders/partitions/0/state")[0] == state_before
    assert kazoo.exists("/controller") is not None
    # And the real controller is still obeyed: a new topic on both brokers gets served.
    async with KeelAdminClient(f"127.0.0.1:{broker.port}", timeout=20) as admin:
        created = await admin.create_topics(
            [CreatableTopic(name="later", num_partitions=1, replication_factor=2)]
        )
        assert created.topics[0].error_code == 0

    async def later_served() -> bool:
        if kazoo.exists("/brokers/topics/later/partitions/0/state") is None:
            return False
        leader = next(b for b in secured if b.broker_id == leader_of(kazoo, "later"))
        return await log_end(leader, "later") == 0

    await eventually(later_served, timeout=20, message="the controller's LeaderAndIsr was not applied")


async def test_a_follower_fetch_without_cluster_action_is_refused_whole_and_touches_no_session(
    secured: list[BrokerProcess], kazoo: KazooClient, zk_connect: str
) -> None:
    """An outsider claiming to be the follower: a full fetch naming no topic (which used to
    pass authorization with nothing to refuse, and replace the follower's session), and
    incremental fetches of guessed session ids (which used to be sequential). Each is refused
    as a whole; the real follower replicates on."""
    leader = next(b for b in secured if b.broker_id == leader_of(kazoo, "orders"))
    follower_id = next(b.broker_id for b in secured if b is not leader)
    claims = [FetchRequest(replica_id=follower_id, max_wait_ms=0, session_id=0, session_epoch=0)]
    claims += [
        FetchRequest(replica_id=follower_id, max_wait_ms=0, session_id=guess, session_epoch=epoch)
        for guess in range(1, 6)
        for epoch in (1, 2)
    ]
    for claim in claims:
        answer = await ask(leader, claim)
        assert isinstance(answer, FetchResponse)
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, claim
        assert answer.responses == []
    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--allow-host", "127.0.0.1",
        "--operation", "Write", "--topic", "orders")  # fmt: skip

    async def replicated() -> bool:  # acks=-1: the follower's session still serves it
        return await produce_error(leader, "orders", "127.0.0.1") == ErrorCode.NONE

    await eventually(replicated, timeout=20, message="the follower stopped replicating")


async def test_a_metadata_naming_a_200k_character_topic_is_answered_at_once(
    secured: list[BrokerProcess], kazoo: KazooClient, zk_connect: str
) -> None:
    """Every prefix of the name used to be built and looked up in the ACL cache: tens of
    seconds of the broker's loop for one request, past its ZooKeeper session."""
    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--operation", "Describe",
        "--topic", "pay", "--resource-pattern-type", "prefixed")  # fmt: skip
    broker = secured[0]
    registered = kazoo.get(f"/brokers/ids/{broker.broker_id}")[1].czxid
    answer = await asyncio.wait_for(ask(broker, MetadataRequest(topics=["t" * 200_000, "payments"])), 5)
    assert isinstance(answer, MetadataResponse)
    assert sorted((len(t.name), t.error_code) for t in answer.topics) == [
        (len("payments"), ErrorCode.NONE),
        (200_000, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert kazoo.get(f"/brokers/ids/{broker.broker_id}")[1].czxid == registered, "its session held"


async def test_produce_and_create_topics_wait_for_an_acl_which_applies_without_a_restart(
    secured: list[BrokerProcess], kazoo: KazooClient, zk_connect: str
) -> None:
    broker = next(b for b in secured if b.broker_id == leader_of(kazoo, "orders"))
    assert await produce_error(broker, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert await log_end(broker, "orders") == 0

    create = CreateTopicsRequest(
        topics=[CreatableTopic(name="intruder", num_partitions=1, replication_factor=1)]
    )
    created = await ask(broker, create)
    assert isinstance(created, CreateTopicsResponse)
    assert [t.error_code for t in created.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert kazoo.exists("/brokers/topics/intruder") is None

    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "orders")

    async def allowed() -> bool:
        return await produce_error(broker, "orders") == ErrorCode.NONE

    await eventually(allowed, timeout=10, message="the new ACL did not apply")
    assert await log_end(broker, "orders") >= 1  # and it replicated: acks=-1 on two replicas
    assert await produce_error(broker, "payments") == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    acl(
        zk_connect,
        "remove",
        "--allow-principal",
        "User:ANONYMOUS",
        "--operation",
        "Write",
        "--topic",
        "orders",
    )

    async def refused_again() -> bool:
        return await produce_error(broker, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    await eventually(refused_again, timeout=10, message="the removed ACL still applies")


async def test_a_prefixed_allow_and_a_deny_that_overrides_it(
    secured: list[BrokerProcess], kazoo: KazooClient, zk_connect: str
) -> None:
    broker = next(b for b in secured if b.broker_id == leader_of(kazoo, "payments"))
    acl(zk_connect, "add", "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
        "--topic", "pay", "--resource-pattern-type", "prefixed")  # fmt: skip
    assert kazoo.exists("/kafka-acl-extended/prefixed/Topic/pay") is not None

    async def produced() -> bool:
        return await produce_error(broker, "payments") == ErrorCode.NONE

    await eventually(produced, timeout=10, message="the prefixed ACL did not apply")
    assert await produce_error(broker, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    acl(zk_connect, "add", "--deny-principal", "User:ANONYMOUS", "--deny-host", OUTSIDER,
        "--operation", "Write", "--topic", "payments")  # fmt: skip

    async def denied() -> bool:
        return await produce_error(broker, "payments") == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    await eventually(denied, timeout=10, message="the deny did not override the allow")
    listed = keel("acl", "list", "--topic", "payments", "--zookeeper-connect", zk_connect)
    assert "Deny" in listed.stdout and OUTSIDER in listed.stdout


def test_keel_acl_writes_kafkas_layout_and_refuses_bad_input(zk_connect: str, kazoo: KazooClient) -> None:
    import orjson

    acl(zk_connect, "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    value, _ = kazoo.get("/kafka-acl/Topic/orders")
    assert orjson.loads(value) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    (change,) = kazoo.get_children("/kafka-acl-changes")
    assert change.startswith("acl_changes_")
    assert kazoo.get(f"/kafka-acl-changes/{change}")[0] == b"TOPIC:orders"

    for bad, message in (
        (["--allow-principal", "alice", "--topic", "t"], "Type:name"),
        (["--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown operation"),
        (["--allow-principal", "User:a", "--operation", "ClusterAction", "--topic", "t"], "only supports"),
        (["--allow-principal", "User:a"], "name a resource"),
    ):
        result = keel("acl", "add", *bad, "--zookeeper-connect", zk_connect)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert kazoo.get_children("/kafka-acl/Topic") == ["orders"]

    spelled = keel(
        "acl", "list", "--authorizer-properties", f"zookeeper.connect={zk_connect}", "--format", "json"
    )
    assert orjson.loads(spelled.stdout)[0]["acls"][0]["principal"] == "User:alice"
    removed = keel("acl", "remove", "--topic", "orders", "--zookeeper-connect", zk_connect)
    assert removed.returncode == 0
    assert kazoo.exists("/kafka-acl/Topic/orders") is None


def test_an_unknown_authorizer_class_is_a_one_line_start_up_error(tmp_path: Path, zk_connect: str) -> None:
    from tests.support import run_command

    properties = tmp_path / "server.properties"
    properties.write_text(
        f"broker.id=1\nzookeeper.connect={zk_connect}\nlog.dirs={tmp_path / 'data'}\n"
        "listeners=PLAINTEXT://127.0.0.1:0\nauthorizer.class.name=com.example.Nope\n"
    )
    result = run_command("node.broker.main", str(properties), timeout=60)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "authorizer.class.name" in line and "com.example.Nope" in line
