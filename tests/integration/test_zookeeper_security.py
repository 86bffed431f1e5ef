"""What security keeps in ZooKeeper, on a real ZooKeeper: Kafka's ACLs on Keel's znodes with
`zookeeper.set.acl=true` and after `keel zookeeper secure`, checked by an unauthenticated
kazoo client; SCRAM users in `/config/users` as Kafka writes them, followed into a broker's
credential cache without a restart."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from actors.base.clock import SystemClock
from actors.security.credential_cache import CredentialCache
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk import paths
from node.zk.acls import DigestCredentials, ZkSecurity
from node.zk.client import NoAuth, ZooKeeperClient
from node.zk.config_store import ZkConfigStore
from node.zk.dynamic_config import credential_follower
from node.zk.store import ZkClusterStore
from tests.integration.conftest import Brokers
from tests.scram import authenticates, kafka_user_config
from tests.support import eventually, eventually_sync, run_command

SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
JAAS = """Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="keel"
    password="%s";
};
"""


@pytest.fixture
def jaas(tmp_path: Path) -> Path:
    path = tmp_path / "zk_client_jaas.conf"
    path.write_text(JAAS % "keel-secret")
    return path


@pytest.fixture
def command_config(tmp_path: Path, jaas: Path) -> Path:
    """What `keel` is given to act as Keel's identity in ZooKeeper."""
    path = tmp_path / "admin.properties"
    path.write_text(f"java.security.auth.login.config={jaas}\n")
    return path


@pytest.fixture
def outsider(zookeeper: EmbeddedZooKeeper, chroot: str) -> Iterator[Callable[[], KazooClient]]:
    """A ZooKeeper client with no credentials on the cluster's chroot, connected when first
    asked for: once the brokers have created the chroot, with its ACLs."""
    clients: list[KazooClient] = []

    def connect() -> KazooClient:
        if not clients:
            client = KazooClient(hosts=zookeeper.connect_string + chroot)
            client.start(timeout=10)
            clients.append(client)
        return clients[0]

    yield connect
    for client in clients:
        client.stop()
        client.close()


def keel(*args: str) -> Any:
    return run_command("node.cli.main", *args, timeout=60)


def create_topic(brokers: Brokers, topic: str) -> None:
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers.running())
    result = keel(
        "topic", "create", "--topic", topic, "--partitions", "2", "--replication-factor", "2",
        "--bootstrap-server", bootstrap,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def assert_outsider_refused(connect: Callable[[], KazooClient], topic: str, user: str) -> None:
    """Kafka's promise: others may read the cluster, not change it nor read credentials."""
    outsider = connect()
    state = f"/brokers/topics/{topic}/partitions/0/state"
    # CreateTopics answers once the topic is written; the controller writes its partition
    # states afterwards, all in one multi-op, so one partition with a leader is enough.
    eventually_sync(
        lambda: outsider.exists(state) is not None and orjson.loads(outsider.get(state)[0])["leader"] >= 0,
        timeout=30,
        message=f"{topic} has no partition state with a leader",
    )
    with pytest.raises(NoAuthError):
        outsider.delete("/controller")
    with pytest.raises(NoAuthError):
        outsider.set(state, b'{"controller_epoch":99,"leader":-1,"version":1,"leader_epoch":99,"isr":[]}')
    with pytest.raises(NoAuthError):
        outsider.create(f"/brokers/topics/{topic}/partitions/9")
    with pytest.raises(NoAuthError):
        outsider.get(f"/config/users/{user}")
    with pytest.raises(NoAuthError):
        outsider.get_children("/config/users")
    assert topic in outsider.get_children("/brokers/topics")
    assert outsider.exists("/controller") is not None


def user_add(zk_connect: str, command_config: Path | None, *args: str) -> Any:
    config = [] if command_config is None else ["--command-config", str(command_config)]
    return keel("user", *args, "--zookeeper", zk_connect, *config)


def broker_knows(brokers: Brokers, line: str) -> bool:
    return all(line in broker.log() for broker in brokers.running())


async def test_a_secured_client_gives_kafkas_acls_and_authenticates_again_on_a_new_session(
    zookeeper: EmbeddedZooKeeper, chroot: str
) -> None:
    security = ZkSecurity(set_acl=True, credentials=DigestCredentials("keel", "keel-secret"))
    zk = ZooKeeperClient(
        zookeeper.connect_string + chroot, session_timeout_s=4, connection_timeout_s=10, security=security
    )
    await zk.start()
    try:
        store = ZkClusterStore(zk, SystemClock())
        await store.ensure_persistent_paths()
        digest = {(a.id.scheme, a.perms) for a in await zk.get_acl("/")}
        assert ("digest", 31) in digest and ("world", 1) in digest  # the chroot itself
        assert {(a.id.scheme, a.perms) for a in await zk.get_acl("/config/users")} == {("digest", 31)}
        assert [a.id.id for a in await zk.get_acl("/consumers")] == ["anyone"]
        # Expire the session from outside: the new one must authenticate before it writes.
        old = zk.session_id
        assert old is not None
        expirer = KazooClient(hosts=zookeeper.connect_string, client_id=(old, zk.session_password))
        expirer.start(timeout=10)
        expirer.stop()
        expirer.close()
        await eventually(
            lambda: _async(zk.session_id not in (None, old)), timeout=20, message="no new session"
        )
        await zk.create("/config/users/after-expiry", b"{}")
        assert {a.id.scheme for a in await zk.get_acl("/config/users/after-expiry")} == {"digest"}
    finally:
        await zk.close()
    stranger = ZooKeeperClient(
        zookeeper.connect_string + chroot,
        session_timeout_s=4,
        connection_timeout_s=10,
        security=ZkSecurity(credentials=DigestCredentials("keel", "another-password")),
    )
    await stranger.start()
    try:
        with pytest.raises(NoAuth):
            await stranger.get("/config/users/after-expiry")
    finally:
        await stranger.close()


async def test_a_broker_warns_when_the_chroot_it_is_given_is_open(
    zk_connect: str, kazoo: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The `kazoo` fixture made the chroot without ACLs: anyone could delete `/controller`."""
    security = ZkSecurity(set_acl=True, credentials=DigestCredentials("keel", "keel-secret"))
    zk = ZooKeeperClient(zk_connect, session_timeout_s=4, connection_timeout_s=10, security=security)
    await zk.start()
    try:
        with caplog.at_level(logging.WARNING, logger="node.zk.store"):
            await ZkClusterStore(zk, SystemClock()).ensure_persistent_paths()
        assert "is open to anyone, who can delete /controller" in caplog.text
    finally:
        await zk.close()


async def _async(value: bool) -> bool:
    return value


async def test_a_user_written_by_kafkas_tool_authenticates_and_a_deleted_one_does_not(
    zk_connect: str, kazoo: KazooClient
) -> None:
    """Write `/config/users/alice` and its notification exactly as `kafka-configs` does, and
    run a SCRAM exchange with scramp's client against the broker's lookup."""
    kazoo.ensure_path("/config/changes")
    kazoo.ensure_path("/config/users")
    kazoo.create("/config/users/bob", kafka_user_config(SHA512, "bob-secret", 8192))
    zk = ZooKeeperClient(zk_connect, session_timeout_s=10, connection_timeout_s=10)
    await zk.start()
    cache = CredentialCache()
    manager = credential_follower(ZkConfigStore(zk), cache, SystemClock())
    await manager.startup()
    lookup = cache.credential
    try:
        assert authenticates(lookup, SHA512, "bob", "bob-secret")  # read at start-up
        kazoo.create("/config/users/alice", kafka_user_config(SHA256, "alice-secret"))
        notification = orjson.dumps({"version": 2, "entity_path": "users/alice"})
        kazoo.create(f"/config/changes/{paths.CONFIG_CHANGE_PREFIX}", notification, sequence=True)
        await eventually(
            lambda: _async(lookup("alice", SHA256) is not None), timeout=10, message="alice never arrived"
        )
        assert authenticates(lookup, SHA256, "alice", "alice-secret")
        assert not authenticates(lookup, SHA256, "alice", "bob-secret")
        assert not authenticates(lookup, SHA512, "alice", "alice-secret")
        kazoo.delete("/config/users/alice")
        kazoo.create(f"/config/changes/{paths.CONFIG_CHANGE_PREFIX}", notification, sequence=True)
        await eventually(
            lambda: _async(lookup("alice", SHA256) is None), timeout=10, message="alice was never removed"
        )
        assert not authenticates(lookup, SHA256, "alice", "alice-secret")
        assert authenticates(lookup, SHA512, "bob", "bob-secret")
    finally:
        await manager.shutdown()
        await zk.close()


@pytest.mark.plain_pass_only(
    "it checks every user in /config/users and their ZooKeeper ACLs; the secured pass writes "
    "users of its own there before the brokers start, with no ZooKeeper credentials"
)
async def test_with_set_acl_outsiders_cannot_change_the_cluster_and_users_reach_the_brokers(
    brokers: Brokers, zk_connect: str, outsider: Callable[[], KazooClient], jaas: Path, command_config: Path
) -> None:
    brokers.settings.update({"zookeeper.set.acl": "true", "java.security.auth.login.config": str(jaas)})
    brokers.start(1, 2)
    _, epoch = await brokers.wait_for_controller(timeout=60)
    create_topic(brokers, "orders")
    password = jaas.parent / "alice.password"
    password.write_text("alice-secret\n")
    added = user_add(
        zk_connect, command_config, "add", "alice", "--mechanism", SHA256, "--password-file", str(password)
    )
    assert added.returncode == 0, added.stderr
    eventually_sync(
        lambda: broker_knows(brokers, "SCRAM credentials of user alice: SCRAM-SHA-256"),
        timeout=15,
        message="a broker never learnt of alice",
    )
    assert_outsider_refused(outsider, "orders", "alice")
    assert not any("is open to anyone" in broker.log() for broker in brokers.running())
    listed = user_add(zk_connect, command_config, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert orjson.loads(listed.stdout) == [{"user": "alice", "mechanisms": {SHA256: 4096}}]
    assert "alice-secret" not in listed.stdout
    # Without Keel's credentials the users cannot even be listed.
    refused = user_add(zk_connect, None, "list")
    assert refused.returncode == 1 and "NoAuth" in refused.stderr

    # The brokers still do everything: a new controller, a new topic.
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers.running())
    reelected = keel("controller", "reelect", "--bootstrap-server", bootstrap)
    assert reelected.returncode == 0, reelected.stderr
    await eventually(
        lambda: _elected_after(brokers, epoch), timeout=30, message="no controller elected after the reelect"
    )
    create_topic(brokers, "payments")
    assert_outsider_refused(outsider, "payments", "alice")

    deleted = user_add(zk_connect, command_config, "delete", "alice")
    assert deleted.returncode == 0, deleted.stderr
    eventually_sync(
        lambda: broker_knows(brokers, "SCRAM credentials of user alice: none (removed)"),
        timeout=15,
        message="a broker still knows alice",
    )
    again = user_add(zk_connect, command_config, "delete", "alice")
    assert again.returncode == 1 and "has no" in again.stderr


async def _elected_after(brokers: Brokers, epoch: int) -> bool:
    agreed = await brokers.agreed_controller()
    return agreed is not None and agreed[1] > epoch


async def test_keel_zookeeper_secure_closes_an_open_cluster_and_unsecure_opens_it(
    brokers: Brokers, zk_connect: str, outsider: Callable[[], KazooClient], jaas: Path, command_config: Path
) -> None:
    """Kafka's rolling procedure: brokers with credentials but no ACLs yet, the migration,
    and the brokers go on working as the same identity."""
    brokers.settings["java.security.auth.login.config"] = str(jaas)
    brokers.start(1, 2)
    await brokers.wait_for_controller(timeout=60)
    create_topic(brokers, "orders")
    added = user_add(zk_connect, None, "add", "carol", "--add-config", "SCRAM-SHA-512=[password=c]")
    assert added.returncode == 0, added.stderr
    assert outsider().get("/config/users/carol")[0]  # open until secured
    outsider().set("/config/topics/orders", outsider().get("/config/topics/orders")[0])

    no_credentials = keel("zookeeper", "secure", "--zookeeper", zk_connect)
    assert no_credentials.returncode == 2 and "no ZooKeeper credentials" in no_credentials.stderr
    secured = keel("zookeeper", "secure", "--zookeeper", zk_connect, "--command-config", str(command_config))
    assert secured.returncode == 0, secured.stderr
    assert_outsider_refused(outsider, "orders", "carol")
    with pytest.raises(NoAuthError):
        outsider().set("/config/topics/orders", b"{}")
    create_topic(brokers, "payments")  # the brokers, authenticated, still write

    opened = keel(
        "zookeeper",
        "secure",
        "--unsecure",
        "--zookeeper",
        zk_connect,
        "--command-config",
        str(command_config),
    )
    assert opened.returncode == 0, opened.stderr
    assert orjson.loads(outsider().get("/config/users/carol")[0])["config"]["SCRAM-SHA-512"]


def test_a_broker_with_other_credentials_exits_with_one_line(
    brokers: Brokers, jaas: Path, tmp_path: Path
) -> None:
    brokers.settings.update({"zookeeper.set.acl": "true", "java.security.auth.login.config": str(jaas)})
    brokers.start(1)
    eventually_sync(lambda: "broker 1 started" in brokers.by_id(1).log(), timeout=60, message="no start")
    impostor_jaas = tmp_path / "impostor.conf"
    impostor_jaas.write_text(JAAS % "guessed")
    impostor = brokers.new(2, {"java.security.auth.login.config": str(impostor_jaas)}).start()
    assert impostor.wait(60) == 1
    assert "ZooKeeper refused access (NoAuth)" in impostor.log()
