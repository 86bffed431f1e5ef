"""Partition leadership across real broker processes on a real ZooKeeper (issue: partition
leadership, acceptance). ZooKeeper's state, every broker's Metadata and the CLI must agree."""

from __future__ import annotations

import asyncio
import re
import signal

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from node.clients.admin import KeelAdminClient
from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually, keel
from wire.api import (
    CreatableReplicaAssignment,
    CreatableTopic,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataResponse,
)
from wire.client import RpcClient
from wire.errors import ErrorCode


def zk_state(kazoo: KazooClient, topic: str, partition: int) -> dict[str, object] | None:
    try:
        return orjson.loads(kazoo.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])  # type: ignore[no-any-return]
    except NoNodeError:
        return None


def zk_assignment(kazoo: KazooClient, topic: str) -> dict[int, list[int]]:
    raw = orjson.loads(kazoo.get(f"/brokers/topics/{topic}")[0])["partitions"]
    return {int(p): replicas for p, replicas in raw.items()}


async def metadata(broker: BrokerProcess, topic: str) -> MetadataResponse | None:
    try:
        async with KeelAdminClient(f"127.0.0.1:{broker.port}", timeout=2) as admin:
            return await admin.metadata([topic])
    except Exception:
        return None


async def agreed(
    brokers: Brokers, kazoo: KazooClient, topic: str
) -> dict[int, tuple[int, int, list[int]]] | None:
    """(leader, leader epoch, ISR) per partition, once ZooKeeper and every running broker agree."""
    assignment = zk_assignment(kazoo, topic)
    zk = {}
    for partition in assignment:
        state = zk_state(kazoo, topic, partition)
        if state is None:
            return None
        zk[partition] = (state["leader"], state["leader_epoch"], state["isr"])
    answers = await asyncio.gather(*(metadata(b, topic) for b in brokers.running()))
    for answer in answers:
        if answer is None or answer.topics[0].error_code != ErrorCode.NONE:
            return None
        seen = {p.partition: (p.leader, p.leader_epoch, p.isr) for p in answer.topics[0].partitions}
        if seen != zk:
            return None
    return zk  # type: ignore[return-value]


async def settled_to(
    brokers: Brokers, kazoo: KazooClient, topic: str, predicate: object, message: str
) -> dict[int, tuple[int, int, list[int]]]:
    async def probe() -> dict[int, tuple[int, int, list[int]]] | None:
        state = await agreed(brokers, kazoo, topic)
        return state if state is not None and predicate(state) else None  # type: ignore[operator]

    return await eventually(probe, timeout=30, interval=0.1, message=message)


async def create_topic(
    broker: BrokerProcess,
    name: str,
    *,
    partitions: int = -1,
    rf: int = -1,
    assignment: dict[int, list[int]] | None = None,
    **configs: str,
) -> None:
    topic = CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[
            CreatableReplicaAssignment(partition=p, broker_ids=r) for p, r in (assignment or {}).items()
        ],
        configs={k.replace("_", "."): v for k, v in configs.items()},
    )
    async with KeelAdminClient(f"127.0.0.1:{broker.port}") as admin:
        (result,) = (await admin.create_topics([topic])).topics
    assert result.error_code == ErrorCode.NONE, result.error_message


async def controller_of(brokers: Brokers) -> int:
    agreed_controller = await eventually(brokers.agreed_controller, timeout=20, message="no controller")
    return agreed_controller[0]


async def test_topics_created_by_rpc_and_in_zookeeper_get_leaders_everyone_agrees_on(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    (one, _, three) = brokers.start(1, 2, 3)
    await controller_of(brokers)
    await create_topic(one, "by-rpc", partitions=6, rf=3)
    # As Kafka's old tools did: the assignment written straight into ZooKeeper.
    kazoo.create(
        "/brokers/topics/by-zk", orjson.dumps({"version": 1, "partitions": {"0": [2, 3, 1], "1": [3, 1, 2]}})
    )
    for topic in ("by-rpc", "by-zk"):
        assignment = zk_assignment(kazoo, topic)
        state = await settled_to(brokers, kazoo, topic, lambda s: True, f"{topic} never agreed")
        assert state == {p: (replicas[0], 0, replicas) for p, replicas in assignment.items()}
    described = await asyncio.to_thread(
        keel,
        "topic",
        "describe",
        "--topic",
        "by-zk",
        "--format",
        "json",
        "--bootstrap-server",
        f"127.0.0.1:{three.port}",
    )
    assert described.returncode == 0, described.stderr
    rows = orjson.loads(described.stdout)
    assert [(r["partition"], r["leader"], r["isr"], r["leader_epoch"]) for r in rows] == [
        (0, 2, [2, 3, 1], 0),
        (1, 3, [3, 1, 2], 0),
    ]


async def test_kill_9_of_a_broker_moves_its_leadership_and_shrinks_isrs(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "t", partitions=6, rf=3)
    before = await settled_to(brokers, kazoo, "t", lambda s: True, "topic never agreed")
    victim = next(b for b in (1, 2, 3) if b != controller)
    led = [p for p, (leader, _, _) in before.items() if leader == victim]
    assert led, "the victim leads some partitions"
    brokers.by_id(victim).signal(signal.SIGKILL)
    after = await settled_to(
        brokers,
        kazoo,
        "t",
        lambda s: all(victim not in isr for _, _, isr in s.values()),
        "leadership did not move",
    )
    assignment = zk_assignment(kazoo, "t")
    for partition, (leader, epoch, isr) in after.items():
        live = [r for r in assignment[partition] if r != victim]
        assert isr == live, "the ISR shrinks to the live replicas, in order"
        assert epoch == 1, "each change of leader or ISR raises the leader epoch by one"
        if partition in led:
            assert leader == live[0], "the next live ISR member leads"
        else:
            assert leader == before[partition][0], "partitions it only followed keep their leader"


async def test_unclean_election_is_off_until_the_topic_turns_it_on(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    a, b = [x for x in (1, 2, 3) if x != controller]
    await create_topic(brokers.by_id(controller), "fragile", assignment={0: [a, b]})
    await settled_to(brokers, kazoo, "fragile", lambda s: s[0] == (a, 0, [a, b]), "topic never agreed")
    brokers.by_id(a).signal(signal.SIGKILL)
    await settled_to(brokers, kazoo, "fragile", lambda s: s[0][0] == b, "b did not take over")
    brokers.by_id(b).signal(signal.SIGKILL)
    state = await settled_to(brokers, kazoo, "fragile", lambda s: s[0][0] == -1, "no offline leader")
    assert state[0][2] == [b], "the ISR keeps its last member"
    # a returns, but it was not in the ISR: with unclean election off it may not lead.
    returned = brokers.new(a).start()
    await eventually(returned.describe, timeout=20, message="a did not come back")
    await settled_to(brokers, kazoo, "fragile", lambda s: s[0][0] == -1, "an out-of-sync replica led")
    # Turn unclean election on for the topic, then let a start again: the election reads it.
    kazoo.set(
        "/config/topics/fragile",
        orjson.dumps({"version": 1, "config": {"unclean.leader.election.enable": "true"}}),
    )
    returned.signal(signal.SIGKILL)
    await eventually(lambda: _gone(kazoo, a), timeout=15, message="a's session did not expire")
    brokers.new(a).start()
    state = await settled_to(brokers, kazoo, "fragile", lambda s: s[0][0] == a, "no unclean leader")
    assert state[0][2] == [a]
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(controller).port}") as admin:
        metrics = (await admin.describe_controller()).metrics
    assert metrics["UncleanLeaderElections"] == 1
    assert metrics["OfflinePartitionsCount"] == 0


async def _gone(kazoo: KazooClient, broker_id: int) -> bool:
    return kazoo.exists(f"/brokers/ids/{broker_id}") is None


async def test_a_returning_broker_becomes_follower_and_offline_partitions_get_their_leader_back(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    victim = next(b for b in (1, 2, 3) if b != controller)
    other = next(b for b in (1, 2, 3) if b not in (controller, victim))
    await create_topic(brokers.by_id(controller), "t", assignment={0: [victim, other], 1: [other, victim]})
    await create_topic(brokers.by_id(controller), "solo", assignment={0: [victim]})
    await settled_to(brokers, kazoo, "t", lambda s: True, "topic never agreed")
    await settled_to(brokers, kazoo, "solo", lambda s: True, "topic never agreed")
    brokers.by_id(victim).signal(signal.SIGKILL)
    await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == other, "no failover")
    await settled_to(brokers, kazoo, "solo", lambda s: s[0][0] == -1, "the solo partition stayed online")
    returned = brokers.new(victim).start()
    solo = await settled_to(
        brokers, kazoo, "solo", lambda s: s[0][0] == victim, "the offline partition got no leader"
    )
    # Its epoch rose once when it went offline (leader -1) and once when it was elected again.
    assert solo[0] == (victim, 2, [victim]), "its only replica leads it again"
    state = await settled_to(brokers, kazoo, "t", lambda s: True, "topic never agreed")
    assert state[0][0] == other and state[1][0] == other, "it returns as a follower, not as leader"

    async def told_as_follower() -> bool:
        # Its first LeaderAndIsr makes it follower of t-0 and t-1 (and of solo-0, leaderless then).
        follows = [int(n) for n in re.findall(r"leader of 0, follower of (\d+)", returned.log())]
        return bool(follows) and max(follows) >= 2

    await eventually(
        told_as_follower, timeout=10, message="the returning broker was not told it follows 2 partitions"
    )


async def test_the_next_controller_finishes_a_broker_failure_the_last_one_started(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3, 4)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "wide", partitions=300, rf=3)
    await settled_to(brokers, kazoo, "wide", lambda s: len(s) == 300, "topic never agreed")
    victim = next(b for b in (1, 2, 3, 4) if b != controller)
    brokers.by_id(victim).signal(signal.SIGKILL)
    await eventually(lambda: _gone(kazoo, victim), timeout=15, message="the victim's session did not expire")
    # The controller is now electing leaders for the victim's partitions: kill it mid-way.
    brokers.by_id(controller).signal(signal.SIGKILL)
    dead = {victim, controller}

    def healed(state: dict[int, tuple[int, int, list[int]]]) -> bool:
        return all(
            leader not in dead and leader != -1 and not dead & set(isr) for leader, _, isr in state.values()
        )

    await settled_to(brokers, kazoo, "wide", healed, "a partition that could have a leader has none")


async def test_a_deposed_controller_changes_nothing_and_its_orders_are_refused(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    # The future zombie keeps a long session so that it survives being paused.
    zombie = brokers.new(1, zookeeper_session_timeout_ms="20000").start()
    await controller_of(brokers)
    brokers.start(2, 3)
    assert await controller_of(brokers) == 1
    await create_topic(zombie, "t", assignment={0: [2, 3], 1: [3, 2]})
    await settled_to(brokers, kazoo, "t", lambda s: True, "topic never agreed")
    old_epoch = int(kazoo.get("/controller_epoch")[0])
    zombie.signal(signal.SIGSTOP)
    brokers.by_id(2).signal(signal.SIGKILL)  # the zombie will hear of this when it wakes
    await eventually(lambda: _gone(kazoo, 2), timeout=15, message="broker 2's session did not expire")
    kazoo.delete("/controller")  # broker 3 takes over behind the zombie's back

    async def taken_over() -> bool:
        return (
            kazoo.exists("/controller") is not None
            and int(kazoo.get("/controller_epoch")[0]) == old_epoch + 1
        )

    await eventually(taken_over, timeout=15, message="no new controller")
    await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == 3, "the new controller did not elect")
    takeover_zxid = kazoo.exists("/controller").czxid
    zombie.signal(signal.SIGCONT)

    async def resigned() -> bool:
        return "broker 1 resigned as controller" in zombie.log()

    await eventually(resigned, timeout=15, message="the zombie did not resign")
    for partition in (0, 1):
        stat = kazoo.exists(f"/brokers/topics/t/partitions/{partition}/state")
        state = zk_state(kazoo, "t", partition)
        assert state is not None
        if stat.mzxid > takeover_zxid:
            assert state["controller_epoch"] == old_epoch + 1, (
                "only the new controller wrote after the takeover"
            )
    client = await RpcClient.connect("127.0.0.1", brokers.by_id(3).port)
    order = LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=old_epoch,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="t",
                partition=0,
                controller_epoch=old_epoch,
                leader=3,
                leader_epoch=99,
                isr=[3],
                partition_epoch=9,
                replicas=[2, 3],
            )
        ],
    )
    response = await client.send(order)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    await client.close()
