"""KafkaController's election, failover and resignation, on the in-memory ClusterStore."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from actors.base.ports import SessionExpiredError
from actors.controller import KafkaController
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import info
from tests.fakes import FakeBrokerChannel, FakeClusterStore
from tests.support import ManualClock, eventually


@pytest.fixture(autouse=True)
def info_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="actors")


def condition(predicate: Callable[[], bool]) -> Callable[[], object]:
    async def probe() -> bool:
        return predicate()

    return probe


async def test_a_lone_broker_becomes_controller_at_epoch_1(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    controller = await cluster.start(1)
    await eventually(cluster.settled, timeout=2, message="no controller elected")
    assert controller.is_active
    assert (controller.context.epoch, controller.context.epoch_zk_version) == (1, 1)
    assert controller.known_controller_epoch == 1
    assert controller.context.live_broker_epochs == {1: controller.broker_epoch}
    assert "broker 1 is controller at epoch 1" in caplog.text


async def test_of_many_brokers_exactly_one_wins_and_all_agree(cluster: Cluster) -> None:
    for broker_id in range(1, 6):
        await cluster.start(broker_id)
    await eventually(cluster.settled, timeout=2, message="brokers did not agree on a controller")
    assert cluster.zk.epoch == (1, 1), "one election, one epoch increment"
    assert {c.known_controller_epoch for c in cluster.controllers.values()} == {1}


async def test_deleting_controller_elects_again_at_the_next_epoch(cluster: Cluster) -> None:
    for broker_id in (1, 2, 3):
        await cluster.start(broker_id)
    await eventually(cluster.settled, timeout=2, message="no controller")
    (first,) = cluster.active()
    await cluster.stores[first].force_delete_controller()
    await eventually(
        condition(lambda: cluster.zk.controller is not None and cluster.zk.epoch == (2, 2)),
        timeout=2,
        message="no re-election",
    )
    await eventually(cluster.settled, timeout=2, message="brokers did not agree after re-election")
    assert {c.known_controller_epoch for c in cluster.controllers.values()} == {2}


@pytest.mark.parametrize("brokers", [1, 3, 5])
async def test_controller_deleted_as_soon_as_each_election_creates_it_is_elected_again(
    cluster: Cluster, brokers: int
) -> None:
    """An operator deletes `/controller` the moment each new controller creates it, ten times:
    the winner's create used up its own one-shot watch, and the others' watches fired at the
    creation, so nobody hears the deletion; whoever re-reads and finds it gone runs again."""
    for broker_id in range(1, brokers + 1):
        await cluster.start(broker_id)
    await eventually(cluster.settled, timeout=2, message="no controller")
    deletions = 0
    loop = asyncio.get_running_loop()
    notify = cluster.zk.controller_event

    def delete_at_once() -> None:
        nonlocal deletions
        if cluster.zk.controller is not None:
            deletions += 1
            cluster.zk.controller = None
            notify(True)

    def operator_watching(deleted: bool) -> None:
        notify(deleted)
        if not deleted and deletions < 10:
            loop.call_soon(delete_at_once)

    cluster.zk.controller_event = operator_watching  # type: ignore[method-assign]
    delete_at_once()
    await eventually(
        condition(lambda: deletions == 10 and cluster.zk.controller is not None),
        timeout=2,
        message=f"no controller after deletion {deletions}: /controller is {cluster.zk.controller}",
    )
    await eventually(cluster.settled, timeout=2, message="brokers did not agree on a controller")
    assert cluster.zk.epoch is not None and cluster.zk.epoch[0] == 11, "one epoch per election"


async def test_session_expiry_resigns_reregisters_and_leaves_one_controller(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    for broker_id in (1, 2):
        await cluster.start(broker_id)
    await eventually(cluster.settled, timeout=2, message="no controller")
    (first,) = cluster.active()
    old_broker_epoch = cluster.controllers[first].broker_epoch
    await cluster.stores[first].expire_session()
    await eventually(cluster.settled, timeout=2, message="cluster did not settle after expiry")
    assert f"broker {first} resigned as controller" in caplog.text
    assert cluster.controllers[first].broker_epoch > old_broker_epoch, (
        "a new session gives a new broker epoch"
    )
    assert cluster.zk.brokers[first].czxid == cluster.controllers[first].broker_epoch
    assert cluster.zk.epoch == (2, 2)


async def test_a_controller_elected_on_its_new_session_before_hearing_of_the_expiry_elects_again(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the simulation (ZooKeeper lost by every broker at once): the client renews
    an expired session by itself, an event already running wins the election on the new
    session, and only then does the Expire arrive and reset the controller. Its /controller
    znode stood on; the broker read it as its own, believed itself active at epoch 0, and every
    write it made was fenced, while no other broker could run for the role."""
    controller = await cluster.start(1)
    await cluster.start(2)
    await eventually(cluster.settled, timeout=2, message="no controller")
    assert controller.is_active
    # The session watcher hears of the expiry after the fact: /controller, created on the
    # new session, is still this broker's.
    await controller.before_new_session()
    controller.after_new_session()
    await eventually(
        condition(lambda: cluster.zk.epoch == (2, 2)),
        timeout=2,
        message="the broker kept the role from before the expiry without an epoch: no election",
    )
    await eventually(cluster.settled, timeout=2, message="the brokers did not agree on a controller")
    assert cluster.controller.context.epoch == 2, "the active controller took over at the new epoch"
    assert "/controller names it from before its session expired" in caplog.text


async def test_an_event_whose_session_expired_under_it_is_given_up_without_an_error(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A ZooKeeper call that its session did not outlive fails with SessionExpiredError; the
    session watcher's Expire and re-registration follow, so the event is only given up: no
    uncaught error, and the queue goes on."""
    controller = await cluster.start(1)
    await eventually(condition(lambda: controller.is_active), timeout=2, message="no controller")
    cluster.stores[1].fail_next_registered_brokers = SessionExpiredError("expired while reading /brokers/ids")
    await cluster.start(2)  # its registration is a BrokerChange, whose read fails
    await eventually(
        condition(lambda: "ZooKeeper session expired while processing BrokerChange" in caplog.text),
        timeout=2,
        message="the event did not meet the expiry",
    )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "logged as an uncaught error"
    await cluster.start(3)  # the next BrokerChange is read in full
    await eventually(
        condition(lambda: set(controller.context.live_brokers) == {1, 2, 3}),
        timeout=2,
        message="the queue stopped after the given-up event",
    )


async def test_failover_error_gives_the_role_up_with_a_fenced_delete(cluster: Cluster) -> None:
    store = FakeClusterStore(cluster.zk)
    epoch = await store.register_broker(info(1))
    store.fail_next_registered_brokers = RuntimeError("ZooKeeper read failed")
    controller = KafkaController(info(1), store, ManualClock(), FakeBrokerChannel())
    cluster.controllers[1] = controller
    controller.startup(epoch)
    # The first failover fails and deletes /controller; the deletion makes it elect again.
    await eventually(
        condition(lambda: cluster.zk.epoch == (2, 2) and controller.is_active),
        timeout=2,
        message="the controller did not retry after giving the role up",
    )
    assert controller.context.epoch == 2


async def test_a_deposed_controller_resigns_when_it_sees_the_new_one(cluster: Cluster) -> None:
    one = await cluster.start(1)
    await eventually(condition(lambda: one.is_active), timeout=2, message="no controller")
    # Another broker takes over behind its back (its epoch moves on).
    cluster.zk.controller = None
    intruder = FakeClusterStore(cluster.zk)
    await intruder.register_controller_and_increment_epoch(9)
    await eventually(
        condition(lambda: not one.is_active), timeout=2, message="the old controller did not resign"
    )
    assert one.active_controller_id == 9
    assert one.context.epoch == 0 and one.context.epoch_zk_version == 0, "resignation resets the context"


async def test_shutdown_resigns(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    controller = await cluster.start(1)
    await eventually(condition(lambda: controller.is_active), timeout=2, message="no controller")
    await controller.shutdown()
    assert not controller.is_active
    assert "broker 1 resigned as controller" in caplog.text
