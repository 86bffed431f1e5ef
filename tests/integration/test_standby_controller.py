"""The warm-standby controller (docs/STANDBY.md, `controller.standby.enable`) on real broker
processes and a real ZooKeeper: a controller killed with -9, and the next one takes the
partitions' states over from its standby view rather than read them all, and every partition
is led again where ZooKeeper and every broker agree; a controller moved once every broker
acknowledged everything, and the next one resends nothing. With it off, failover reads every
state (the other failover tests)."""

from __future__ import annotations

import signal

from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.zk import data, paths
from tests.integration.conftest import Brokers
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually

TAKEN_OVER = "partition states taken over from the standby view: 40"


async def test_a_new_controller_takes_the_states_over_from_its_standby_view(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.settings["controller.standby.enable"] = "true"
    brokers.start(1, 2, 3)
    first = await controller_of(brokers)
    await create_topic(brokers.by_id(first), "warm", partitions=40, rf=3)
    await settled_to(brokers, kazoo, "warm", lambda s: len(s) == 40, "the topic never agreed")

    brokers.by_id(first).signal(signal.SIGKILL)

    def healed(state: dict[int, tuple[int, int, list[int]]]) -> bool:
        return all(leader not in (first, -1) and first not in isr for leader, _, isr in state.values())

    await settled_to(brokers, kazoo, "warm", healed, "a partition led by the dead controller or by none")
    second = await controller_of(brokers)
    assert second != first
    await eventually(
        lambda: _logged(brokers, second, TAKEN_OVER), timeout=10, message="no takeover from the standby view"
    )
    assert "cannot be taken over" not in brokers.by_id(second).log()


async def test_a_controller_moved_after_every_broker_acknowledged_resends_nothing(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.settings["controller.standby.enable"] = "true"
    brokers.start(1, 2, 3)
    first = await controller_of(brokers)
    await create_topic(brokers.by_id(first), "acked", partitions=40, rf=3)
    settled = await settled_to(brokers, kazoo, "acked", lambda s: len(s) == 40, "the topic never agreed")

    async def marked() -> bool:
        names = kazoo.get_children(paths.CONTROLLER_CHANGES)
        mark = data.decode_acknowledged_changes(kazoo.get(paths.ACKNOWLEDGED_CHANGES)[0])
        newest = max(s for n in names if (s := paths.change_sequence(n)) is not None)
        return mark is not None and mark.sequence == newest and set(mark.brokers) == {1, 2, 3}

    await eventually(marked, timeout=15, message="no mark of what every broker acknowledged")
    kazoo.delete("/controller")

    async def moved() -> int | None:
        agreed = await brokers.agreed_controller()
        return agreed[0] if agreed and agreed[1] > 1 else None

    second = await eventually(moved, timeout=20, message="no new controller")
    await eventually(
        lambda: _logged(brokers, second, "resending 0 partition states changed since the acknowledged mark"),
        timeout=10,
        message="the new controller did not resend only what changed",
    )
    # Nobody was told anything new, and every broker still agrees with ZooKeeper.
    assert await settled_to(brokers, kazoo, "acked", lambda s: len(s) == 40, "disagreed after") == settled


async def _logged(brokers: Brokers, broker_id: int, line: str) -> bool:
    return line in brokers.by_id(broker_id).log()


async def test_after_a_controller_that_did_not_record_the_next_one_reads_every_state(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """Broker 1 runs without the standby and is controller first: it writes no records, so
    the views the others loaded under it cannot be trusted, and its successor reads every
    state from ZooKeeper (the fallback), with the same outcome."""
    brokers.new(1).start()
    assert await controller_of(brokers) == 1
    for broker_id in (2, 3):
        brokers.new(broker_id, {"controller.standby.enable": "true"}).start()
    await eventually(lambda: _knows_brokers(brokers, 1, 3), timeout=15, message="brokers 2 and 3 not live")
    await create_topic(brokers.by_id(1), "cold", partitions=40, rf=3)
    await settled_to(brokers, kazoo, "cold", lambda s: len(s) == 40, "the topic never agreed")

    brokers.by_id(1).signal(signal.SIGKILL)

    def healed(state: dict[int, tuple[int, int, list[int]]]) -> bool:
        return all(leader not in (1, -1) and 1 not in isr for leader, _, isr in state.values())

    await settled_to(brokers, kazoo, "cold", healed, "a partition led by the dead controller or by none")
    second = await controller_of(brokers)
    await eventually(
        lambda: _logged(brokers, second, "the standby view cannot be taken over"),
        timeout=10,
        message="no fallback to reading every state",
    )
    assert "taken over from the standby view" not in brokers.by_id(second).log()


async def _knows_brokers(brokers: Brokers, broker_id: int, count: int) -> bool:
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(broker_id).port}", timeout=2) as admin:
        return len((await admin.metadata([])).brokers) == count


async def test_a_controller_killed_while_it_writes_a_topics_states_leaves_a_view_to_take_over_from(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """Each multi-op of states carries its record, so a controller killed between two of them
    leaves states and records that agree: its successor takes over from its view, creates
    the states the first one did not, and every partition is led."""
    brokers.settings["controller.standby.enable"] = "true"
    brokers.start(1, 2, 3)
    first = await controller_of(brokers)
    await eventually(lambda: _knows_brokers(brokers, first, 3), timeout=15, message="brokers not live")
    await create_topic(brokers.by_id(first), "burst", partitions=2000, rf=3)
    brokers.by_id(first).signal(signal.SIGKILL)  # its 500-partition multi-ops under way

    def healed(state: dict[int, tuple[int, int, list[int]]]) -> bool:
        return len(state) == 2000 and all(leader not in (first, -1) for leader, _, _ in state.values())

    await settled_to(brokers, kazoo, "burst", healed, "a partition of the burst not led")
    second = await controller_of(brokers)
    assert TAKEN_OVER.rpartition(":")[0] in brokers.by_id(second).log()
