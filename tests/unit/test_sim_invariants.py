"""The simulation's checker (node/sim/invariants.py): each invariant shown to catch what it
is there for, on states made by hand (stand-in brokers where only what the check reads is
needed), and to let pass what is allowed."""

from __future__ import annotations

import asyncio
import logging
import random
from types import SimpleNamespace
from typing import Any

import pytest

from actors.base.ports import LeaderAndIsr, ReplicaAssignment, TopicAssignment, TopicPartition
from actors.controller.context import ControllerContext, PartitionState
from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import Startup
from actors.replica.partition import Role
from node.sim.invariants import Ack, Checker, UnexpectedErrors, Violation
from node.sim.log_store import MemoryLogStore
from node.sim.loop import run_simulated
from node.sim.network import CLIENT, SimNetwork, endpoint_of
from node.sim.simulation import RunConfig, Simulation
from node.sim.zookeeper import FakeClusterStore, FakeZooKeeper, _Ephemeral
from tests.support import ManualClock
from wire import records

TP = TopicPartition("t", 0)


def _batch(*values: bytes) -> bytes:
    return records.build_batch([(None, v) for v in values], timestamp=5)


def _stand_in(
    *,
    active: bool = False,
    controller_epoch: int = 0,
    leader_epochs: dict[TopicPartition, int] | None = None,
    events: ControllerEventManager | None = None,
) -> Any:
    """What the per-step checks read of a broker, and nothing more."""
    partitions = {tp: SimpleNamespace(leader_epoch=e) for tp, e in (leader_epochs or {}).items()}
    controller = SimpleNamespace(
        is_active=active, context=ControllerContext(epoch=controller_epoch), event_manager=events
    )
    return SimpleNamespace(
        alive=True,
        started=True,
        controller=controller,
        replica_manager=SimpleNamespace(replica_state=SimpleNamespace(partitions=partitions)),
    )


def test_an_acknowledged_write_missing_from_an_isr_member_is_caught() -> None:
    zk = FakeZooKeeper()
    logs = {1: MemoryLogStore(), 2: MemoryLogStore()}
    checker = Checker(zk, logs)
    zk.partition_states[TP] = (LeaderAndIsr(1, 0, (1, 2)), 1, 0)
    logs[1].get_or_create(TP, {}).append_as_leader(_batch(b"v"), 0)
    checker.acknowledged(Ack(TP, 0, b"v"))
    with pytest.raises(Violation, match="broker 2, in ISR"):
        checker.check({})


def test_a_leader_outside_its_isr_and_a_leader_epoch_going_back_are_caught() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    zk.partition_states[TP] = (LeaderAndIsr(1, 3, (1, 2)), 1, 0)
    checker.check({})
    zk.partition_states[TP] = (LeaderAndIsr(2, 2, (1, 2)), 1, 1)
    with pytest.raises(Violation, match="leader epochs rise"):
        checker.check({})
    zk.partition_states[TP] = (LeaderAndIsr(3, 4, (1, 2)), 1, 2)
    with pytest.raises(Violation, match="leader in ISR"):
        checker.check({})


def test_two_active_controllers_at_one_epoch_are_caught() -> None:
    checker = Checker(FakeZooKeeper(), {})
    checker.check({1: (1, _stand_in(active=True, controller_epoch=4)), 2: (2, _stand_in())})
    # Broker 2 active at the next epoch is a new reign; at broker 1's epoch it is a second one.
    checker.check({1: (1, _stand_in()), 2: (2, _stand_in(active=True, controller_epoch=5))})
    with pytest.raises(Violation, match="one controller per epoch: brokers 1 and 2 both active at 4"):
        checker.check({2: (2, _stand_in(active=True, controller_epoch=4))})


def test_a_controller_gauge_that_missed_a_change_is_caught() -> None:
    checker = Checker(FakeZooKeeper(), {})
    broker = _stand_in(active=True, controller_epoch=1)
    context = broker.controller.context
    context.partition_states[TP] = PartitionState.OFFLINE
    checker.check({1: (1, broker)})
    dict.__setitem__(context.partition_states, TP, PartitionState.ONLINE)  # past the gauge
    with pytest.raises(
        Violation, match=r"partition gauges: controller 1 keeps .* \(1, 0\); a pass counts \(0, 0\)"
    ):
        checker.check({1: (1, broker)})


def test_a_fenced_write_by_a_broker_that_did_not_bump_the_epoch_is_caught() -> None:
    """The fence is the epoch's data version: a broker that learnt it without winning the
    election passes the fence, and the checker sees who wrote."""

    async def main() -> None:
        zk = FakeZooKeeper()
        checker = Checker(zk, {})
        winner, other = FakeClusterStore(zk), FakeClusterStore(zk)
        epoch = await winner.register_controller_and_increment_epoch(1)
        state = LeaderAndIsr(1, 0, (1, 2))
        await winner.create_partition_states({TP: state}, epoch.epoch, epoch.zk_version)
        checker.check({})
        written = await other.update_partition_states(
            {TP: state._replace(partition_epoch=0)}, epoch.epoch, epoch.zk_version
        )
        assert not isinstance(written[TP], Exception), "the fence let it through"
        with pytest.raises(Violation, match="fenced writes: session 2 wrote without holding the epoch"):
            checker.check({})

    run_simulated(main())


def test_a_controller_absent_past_the_limit_while_a_broker_could_elect_is_caught() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    checker.controller_presence(10.0, [1, 2], limit_s=7.0)
    checker.controller_presence(16.9, [1, 2], limit_s=7.0)
    checker.check({})
    checker.controller_presence(17.1, [1, 2], limit_s=7.0)
    with pytest.raises(Violation, match=r"absent for 7.1 s while brokers \[1, 2\]"):
        checker.check({})


def test_a_controller_absent_while_no_broker_could_elect_is_let_off_and_the_clock_starts_again() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    checker.controller_presence(10.0, [1], limit_s=7.0)
    # Every broker cut off from ZooKeeper for a while: nobody can elect, so no stall.
    checker.controller_presence(15.0, [], limit_s=7.0)
    checker.controller_presence(30.0, [], limit_s=7.0)
    checker.controller_presence(31.0, [1], limit_s=7.0)
    checker.controller_presence(37.5, [1], limit_s=7.0)
    checker.check({})
    # A controller back resets the clock too.
    zk.controller = _Ephemeral(1, 1, 1)
    checker.controller_presence(40.0, [1], limit_s=7.0)
    zk.controller = None
    checker.controller_presence(41.0, [1], limit_s=7.0)
    checker.controller_presence(47.0, [1], limit_s=7.0)
    checker.check({})


def test_a_broker_applying_an_older_leader_and_isr_is_caught_but_a_new_incarnation_starts_afresh() -> None:
    checker = Checker(FakeZooKeeper(), {})
    checker.check({1: (1, _stand_in(leader_epochs={TP: 5}))})
    checker.check({1: (2, _stand_in(leader_epochs={TP: 2}))})  # restarted: its own history
    with pytest.raises(Violation, match="broker 1 went from leader epoch 2 to 1"):
        checker.check({1: (2, _stand_in(leader_epochs={TP: 1}))})


def test_an_event_gone_from_the_queue_unspent_is_caught() -> None:
    async def main() -> None:
        checker = Checker(FakeZooKeeper(), {})
        events = ControllerEventManager(lambda event: asyncio.sleep(0), ManualClock())
        broker = _stand_in(events=events)
        checker.watch_events(broker, 1)
        queued = events.put(Startup())
        checker.check({1: (1, broker)})  # still queued
        events._queue.drain()  # lost: neither processed nor pre-empted
        assert not queued.spent
        with pytest.raises(Violation, match="no event lost: broker 1's Startup left the queue unspent"):
            checker.check({1: (1, broker)})

    run_simulated(main())


def test_an_unclean_election_lets_off_only_the_writes_sent_before_it() -> None:
    """Seen write by write: an ISR that grows and a leader moved to the new member within one
    step is clean (both writes in one step); a leader from outside the ISR is not, and
    excuses the acknowledgements sent before it, not those after."""
    zk = FakeZooKeeper()
    logs = {b: MemoryLogStore() for b in (1, 2, 3)}
    checker = Checker(zk, logs)
    zk.write_partition_state(TP, LeaderAndIsr(1, 0, (1,)), 1)
    checker.check({})
    zk.write_partition_state(TP, LeaderAndIsr(1, 0, (1, 2)), 1)
    zk.write_partition_state(TP, LeaderAndIsr(2, 1, (1, 2)), 1)  # clean: 2 joined first
    assert checker.unclean_elections(TP) == 0
    logs[1].get_or_create(TP, {}).append_as_leader(_batch(b"old"), 0)
    checker.acknowledged(Ack(TP, 0, b"old", checker.unclean_elections(TP)))
    with pytest.raises(Violation, match="broker 2, in ISR"):
        checker.check({})

    checker = Checker(zk, logs)
    checker.acknowledged(Ack(TP, 0, b"old", checker.unclean_elections(TP)))
    zk.write_partition_state(TP, LeaderAndIsr(-1, 1, (2,)), 1)
    zk.write_partition_state(TP, LeaderAndIsr(3, 2, (3,)), 1)  # unclean: 3 was not in sync
    assert checker.unclean_elections(TP) == 1
    checker.check({})  # "old", sent before it, is let off
    logs[3].get_or_create(TP, {}).append_as_leader(_batch(b"new"), 2)
    checker.acknowledged(Ack(TP, 0, b"new", checker.unclean_elections(TP)))
    checker.check({})
    zk.write_partition_state(TP, LeaderAndIsr(3, 2, (3, 1)), 1)
    with pytest.raises(Violation, match=r"offset 0 \(b'new'\) is acknowledged but broker 1"):
        checker.check({})


def test_a_broker_back_from_a_power_loss_elected_as_an_isrs_last_name_counts_as_unclean() -> None:
    """Seed 674's course: broker 2 loses a tail while 1 holds the write too; 1 goes, the
    controller cannot take the last name out of the ISR, and 2, started again, is elected from
    it. Replicas that copy 2's log lack the write; within one step 2 leads, is copied and hands
    the partition on, so the election is seen as the state is written. Elected while still
    down, it counts for nothing yet; the writes sent after it are held to the rule again."""
    zk = FakeZooKeeper()
    logs = {b: MemoryLogStore() for b in (1, 2, 3)}
    checker = Checker(zk, logs)
    zk.topics["t"] = TopicAssignment("t", {0: ReplicaAssignment((1, 2, 3))})
    checker.started(2, 1)
    zk.write_partition_state(TP, LeaderAndIsr(1, 0, (1, 2)), 1)
    for broker in (1, 2):
        logs[broker].get_or_create(TP, {}).append_as_leader(_batch(b"old"), 0)
    checker.acknowledged(Ack(TP, 0, b"old", checker.unclean_elections(TP)))
    logs[2].get(TP).lose_tail(0)
    checker.lost_tail(2, 1)
    zk.write_partition_state(TP, LeaderAndIsr(-1, 1, (2,)), 1)  # 1 goes: 2 is the last name
    zk.write_partition_state(TP, LeaderAndIsr(2, 2, (2,)), 1)  # elected while still down
    assert checker.unclean_elections(TP) == 0
    zk.write_partition_state(TP, LeaderAndIsr(-1, 3, (2,)), 1)

    checker.started(2, 2)
    zk.write_partition_state(TP, LeaderAndIsr(2, 4, (2,)), 1)  # the new incarnation leads
    assert checker.unclean_elections(TP) == 1
    logs[2].get(TP).append_as_leader(_batch(b"new"), 4)
    checker.acknowledged(Ack(TP, 0, b"new", checker.unclean_elections(TP)))
    logs[3].get_or_create(TP, {}).append_as_follower(logs[2].get(TP).read(0, 1 << 20))
    zk.write_partition_state(TP, LeaderAndIsr(2, 4, (2, 3)), 1)  # copied, and handed on
    zk.write_partition_state(TP, LeaderAndIsr(3, 5, (3,)), 1)
    assert checker.unclean_elections(TP) == 1
    checker.check({})  # "old", sent before, is let off on 3 as on 2
    logs[3].get(TP).truncate_to(0)
    with pytest.raises(Violation, match=r"offset 0 \(b'new'\) is acknowledged but broker 3"):
        checker.check({})


def test_a_broker_back_from_a_power_loss_that_a_state_names_leader_leads_as_it_starts() -> None:
    zk = FakeZooKeeper()
    logs = {b: MemoryLogStore() for b in (1, 2)}
    checker = Checker(zk, logs)
    zk.topics["t"] = TopicAssignment("t", {0: ReplicaAssignment((1, 2))})
    zk.write_partition_state(TP, LeaderAndIsr(2, 0, (1, 2)), 1)
    checker.lost_tail(2, 1)
    checker.started(2, 2)
    assert checker.unclean_elections(TP) == 1


async def _settled_topic_on_three() -> tuple[
    FakeZooKeeper, dict[int, MemoryLogStore], Checker, dict[int, Any]
]:
    """Three brokers, topic t's one partition on all three with a committed record, settled."""
    from node.sim.broker import BrokerSettings, SimBroker
    from wire.api import CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest

    zk = FakeZooKeeper()
    network = SimNetwork(random.Random(1), lambda line, **_: None)
    logs = {b: MemoryLogStore() for b in (1, 2, 3)}
    checker = Checker(zk, logs)
    brokers = {}
    for broker_id in (1, 2, 3):
        broker = SimBroker(broker_id, zk, network, logs[broker_id], BrokerSettings())
        brokers[broker_id] = (broker_id, broker)
        broker.start()
    await asyncio.sleep(1.0)
    topic = CreatableTopic(
        name="t", assignments=[CreatableReplicaAssignment(partition=0, broker_ids=[1, 2, 3])]
    )
    await network.request(CLIENT, endpoint_of(1), CreateTopicsRequest(topics=[topic]), 10.0, "test")
    await network.request(CLIENT, endpoint_of(1), _produce(b"v"), 10.0, "test")
    for _ in range(100):
        if checker.settled(brokers) is None:
            break
        await asyncio.sleep(0.1)
    assert checker.settled(brokers) is None, checker.settled(brokers)
    return zk, logs, checker, brokers


def test_replicas_that_differ_below_the_high_watermark_keep_the_run_from_settling() -> None:
    async def main() -> str | None:
        zk, logs, checker, brokers = await _settled_topic_on_three()
        # Broker 3's copy of the committed record replaced by another, where nothing fetches.
        follower = logs[3].get(TP)
        assert follower is not None
        follower.truncate_to(0)
        other = bytearray(_batch(b"w"))
        records.stamp(other, 0, 0, zk.partition_states[TP][0].leader_epoch)
        follower.append_as_follower(bytes(other))
        return checker.settled(brokers)

    assert run_simulated(main()) == "t-0: replicas differ below the high watermark 1"


def test_a_broker_with_stale_metadata_or_a_follower_at_an_old_epoch_keeps_the_run_from_settling() -> None:
    async def main() -> tuple[str | None, str | None]:
        zk, _, checker, brokers = await _settled_topic_on_three()
        leader = zk.partition_states[TP][0].leader
        other = next(b for b in (1, 2, 3) if b != leader)
        state = brokers[other][1].replica_manager.replica_state
        told = state.metadata.state(TP)
        assert told is not None
        state.metadata.put(TP, told._replace(leader_epoch=told.leader_epoch - 1))
        stale_metadata = checker.settled(brokers)
        state.metadata.put(TP, told)
        state.partitions[TP].leader_epoch -= 1
        old_follower = checker.settled(brokers)
        return stale_metadata, old_follower

    stale_metadata, old_follower = run_simulated(main())
    assert stale_metadata is not None and "metadata shows" in stale_metadata
    assert old_follower is not None and "does not follow" in old_follower


def _produce(value: bytes) -> Any:
    from wire.api import ProducePartitionData, ProduceRequest, ProduceTopicData

    data = ProducePartitionData(index=0, records=records.build_batch([(None, value)], timestamp=0))
    return ProduceRequest(
        acks=-1, timeout_ms=3000, topic_data=[ProduceTopicData(name="t", partition_data=[data])]
    )


def test_an_error_logged_with_its_exception_is_caught_and_kafkas_own_error_lines_are_not() -> None:
    checker = Checker(FakeZooKeeper(), {})
    logger = logging.getLogger("tests.sim.invariants")
    logger.addHandler(handler := UnexpectedErrors(checker))
    logger.propagate = False
    try:
        logger.error("Failed to change state of partition t-0: no eligible leader")
        checker.check({})
        try:
            raise KeyError("t-9")
        except KeyError:
            logger.exception("fetch from broker 2 failed unexpectedly; retrying")
        expected = r"no unexpected error: tests\.sim\.invariants: fetch from broker 2"
        with pytest.raises(Violation, match=expected):
            checker.check({})
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def test_an_error_that_reaches_the_event_loop_in_a_run_is_a_violation() -> None:
    """A callback that raises, in a simulated run: the loop's handler hands it to the checker."""
    simulation = Simulation(RunConfig(seed=1, brokers=3, steps=1))

    async def raising() -> None:
        asyncio.get_running_loop().call_soon(_fail)
        await asyncio.sleep(0)
        simulation.checker.check({})

    def _fail() -> None:
        raise ZeroDivisionError("planted")

    simulation._create_topic = raising  # type: ignore[method-assign]
    result = simulation.run()
    assert result.violation is not None
    assert str(result.violation).startswith("no unexpected error: Exception in callback")
    assert "ZeroDivisionError: planted" in str(result.violation)


def _topic(zk: FakeZooKeeper, **partitions: tuple[int, ...]) -> None:
    """Topic t with partitions named p0, p1, ... and their replicas."""
    zk.topics["t"] = TopicAssignment(
        "t", {int(name[1:]): ReplicaAssignment(replicas) for name, replicas in partitions.items()}
    )


def _leading(epochs: dict[TopicPartition, int]) -> Any:
    """A broker whose replica manager leads these partitions at these leader epochs."""
    partitions = {tp: SimpleNamespace(role=Role.LEADER, leader_epoch=e) for tp, e in epochs.items()}
    return SimpleNamespace(
        replica_manager=SimpleNamespace(replica_state=SimpleNamespace(partitions=partitions))
    )


def test_a_partition_not_led_past_the_limit_while_a_replica_could_lead_it_is_caught() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    _topic(zk, p0=(1, 2), p1=(2, 3))
    zk.partition_states[TopicPartition("t", 1)] = (LeaderAndIsr(2, 0, (2, 3)), 1, 0)
    # t-0 never got a state (its create "failed"), while its replicas are live.
    checker.partition_leaders(10.0, {1, 2, 3}, limit_s=20.0)
    checker.partition_leaders(29.9, {1, 2, 3}, limit_s=20.0)
    checker.check({})
    checker.partition_leaders(30.1, {1, 2, 3}, limit_s=20.0)
    with pytest.raises(
        Violation,
        match=r"every partition led within a bounded time: t-0 \(no state\) has not been led for 20.1 s "
        r"while brokers \[1, 2\], which could lead it, were live",
    ):
        checker.check({})


def test_a_partition_with_no_live_replica_that_could_lead_it_is_let_off() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    _topic(zk, p0=(1, 2), p1=(2, 3, 4))
    # Its only ISR member is down: leader -1, as Kafka leaves it with unclean election off,
    # although replicas 2 and 3 are live.
    zk.partition_states[TopicPartition("t", 1)] = (LeaderAndIsr(-1, 3, (4,)), 1, 3)
    checker.partition_leaders(10.0, {3}, limit_s=20.0)
    checker.partition_leaders(40.0, {3}, limit_s=20.0)
    checker.check({})
    # A replica of t-0 back: its clock starts now, not at the first look.
    checker.partition_leaders(41.0, {1, 3}, limit_s=20.0)
    checker.partition_leaders(60.0, {1, 3}, limit_s=20.0)
    checker.check({})
    # So does a topic marked for deletion.
    zk.deletion_markers.add("t")
    checker.partition_leaders(70.0, {1, 3, 4}, limit_s=20.0)
    checker.check({})


def test_a_leader_never_told_is_caught_but_only_while_the_network_is_whole() -> None:
    zk = FakeZooKeeper()
    checker = Checker(zk, {})
    _topic(zk, p0=(1, 2))
    zk.partition_states[TP] = (LeaderAndIsr(1, 2, (1, 2)), 1, 4)
    brokers = {1: (1, _leading({TP: 1})), 2: (2, _leading({}))}
    # Cut off from the controller, the leader may still wait for its LeaderAndIsr.
    checker.partition_leaders(10.0, {1, 2}, 20.0, brokers, network_whole=False)
    checker.partition_leaders(35.0, {1, 2}, 20.0, brokers, network_whole=False)
    checker.check({})
    checker.partition_leaders(36.0, {1, 2}, 20.0, brokers, network_whole=True)
    checker.partition_leaders(56.5, {1, 2}, 20.0, brokers, network_whole=True)
    with pytest.raises(Violation, match=r"t-0 \(leader 1, ISR \(1, 2\)\) has not been led for 20.5 s"):
        checker.check({})
    # Told at that leader epoch, it leads.
    checker = Checker(zk, {})
    brokers = {1: (1, _leading({TP: 2}))}
    checker.partition_leaders(10.0, {1, 2}, 20.0, brokers)
    checker.partition_leaders(40.0, {1, 2}, 20.0, brokers)
    checker.check({})
