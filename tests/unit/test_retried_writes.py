"""A write sent again after its connection dropped, whose first send had been applied, is
answered as the first send would have been (node/zk/retried_writes.py); a refusal that the
znodes do not show to be this client's own write stands.

Each test runs the real client and its real aiozk session over an in-memory ZooKeeper whose
connection loses the answer to one write (tests/unit/zk_protocol_fake.py): aiozk's send fails
as on a dropped connection, and the client sends the write again on the same session.
"""

from __future__ import annotations

import collections.abc

import pytest
from aiozk import exc

from actors.base.clock import SystemClock
from actors.base.ports import LeaderAndIsr, SessionExpiredError, TopicPartition
from node.zk import data, paths
from node.zk.client import ANY_VERSION, BadVersion, NodeExists, NoNode, ZooKeeperClient, multi_failure
from node.zk.store import ZkClusterStore
from tests.unit.zk_protocol_fake import OTHER_SESSION_ID, LossyConnection, ZNodeTree, client_on, close


@pytest.fixture
def tree() -> ZNodeTree:
    return ZNodeTree()


@pytest.fixture
def zk(tree: ZNodeTree) -> collections.abc.Iterator[tuple[ZooKeeperClient, LossyConnection]]:
    client, connection = client_on(tree)
    for path in ("/brokers", "/brokers/topics", "/config", "/config/changes"):
        tree.apply(client.create_op(path), OTHER_SESSION_ID)
    yield client, connection
    close(client)


def _other_writes(*requests: object) -> collections.abc.Callable[[ZNodeTree], None]:
    """Another client's writes, made while this client's write is lost."""

    def write(tree: ZNodeTree) -> None:
        for request in requests:
            tree.apply(request, OTHER_SESSION_ID)

    return write


# --- each kind of write, recognised ---


async def test_a_create_whose_answer_was_lost_is_answered_as_created(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    client, connection = zk
    connection.lose_answer_of = 1
    answer = await client.send(client.create_op("/brokers/topics/t", b"assignment"))
    assert connection.writes == 2, "the create was not sent again"
    assert answer.path == "/brokers/topics/t"
    assert answer.stat.created_zxid == tree.nodes["/brokers/topics/t"].czxid
    assert answer.stat.version == 0


async def test_an_ephemeral_create_whose_answer_was_lost_is_answered_as_created(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    connection.lose_answer_of = 1
    await client.create("/controller", b'{"brokerid":1}', ephemeral=True)
    assert connection.writes == 2


async def test_a_versioned_set_whose_answer_was_lost_is_answered_with_the_version_it_wrote(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    await client.create("/config/topics", b"v0")
    connection.lose_answer_of = 2
    stat = await client.set("/config/topics", b"v1", 0)
    assert connection.writes == 3
    assert stat.version == 1


async def test_a_delete_whose_answer_was_lost_is_answered_as_deleted(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    client, connection = zk
    await client.create("/brokers/topics/t", b"x")
    connection.lose_answer_of = 2
    await client.delete("/brokers/topics/t", 0)
    assert connection.writes == 3
    assert "/brokers/topics/t" not in tree.nodes


async def test_a_fenced_multi_op_of_creates_whose_answer_was_lost_is_answered_as_applied(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    await client.create("/controller_epoch", b"1")
    await client.create("/brokers/topics/t", b"{}")
    connection.lose_answer_of = 3
    results = await client.multi(
        [
            client.check_op("/controller_epoch", 0),
            client.create_op("/brokers/topics/t/partitions"),
            client.create_op("/brokers/topics/t/partitions/0"),
            client.create_op("/brokers/topics/t/partitions/0/state", b'{"controller_epoch":1}'),
        ]
    )
    assert connection.writes == 4
    assert multi_failure(results) is None, results
    assert [type(r).__name__ for r in results] == [
        "CheckVersionResponse",
        "Create2Response",
        "Create2Response",
        "Create2Response",
    ]
    assert results[3].path == "/brokers/topics/t/partitions/0/state"
    assert results[3].stat.version == 0


async def test_a_multi_op_checking_that_a_znode_exists_whose_answer_was_lost_is_answered_as_applied(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """A check at version -1 (any version, as the fence's check of `/controller`) holds, read
    back, while the znode is there at whatever version."""
    client, connection = zk
    await client.create("/controller", b'{"brokerid":1}', ephemeral=True)
    await client.set("/controller", b'{"brokerid":1}')
    connection.lose_answer_of = 3
    results = await client.multi(
        [client.check_op("/controller", ANY_VERSION), client.create_op("/brokers/topics/t", b"{}")]
    )
    assert connection.writes == 4
    assert multi_failure(results) is None, results


async def test_a_multi_op_checking_a_znode_gone_since_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """Applied, but `/controller` was deleted before the retry: the write is fenced out."""
    client, connection = zk
    await client.create("/controller", b'{"brokerid":1}')
    connection.lose_answer_of = 2
    connection.meanwhile = _other_writes(client.delete_op("/controller"))
    results = await client.multi(
        [client.check_op("/controller", ANY_VERSION), client.create_op("/brokers/topics/t", b"{}")]
    )
    assert isinstance(multi_failure(results), NoNode)


async def test_a_multi_op_with_a_set_keeps_the_stat_callers_read(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """`register_controller_and_increment_epoch` reads `results[1].stat.version`."""
    client, connection = zk
    await client.create("/controller_epoch", b"4")
    connection.lose_answer_of = 2
    results = await client.multi(
        [
            client.create_op("/controller", b'{"brokerid":2}', ephemeral=True),
            client.set_op("/controller_epoch", b"5", 0),
        ]
    )
    assert multi_failure(results) is None, results
    assert results[1].stat.version == 1


async def test_a_multi_op_with_a_sequential_create_finds_the_znode_it_made(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    client, connection = zk
    await client.create("/config/topics", b"v0")
    tree.apply(
        client.create_op("/config/changes/config_change_", b"older", sequential=True), OTHER_SESSION_ID
    )
    connection.lose_answer_of = 2
    results = await client.multi(
        [
            client.set_op("/config/topics", b"v1", 0),
            client.create_op("/config/changes/config_change_", b"topics/t", sequential=True),
        ]
    )
    assert multi_failure(results) is None, results
    assert results[1].path == "/config/changes/config_change_0000000001"


async def test_the_store_creates_partition_states_whose_multi_op_answer_was_lost(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """The defect of issue 32: the controller's batched create was refused with NodeExists
    when sent again, and its partitions were never initialised."""
    client, connection = zk
    store = ZkClusterStore(client, SystemClock())
    await client.create(paths.CONTROLLER_EPOCH, data.encode_controller_epoch(1))
    await client.create(paths.CONTROLLER, data.encode_controller(1, 0), ephemeral=True)
    await client.create(paths.topic("t"), b"{}")
    connection.lose_answer_of = 4
    states = {TopicPartition("t", p): LeaderAndIsr(1, 0, (1, 2)) for p in range(3)}
    written = await store.create_partition_states(states, 1, 0)
    assert written == {tp: state._replace(partition_epoch=0) for tp, state in states.items()}


# --- refusals that stand ---


async def test_a_create_refused_because_another_client_wrote_other_data_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    connection.lose_request_of = 1
    connection.meanwhile = _other_writes(client.create_op("/brokers/topics/t", b"theirs"))
    with pytest.raises(NodeExists):
        await client.create("/brokers/topics/t", b"ours")


async def test_an_ephemeral_with_the_same_data_held_by_another_session_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    connection.lose_request_of = 1
    connection.meanwhile = _other_writes(client.create_op("/controller", b"same", ephemeral=True))
    with pytest.raises(NodeExists):
        await client.create("/controller", b"same", ephemeral=True)


async def test_a_znode_created_before_the_write_was_sent_is_not_taken_for_it(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    client, connection = zk
    tree.apply(client.create_op("/brokers/topics/t", b"same"), OTHER_SESSION_ID)
    # Any answer (a read, a heartbeat) tells the client how far ZooKeeper has got.
    await client.exists("/brokers")
    connection.lose_request_of = 1
    with pytest.raises(NodeExists):
        await client.create("/brokers/topics/t", b"same")


async def test_a_set_refused_because_another_client_wrote_other_data_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    await client.create("/config/topics", b"v0")
    connection.lose_request_of = 2
    connection.meanwhile = _other_writes(client.set_op("/config/topics", b"theirs", 0))
    with pytest.raises(BadVersion):
        await client.set("/config/topics", b"ours", 0)


async def test_a_set_whose_znode_moved_on_to_another_version_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """Our data, but one version further: someone wrote it again after us (or before us), so
    the znode does not show our write as its last."""
    client, connection = zk
    await client.create("/config/topics", b"v0")
    connection.lose_answer_of = 2
    connection.meanwhile = _other_writes(client.set_op("/config/topics", b"ours", 1))
    with pytest.raises(BadVersion):
        await client.set("/config/topics", b"ours", 0)


async def test_a_multi_op_refused_because_another_client_wrote_one_of_its_znodes_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    client, connection = zk
    await client.create("/controller_epoch", b"1")
    await client.create("/brokers/topics/t", b"{}")
    connection.lose_request_of = 3
    connection.meanwhile = _other_writes(
        client.create_op("/brokers/topics/t/partitions"),
        client.create_op("/brokers/topics/t/partitions/0"),
        client.create_op("/brokers/topics/t/partitions/0/state", b'{"controller_epoch":0}'),
    )
    results = await client.multi(
        [
            client.check_op("/controller_epoch", 0),
            client.create_op("/brokers/topics/t/partitions"),
            client.create_op("/brokers/topics/t/partitions/0"),
            client.create_op("/brokers/topics/t/partitions/0/state", b'{"controller_epoch":1}'),
        ]
    )
    assert isinstance(multi_failure(results), NodeExists)


async def test_a_multi_op_whose_fence_moved_since_stays_refused(
    zk: tuple[ZooKeeperClient, LossyConnection],
) -> None:
    """Applied, but another controller has bumped the epoch since: the write is fenced out."""
    client, connection = zk
    await client.create("/controller_epoch", b"1")
    await client.create("/brokers/topics/t", b"{}")
    connection.lose_answer_of = 3
    connection.meanwhile = _other_writes(client.set_op("/controller_epoch", b"2", 0))
    results = await client.multi(
        [client.check_op("/controller_epoch", 0), client.create_op("/brokers/topics/t/partitions")]
    )
    assert isinstance(multi_failure(results), BadVersion)


async def test_a_refusal_of_a_write_sent_once_is_not_looked_into(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    client, connection = zk
    tree.apply(client.create_op("/brokers/topics/t", b"same"), OTHER_SESSION_ID)
    with pytest.raises(NodeExists):
        await client.create("/brokers/topics/t", b"same")
    assert connection.reads == 0, "a write sent once was read back"


# --- a session lost meanwhile ---


async def test_a_write_whose_session_expired_before_its_answer_fails_with_the_ports_error(
    zk: tuple[ZooKeeperClient, LossyConnection], tree: ZNodeTree
) -> None:
    """Not sent again on the new session: an ephemeral it made there would outlive what the
    caller knew of the old one. The error is aiozk's, and the port's the controller knows."""
    client, connection = zk
    connection.lose_request_of = 1

    def new_session(_: ZNodeTree) -> None:
        client._zk.session.session_id = OTHER_SESSION_ID

    connection.meanwhile = new_session
    with pytest.raises(SessionExpiredError) as raised:
        await client.create("/brokers/ids/5", b"registration", ephemeral=True)
    assert isinstance(raised.value, exc.SessionExpired)
    assert connection.writes == 1, "sent again on the new session"
    assert "/brokers/ids/5" not in tree.nodes
