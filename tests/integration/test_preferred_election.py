"""Preferred and unclean leader elections across real broker processes on a real ZooKeeper
(spec §7.8, the preferred-election scenarios of §12.1): the `/admin/preferred_replica_election`
node, the auto-rebalance task, a node left for the next controller, ElectLeaders and
`keel leader-election`.

Broker ids follow the spec's letters: c (1) is the controller, started first; o (OTHER, 2) is the
preferred replica of t-0 = [o, c].
"""

from __future__ import annotations

import asyncio
import signal
import subprocess

import orjson
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from tests import support
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.test_election import controller_id
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually
from wire.api import ElectionType, ElectLeadersResponse
from wire.errors import ErrorCode

NODE = "/admin/preferred_replica_election"
C, OTHER = 1, 2  # c and o


async def stop(broker: BrokerProcess) -> None:
    broker.signal(signal.SIGTERM)
    await asyncio.to_thread(broker.wait, 20)


def ask_for_election(kazoo: KazooClient, *partitions: tuple[str, int]) -> None:
    """What Kafka's legacy admin tool writes."""
    kazoo.create(
        NODE,
        orjson.dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}),
    )


async def node_gone(kazoo: KazooClient) -> bool:
    return kazoo.exists(NODE) is None


async def metrics(broker: BrokerProcess) -> dict[str, float]:
    async with KeelAdminClient(f"127.0.0.1:{broker.port}") as admin:
        return (await admin.describe_controller()).metrics


async def led_by_c_with_o_back_in_the_isr(
    brokers: Brokers, kazoo: KazooClient, *, follower: int = C, more: tuple[int, ...] = (), **overrides: str
) -> int:
    """c, o (and `more`) up, t-0 = [o, follower]; o stops (the follower leads, E=1) and
    starts again, then catches up (ISR {o, follower}). Returns the leader epoch."""
    brokers.new(C, **overrides).start()
    assert await controller_of(brokers) == C
    for broker_id in (OTHER, *more):
        brokers.new(broker_id, **overrides).start()
    await eventually(
        lambda: _registered(kazoo, OTHER, *more), timeout=20, message="the brokers did not register"
    )
    await create_topic(brokers.by_id(C), "t", assignment={0: [OTHER, follower]})
    await settled_to(
        brokers, kazoo, "t", lambda s: s[0] == (OTHER, 0, [OTHER, follower]), "t-0 never led by o"
    )
    return await bounce_o(brokers, kazoo, follower, **overrides)


async def bounce_o(brokers: Brokers, kazoo: KazooClient, follower: int = C, **overrides: str) -> int:
    epoch = (await settled_to(brokers, kazoo, "t", lambda s: True, "no state"))[0][1]
    await stop(brokers.by_id(OTHER))
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == follower, "t-0 did not move")
    assert state[0][1] == epoch + 1
    brokers.new(OTHER, **overrides).start()
    state = await settled_to(
        brokers,
        kazoo,
        "t",
        lambda s: sorted(s[0][2]) == sorted([OTHER, follower]),
        "o did not rejoin the ISR",
    )
    assert state[0][:2] == (follower, epoch + 1), "rejoining the ISR changes neither leader nor leader epoch"
    return epoch + 1


async def _registered(kazoo: KazooClient, *broker_ids: int) -> bool:
    return all(kazoo.exists(f"/brokers/ids/{b}") is not None for b in broker_ids)


async def test_the_election_node_moves_leadership_to_the_preferred_replica(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    assert await led_by_c_with_o_back_in_the_isr(brokers, kazoo) == 1
    assert (await metrics(brokers.by_id(C)))["PreferredReplicaImbalanceCount"] == 1
    ask_for_election(kazoo, ("t", 0))
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == OTHER, "o was not elected")
    assert state[0][1] == 2
    await eventually(lambda: node_gone(kazoo), timeout=10, message="the election node was not deleted")
    after = await metrics(brokers.by_id(C))
    assert after["PreferredReplicaImbalanceCount"] == 0
    assert after["ManualLeaderBalanceRateAndTimeMs.count"] >= 1
    # Back to back: the same again takes the leader epoch to 3, then 4.
    assert await bounce_o(brokers, kazoo) == 3
    ask_for_election(kazoo, ("t", 0))
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == OTHER, "o was not elected again")
    assert state[0][1] == 4
    await eventually(lambda: node_gone(kazoo), timeout=10, message="the second node was not deleted")


async def test_an_election_node_naming_an_offline_preferred_replica_changes_nothing(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.new(C).start()
    assert await controller_of(brokers) == C
    brokers.new(OTHER).start()
    await eventually(lambda: _registered(kazoo, OTHER), timeout=20, message="o did not register")
    await create_topic(brokers.by_id(C), "t", assignment={0: [OTHER, C]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (OTHER, 0, [OTHER, C]), "t-0 never led by o")
    await stop(brokers.by_id(OTHER))
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (C, 1, [C]), "c did not take over t-0")
    ask_for_election(kazoo, ("t", 0), ("missing", 0))
    await eventually(lambda: node_gone(kazoo), timeout=10, message="the election node was not deleted")
    state = await settled_to(brokers, kazoo, "t", lambda s: True, "no state")
    assert state[0] == (C, 1, [C])


async def test_auto_rebalance_moves_leadership_back_once_the_preferred_replica_returns(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    rebalance = {"auto_leader_rebalance_enable": "true", "leader_imbalance_check_interval_seconds": "1"}
    await led_by_c_with_o_back_in_the_isr(brokers, kazoo, **rebalance)
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == OTHER, "no automatic rebalance")
    assert state[0][1] == 2
    assert (await metrics(brokers.by_id(C)))["AutoLeaderBalanceRateAndTimeMs.count"] >= 1


async def test_an_election_node_the_controller_missed_is_processed_at_failover(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    # t-0 = [o, 3], led by 3: the controller hosts none of it, so its death elects nothing.
    assert await led_by_c_with_o_back_in_the_isr(brokers, kazoo, follower=3, more=(3,)) == 1
    controller = brokers.by_id(C)
    controller.signal(signal.SIGSTOP)  # it can no longer hear of the node
    ask_for_election(kazoo, ("t", 0))
    controller.signal(signal.SIGKILL)
    await eventually(lambda: _controller_other_than(kazoo, C), timeout=20, message="no new controller")
    await eventually(lambda: node_gone(kazoo), timeout=20, message="the next controller left the node")
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == OTHER, "o was not elected at failover")
    assert state[0][1] == 2


async def _controller_other_than(kazoo: KazooClient, old: int) -> int | None:
    holder = controller_id(kazoo)
    return holder if holder != old else None


def results(response: ElectLeadersResponse) -> dict[tuple[str, int], int]:
    return {
        (topic.topic, r.partition_id): r.error_code
        for topic in response.replica_election_results
        for r in topic.partition_result
    }


def keel(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return support.keel("leader-election", *args, "--bootstrap-server", f"127.0.0.1:{broker.port}")


async def test_elect_leaders_answers_per_partition_and_keel_prints_it(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await led_by_c_with_o_back_in_the_isr(brokers, kazoo, more=(3,))
    await create_topic(brokers.by_id(C), "u", assignment={0: [C, 3], 1: [3, C]})
    await settled_to(brokers, kazoo, "u", lambda s: len(s) == 2, "u never agreed")
    # The CLI, asked through a broker that is not the controller: finds the controller.
    done = await asyncio.to_thread(
        keel, brokers.by_id(3), "--election-type", "preferred", "--all-topic-partitions"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Successfully completed leader election (PREFERRED) for partitions t-0\n"
    await settled_to(brokers, kazoo, "t", lambda s: s[0][:2] == (OTHER, 2), "o does not lead t-0")
    again = await asyncio.to_thread(
        keel, brokers.by_id(OTHER), "--election-type", "preferred", "--topic", "t", "--partition", "0"
    )
    assert (again.returncode, again.stdout) == (0, "Valid replica already elected for partitions t-0\n")
    unknown = await asyncio.to_thread(
        keel,
        brokers.by_id(OTHER),
        "--election-type",
        "preferred",
        "--topic",
        "nope",
        "--partition",
        "0",
        "--format",
        "json",
    )
    assert unknown.returncode == 1
    assert unknown.stderr == "keel: 1 replica(s) could not be elected\n"
    (row,) = orjson.loads(unknown.stdout)["results"]
    assert (row["topic"], row["partition"], row["error"]) == ("nope", 0, "UNKNOWN_TOPIC_OR_PARTITION")

    # u-0 = [c, 3]: 3 leaves, then c; c comes back out of the ISR: only an unclean election helps.
    await stop(brokers.by_id(3))
    await settled_to(brokers, kazoo, "u", lambda s: s[0][2] == [C] and s[1] == (C, 1, [C]), "3 not dropped")
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(OTHER).port}") as admin:
        preferred = await admin.elect_leaders(ElectionType.PREFERRED, [("u", 1), ("u", 0)])
        assert results(preferred) == {
            ("u", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("u", 1): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        }
        unclean = await admin.elect_leaders(ElectionType.UNCLEAN, [("u", 0), ("t", 0)])
        assert results(unclean) == {
            ("u", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
        }
    await stop(brokers.by_id(C))
    brokers.new(3).start()
    await settled_to(brokers, kazoo, "u", lambda s: s[0] == (-1, 2, [C]), "u-0 not offline")
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(OTHER).port}") as admin:
        unclean = await admin.elect_leaders(ElectionType.UNCLEAN, [("u", 0)])
    assert results(unclean) == {("u", 0): ErrorCode.NONE}
    state = await settled_to(brokers, kazoo, "u", lambda s: s[0][0] == 3, "3 was not elected uncleanly")
    assert state[0][2] == [3]
