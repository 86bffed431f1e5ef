"""TLS and SASL on real broker processes: SSL and SASL_SSL listeners beside the PLAINTEXT one
the harness watches the brokers on, clients with and without the right credentials, and a
cluster whose controller channel and fetchers run over SASL_SSL.

As Kafka's, the SCRAM users live in ZooKeeper (`/config/users`, written before the brokers
start) and the PLAIN users in the listener's PlainLoginModule entry. The authorizer is off
here (tests/integration/test_authorization.py has it): these tests are about who connects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.producer import KeelProducer
from node.cluster.security import ClusterSecurity, create_scram_users, jaas_entry, make_cluster_security
from node.cluster.zookeeper import free_ports
from node.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE
from node.security.settings import client_security_from_properties
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import log_records
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, keel
from wire import records
from wire.api import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from wire.client import RpcClient
from wire.errors import ErrorCode, NetworkException, SaslAuthenticationFailed
from wire.security import ClientSecurity

pytestmark = pytest.mark.plain_pass_only(
    "its brokers have PLAINTEXT, SSL and SASL_SSL listeners with users of their own, "
    "and it checks clients without credentials"
)


@pytest.fixture(scope="module")
def cluster_security(tmp_path_factory: pytest.TempPathFactory) -> ClusterSecurity:
    return make_cluster_security(tmp_path_factory.mktemp("pki"), "sasl", admin_password="admin-secret")


@pytest.fixture(autouse=True)
async def scram_users(zk_connect: str) -> None:
    """The brokers' own user and alice, in `/config/users` before any broker starts."""
    await create_scram_users(zk_connect, {"admin": "admin-secret", "alice": "alice"})


def secured_broker(
    brokers: Brokers, broker_id: int, security: ClusterSecurity, **extra: str
) -> tuple[BrokerProcess, int, int]:
    """A broker with PLAINTEXT (the harness's), SSL and SASL_SSL listeners; (broker, SSL
    port, SASL_SSL port). Its own identity is admin; carol is a PLAIN user of SASL_SSL."""
    plain, ssl_port, sasl_port = free_ports(3)
    without_authorizer = {
        k: v for k, v in security.broker_settings.items() if k not in ("authorizer.class.name", "super.users")
    }
    settings = {
        **without_authorizer,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "sasl.jaas.config": jaas_entry("admin", "admin-secret"),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_entry(
            "admin", "admin-secret", module=PLAIN_LOGIN_MODULE, carol="carol-secret"
        ),
        **extra,
    }
    return brokers.new(broker_id, settings, port=plain), ssl_port, sasl_port


async def broker_leading(
    brokers: Brokers, kazoo: KazooClient, security: ClusterSecurity, topic: str
) -> tuple[BrokerProcess, int]:
    """One secured broker, started, leading a new one-partition `topic`; (broker, SASL_SSL port)."""
    broker, _, sasl_port = secured_broker(brokers, 1, security)
    broker.start()
    await controller_of(brokers)
    await create_topic(broker, topic, partitions=1, rf=1)
    await settled_to(brokers, kazoo, topic, lambda s: s[0][0] == 1, "no leader")
    return broker, sasl_port


def client(security: ClusterSecurity, **overrides: str) -> ClientSecurity:
    return client_security_from_properties({**security.client_properties, **overrides})


async def test_tls_clients_and_a_plaintext_client_on_the_tls_port(
    brokers: Brokers, cluster_security: ClusterSecurity
) -> None:
    broker, ssl_port, _ = secured_broker(brokers, 1, cluster_security)
    broker.start()
    await controller_of(brokers)
    tls = client(cluster_security, **{"security.protocol": "SSL"})
    async with KeelAdminClient(f"127.0.0.1:{ssl_port}", security=tls) as admin:
        described = await admin.describe_cluster()
    assert [b.broker_id for b in described.brokers] == [1]
    # Metadata names the broker by the listener the request came in on. Its cache is filled by
    # the controller's first UpdateMetadata, sent at the end of the failover, so wait for it.

    async def metadata_brokers() -> list[tuple[str, int]]:
        async with KeelAdminClient(f"127.0.0.1:{ssl_port}", security=tls) as admin:
            metadata = await admin.metadata(None)
        return [(b.host, b.port) for b in metadata.brokers]

    listed = await eventually(
        metadata_brokers, timeout=20, interval=0.2, message="the broker's metadata never listed a broker"
    )
    assert listed == [("127.0.0.1", ssl_port)]

    # A plaintext client on the TLS port gets a closed connection, not an answer or a hang.
    plain = await RpcClient.connect("127.0.0.1", ssl_port, request_timeout=5)
    with pytest.raises(NetworkException):
        await plain.send(ApiVersionsRequest())
    await plain.close()
    # A client that does not trust the broker's CA refuses it.
    with pytest.raises(NetworkException, match="TLS"):
        await RpcClient.connect(
            "127.0.0.1", ssl_port, security_protocol="SSL", security=ClientSecurity("SSL"), connect_timeout=5
        )
    assert broker.running
    async with KeelAdminClient(f"127.0.0.1:{ssl_port}", security=tls) as admin:
        assert (await admin.describe_cluster()).cluster_id == described.cluster_id
    # Authentication without an authorizer lets every authenticated client do anything: said once.
    assert broker.log().count("but no authorizer.class.name is set") == 1


async def test_mutual_tls_is_required_when_ssl_client_auth_is_required(
    brokers: Brokers, cluster_security: ClusterSecurity
) -> None:
    broker, ssl_port, _ = secured_broker(brokers, 1, cluster_security, **{"ssl.client.auth": "required"})
    broker.start()
    await controller_of(brokers)
    with_certificate = client(cluster_security, **{"security.protocol": "SSL"})
    async with KeelAdminClient(f"127.0.0.1:{ssl_port}", security=with_certificate) as admin:
        assert [b.broker_id for b in (await admin.describe_cluster()).brokers] == [1]
    props = {k: v for k, v in cluster_security.client_properties.items() if k != "ssl.keystore.location"}
    without = client_security_from_properties({**props, "security.protocol": "SSL"})
    with pytest.raises(NetworkException):
        async with KeelAdminClient(f"127.0.0.1:{ssl_port}", security=without, timeout=5) as admin:
            await admin.describe_cluster()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_clients_produce_and_the_cli_takes_command_config(
    brokers: Brokers, kazoo: KazooClient, cluster_security: ClusterSecurity, mechanism: str, tmp_path: Path
) -> None:
    _, sasl_port = await broker_leading(brokers, kazoo, cluster_security, "secured")
    alice = client(
        cluster_security, **{"sasl.mechanism": mechanism, "sasl.jaas.config": jaas_entry("alice", "alice")}
    )
    async with KeelProducer(f"127.0.0.1:{sasl_port}", acks=-1, security=alice) as producer:
        delivered = await producer.send_many("secured", [(None, b"over SASL_SSL")])
    assert [d.base_offset for d in delivered] == [0]

    config = tmp_path / "client.properties"
    config.write_text(
        cluster_security.client_config.read_text().replace("SCRAM-SHA-512", mechanism), encoding="utf-8"
    )
    described = keel(
        "--command-config", str(config), "--bootstrap-server", f"127.0.0.1:{sasl_port}", "cluster", "describe"
    )
    assert described.returncode == 0, described.stderr
    assert str(sasl_port) in described.stdout, "brokers are named by the listener the client came in on"


async def test_plain_users_are_the_listeners_and_scram_users_are_zookeepers(
    brokers: Brokers, cluster_security: ClusterSecurity, zk_connect: str
) -> None:
    """PLAIN (offered on SASL_SSL) knows only `user_carol` of the listener's PlainLoginModule
    entry; SCRAM only `/config/users`, where a user added while the broker runs is known at
    once and a deleted one is refused."""
    broker, _, sasl_port = secured_broker(brokers, 1, cluster_security)
    broker.start()
    await controller_of(brokers)

    async def connects(mechanism: str, user: str, password: str) -> bool:
        security = client(
            cluster_security,
            **{
                "sasl.mechanism": mechanism,
                "sasl.jaas.config": jaas_entry(
                    user, password, module=PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
                ),
            },
        )
        try:
            connection = await RpcClient.connect(
                "127.0.0.1", sasl_port, security_protocol="SASL_SSL", security=security, connect_timeout=10
            )
        except SaslAuthenticationFailed:
            return False
        await connection.close()
        return True

    assert await connects("PLAIN", "carol", "carol-secret")
    assert not await connects("PLAIN", "alice", "alice"), "a SCRAM user is not a PLAIN user"
    assert not await connects("SCRAM-SHA-512", "carol", "carol-secret"), "nor a PLAIN user a SCRAM one"
    assert not await connects("SCRAM-SHA-512", "dave", "dave-secret")
    await create_scram_users(zk_connect, {"dave": "dave-secret"})
    await eventually(
        lambda: connects("SCRAM-SHA-512", "dave", "dave-secret"), timeout=15, message="dave never known"
    )
    removed = keel("user", "delete", "dave", "--zookeeper", zk_connect)
    assert removed.returncode == 0, removed.stderr
    await eventually(
        lambda: _not(connects("SCRAM-SHA-512", "dave", "dave-secret")), timeout=15, message="dave still known"
    )


async def _not(answer: Awaitable[bool]) -> bool:
    return not await answer


async def test_wrong_password_fails_with_58_after_the_delay_and_others_are_served(
    brokers: Brokers, cluster_security: ClusterSecurity
) -> None:
    delay_ms = 1500
    broker, _, sasl_port = secured_broker(
        brokers, 1, cluster_security, **{"connection.failed.authentication.delay.ms": str(delay_ms)}
    )
    broker.start()
    await controller_of(brokers)
    good = await RpcClient.connect(
        "127.0.0.1", sasl_port, security_protocol="SASL_SSL", security=client(cluster_security)
    )
    wrong = client(cluster_security, **{"sasl.jaas.config": jaas_entry("admin", "not-the-password")})

    async def fail() -> tuple[SaslAuthenticationFailed, float]:
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationFailed) as caught:
            await RpcClient.connect("127.0.0.1", sasl_port, security_protocol="SASL_SSL", security=wrong)
        return caught.value, time.monotonic() - started

    failing = asyncio.create_task(fail())
    # While the failed client waits out its delay, an authenticated one is answered at once.
    answered = []
    while not failing.done():
        started = time.monotonic()
        await good.send(DescribeClusterRequest())
        answered.append(time.monotonic() - started)
        await asyncio.sleep(0.05)
    error, elapsed = await failing
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED == 58
    assert elapsed >= delay_ms / 1000 * 0.9, "the failure is answered only after the delay"
    assert len(answered) >= 5 and max(answered) < delay_ms / 1000 / 2, "the broker kept serving the others"
    assert "failed authentication from" in broker.log()
    await good.close()


async def test_a_produce_before_authentication_closes_the_connection(
    brokers: Brokers, kazoo: KazooClient, cluster_security: ClusterSecurity
) -> None:
    broker, sasl_port = await broker_leading(brokers, kazoo, cluster_security, "untouched")
    # TLS only: the connection never authenticates before it sends the Produce.
    tls_only = client(cluster_security, **{"security.protocol": "SSL"})
    sneaky = await RpcClient.connect("127.0.0.1", sasl_port, security_protocol="SSL", security=tls_only)
    versions = await sneaky.send(ApiVersionsRequest())  # allowed before authentication
    assert isinstance(versions, ApiVersionsResponse) and not versions.error_code
    batch = records.build_batch([(None, b"forged")], timestamp=1)
    produce = ProduceRequest(
        acks=1,
        topic_data=[
            ProduceTopicData(name="untouched", partition_data=[ProducePartitionData(index=0, records=batch)])
        ],
    )
    with pytest.raises(NetworkException):
        await sneaky.send(produce, timeout=5)
    await sneaky.close()
    assert "PRODUCE before SASL authentication completed" in broker.log()
    assert log_records(broker, "untouched", 0) == [], "nothing was appended"


async def test_three_brokers_elect_and_replicate_over_sasl_ssl(
    brokers: Brokers, kazoo: KazooClient, cluster_security: ClusterSecurity
) -> None:
    started = [
        secured_broker(brokers, i, cluster_security, **{"security.inter.broker.protocol": "SASL_SSL"})[
            0
        ].start()
        for i in (1, 2, 3)
    ]
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "replicated", partitions=3, rf=3)
    await settled_to(
        brokers, kazoo, "replicated", lambda s: all(len(isr) == 3 for _, _, isr in s.values()), "ISR"
    )
    async with KeelProducer(",".join(f"127.0.0.1:{b.port}" for b in started), acks=-1) as producer:
        delivered = await producer.send_many("replicated", [(None, f"r{i}".encode()) for i in range(30)])
    assert sum(d.count for d in delivered) == 30

    async def followers_caught_up() -> bool:
        logs = [[len(log_records(b, "replicated", p)) for b in started] for p in range(3)]
        same = all(len(set(per_partition)) == 1 for per_partition in logs)
        return same and sum(counts[0] for counts in logs) == 30

    await eventually(
        followers_caught_up, timeout=30, message="followers did not copy the records over SASL_SSL"
    )
    registration = orjson.loads(kazoo.get("/brokers/ids/1")[0])
    assert registration["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
        "SASL_SSL": "SASL_SSL",
    }
    assert [e.split("://")[0] for e in registration["endpoints"]] == ["PLAINTEXT", "SSL", "SASL_SSL"]
