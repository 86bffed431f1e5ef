"""Controller election across real broker processes on a real ZooKeeper (spec §2)."""

from __future__ import annotations

import signal
import time

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.integration.conftest import SESSION_TIMEOUT_MS, Brokers
from tests.support import eventually
from wire.api import DescribeClusterResponse


def controller_epoch(kazoo: KazooClient) -> int:
    return int(kazoo.get("/controller_epoch")[0])


def controller_id(kazoo: KazooClient) -> int | None:
    # One read: /controller may vanish at any moment while brokers come and go.
    try:
        return int(orjson.loads(kazoo.get("/controller")[0])["brokerid"])
    except NoNodeError:
        return None


async def settle(brokers: Brokers, timeout: float = 20) -> tuple[int, int]:
    return await eventually(
        brokers.agreed_controller, timeout=timeout, message="brokers did not agree on a controller"
    )


async def test_five_brokers_elect_exactly_one_controller(brokers: Brokers, kazoo: KazooClient) -> None:
    brokers.start(1, 2, 3, 4, 5)
    controller, epoch = await settle(brokers)
    assert epoch == 1 and controller_epoch(kazoo) == 1, "one election raises the epoch once"
    assert controller_id(kazoo) == controller
    assert sorted(kazoo.get_children("/brokers/ids")) == ["1", "2", "3", "4", "5"]
    znode = orjson.loads(kazoo.get("/controller")[0])
    assert znode["version"] == 2 and isinstance(znode["timestamp"], str)
    # Kafka's persistent layout is there for Kafka's tools.
    for path in ("/brokers/topics", "/admin/delete_topics", "/config/topics", "/isr_change_notification"):
        assert kazoo.exists(path) is not None, path


async def test_kill_9_of_the_controller_elects_another_within_the_session_timeout(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller, epoch = await settle(brokers)
    victim = brokers.by_id(controller)
    killed_at = time.monotonic()
    victim.signal(signal.SIGKILL)
    victim.wait(5)

    async def new_controller() -> tuple[int, int] | None:
        agreed = await brokers.agreed_controller()
        return agreed if agreed is not None and agreed[0] != controller else None

    budget = SESSION_TIMEOUT_MS / 1000 + 2
    _new, new_epoch = await eventually(new_controller, timeout=budget, message="no new controller")
    elapsed = time.monotonic() - killed_at
    assert elapsed <= budget
    assert new_epoch == epoch + 1 and controller_epoch(kazoo) == epoch + 1


async def test_deleting_controller_from_outside_forces_a_new_election(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    _, epoch = await settle(brokers)
    kazoo.delete("/controller")

    async def next_epoch() -> tuple[int, int] | None:
        agreed = await brokers.agreed_controller()
        return agreed if agreed is not None and agreed[1] == epoch + 1 else None

    await eventually(next_epoch, timeout=10, message="no re-election after /controller was deleted")
    assert controller_epoch(kazoo) == epoch + 1


async def test_controller_session_expiry_resigns_and_reregisters(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller, epoch = await settle(brokers)
    paused = brokers.by_id(controller)
    old_czxid = kazoo.exists(f"/brokers/ids/{controller}").czxid
    paused.signal(signal.SIGSTOP)

    async def taken_over() -> bool:
        return controller_id(kazoo) not in (None, controller)

    await eventually(taken_over, timeout=SESSION_TIMEOUT_MS / 1000 + 5, message="no controller took over")
    paused.signal(signal.SIGCONT)

    async def reregistered() -> bool:
        stat = kazoo.exists(f"/brokers/ids/{controller}")
        return stat is not None and stat.czxid != old_czxid

    await eventually(reregistered, timeout=15, message="the paused broker did not register again")
    await settle(brokers)
    log = paused.log()
    assert f"broker {controller} resigned as controller" in log
    assert "expired; new session" in log
    assert controller_epoch(kazoo) == epoch + 1, "exactly one new election"
    views = await brokers.views()
    assert {v.controller_id for v in views.values() if v} == {controller_id(kazoo)}


async def test_restart_right_after_kill_9_waits_for_the_old_session(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    (first, _) = brokers.start(1, 2)
    await settle(brokers)
    old_czxid = kazoo.exists("/brokers/ids/1").czxid
    first.signal(signal.SIGKILL)
    first.wait(5)
    assert kazoo.exists("/brokers/ids/1") is not None, "the dead broker's ephemeral is still there"
    restarted = brokers.new(1).start()

    async def registered() -> bool:
        stat = kazoo.exists("/brokers/ids/1")
        return stat is not None and stat.czxid != old_czxid

    await eventually(
        registered, timeout=SESSION_TIMEOUT_MS / 1000 * 2 + 10, message="restarted broker never registered"
    )
    assert restarted.running
    await settle(brokers)


async def test_a_second_process_with_a_live_brokers_id_refuses_to_start(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1)
    await settle(brokers)
    czxid = kazoo.exists("/brokers/ids/1").czxid
    intruder = brokers.new(1).start()
    assert intruder.wait(timeout=30) == 1
    assert "broker.id 1 is already registered" in intruder.log()
    assert kazoo.exists("/brokers/ids/1").czxid == czxid, "the live broker's registration is untouched"


async def test_sigterm_shuts_down_in_order_and_ephemerals_vanish(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    (one,) = brokers.start(1)
    await settle(brokers)
    one.signal(signal.SIGTERM)
    assert one.wait(timeout=15) == 0
    assert kazoo.exists("/brokers/ids/1") is None
    assert kazoo.exists("/controller") is None
    assert "broker 1 resigned as controller" in one.log()
    assert controller_epoch(kazoo) == 1, "/controller_epoch outlives its controller"


async def test_describe_cluster_matches_zookeeper(brokers: Brokers, kazoo: KazooClient) -> None:
    brokers.new(1, broker_rack="rack-a").start()
    brokers.new(2, broker_rack="rack-b").start()
    controller, epoch = await settle(brokers)

    async def both_listed() -> DescribeClusterResponse | None:
        # A registration shows within a second, or at once on the controller's UpdateMetadata.
        view = await brokers.by_id(1).describe()
        return view if view is not None and len(view.brokers) == 2 else None

    view = await eventually(both_listed, timeout=10, message="broker 1 did not describe both brokers")
    assert view.cluster_id == orjson.loads(kazoo.get("/cluster/id")[0])["id"]
    assert (view.controller_id, view.controller_epoch) == (controller, epoch)
    assert [(b.broker_id, b.rack, b.port) for b in view.brokers] == [
        (1, "rack-a", brokers.by_id(1).port),
        (2, "rack-b", brokers.by_id(2).port),
    ]
    # The broker's one listener (PLAINTEXT, or SASL_SSL in the secured pass), by its name.
    listener = brokers.by_id(1).settings["listeners"].split("://")[0]
    assert [e.listener for e in view.brokers[0].endpoints] == [listener]
