"""Partition reassignment across real broker processes on a real ZooKeeper (spec §7.7),
porting Kafka's ControllerIntegrationTest scenarios: through `/admin/reassign_partitions` and
through AlterPartitionReassignments, with a target broker down, across a controller failover,
and under acks=all produce traffic."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import orjson
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.producer import KeelProducer
from tests.integration.conftest import Brokers
from tests.integration.replication import (
    ProduceLog,
    bootstrap,
    consume_all,
    data_dir,
    log_records,
    produce_until,
)
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to, zk_state
from tests.support import eventually
from wire.api import (
    AlterPartitionReassignmentsRequest,
    ElectionType,
    ReassignablePartition,
    ReassignableTopic,
)
from wire.client import RpcClient
from wire.errors import ErrorCode

REASSIGN = "/admin/reassign_partitions"
LONG = os.environ.get("KEEL_LONG_TESTS") == "1"


def topic_znode(kazoo: KazooClient, topic: str) -> dict[str, object]:
    return orjson.loads(kazoo.get(f"/brokers/topics/{topic}")[0])  # type: ignore[no-any-return]


def request_reassignment(kazoo: KazooClient, topic: str, partition: int, replicas: list[int]) -> None:
    """What Kafka's legacy kafka-reassign-partitions tool writes."""
    kazoo.create(
        REASSIGN,
        orjson.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}]}
        ),
    )


async def gone(kazoo: KazooClient, path: str) -> bool:
    return kazoo.exists(path) is None


async def reassignment_count(brokers: Brokers, controller: int) -> float:
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(controller).port}") as admin:
        return (await admin.describe_controller()).metrics["PartitionReassignmentRateAndTimeMs.count"]


async def kill(brokers: Brokers, kazoo: KazooClient, broker_id: int) -> None:
    brokers.by_id(broker_id).signal(signal.SIGKILL)
    await eventually(
        lambda: gone(kazoo, f"/brokers/ids/{broker_id}"),
        timeout=20,
        message=f"broker {broker_id} still registered",
    )


def plain_assignment(replicas: list[int]) -> dict[str, object]:
    return {"partitions": {"0": replicas}, "adding_replicas": {}, "removing_replicas": {}}


def assignment_of(kazoo: KazooClient, topic: str) -> dict[str, object]:
    znode = topic_znode(kazoo, topic)
    return {k: znode[k] for k in ("partitions", "adding_replicas", "removing_replicas")}


async def test_partition_reassignment_through_zookeeper(brokers: Brokers, kazoo: KazooClient) -> None:
    brokers.start(1, 2)
    c = await controller_of(brokers)
    o = 3 - c
    await create_topic(brokers.by_id(c), "t", assignment={0: [c]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 0, [c]), "topic never agreed")
    before = await reassignment_count(brokers, c)
    request_reassignment(kazoo, "t", 0, [o])
    await eventually(lambda: gone(kazoo, REASSIGN), timeout=30, message="the reassignment did not complete")
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == o, "o does not lead")
    assert state[0] == (o, 3, [o]), "A1, the reassign election and the ISR shrink each bump the epoch"
    assert zk_state(kazoo, "t", 0)["controller_epoch"] == 1  # type: ignore[index]
    assert assignment_of(kazoo, "t") == plain_assignment([o])
    assert await reassignment_count(brokers, c) > before


async def test_a_dead_target_halts_the_reassignment_until_it_comes_back(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2)
    c = await controller_of(brokers)
    o = 3 - c
    await create_topic(brokers.by_id(c), "t", assignment={0: [c]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 0, [c]), "topic never agreed")
    await kill(brokers, kazoo, o)
    request_reassignment(kazoo, "t", 0, [o])
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 1, [c]), "A1 did not bump the epoch")
    assert topic_znode(kazoo, "t")["adding_replicas"] == {"0": [o]}
    assert kazoo.exists(REASSIGN) is not None, "a halted reassignment keeps its request"

    returned = brokers.new(o).start()
    await eventually(returned.describe, timeout=20, message="o did not come back")
    await eventually(lambda: gone(kazoo, REASSIGN), timeout=30, message="the reassignment did not resume")
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == o, "o does not lead")
    assert state[0] == (o, 4, [o])
    assert assignment_of(kazoo, "t") == plain_assignment([o])


async def alter(port: int, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, int]:
    """(top-level error, partition error) of one AlterPartitionReassignments to this broker."""
    request = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name=topic, partitions=[ReassignablePartition(partition_index=partition, replicas=replicas)]
            )
        ]
    )
    client = await RpcClient.connect("127.0.0.1", port, client_id="test", request_timeout=10)
    try:
        answer = await client.send(request)
    finally:
        await client.close()
    partitions = [p.error_code for t in answer.responses for p in t.partitions]  # type: ignore[attr-defined]
    return answer.error_code, partitions[0] if partitions else 0


async def test_api_reassignment_listing_cancellation_and_refusals(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    c = await controller_of(brokers)
    o, other = [b for b in (1, 2, 3) if b != c]
    await create_topic(brokers.by_id(c), "t", assignment={0: [c]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 0, [c]), "topic never agreed")
    port = brokers.by_id(c).port
    assert await alter(port, "t", 0, []) == (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert await alter(port, "t", 0, [o, o]) == (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert await alter(port, "t", 0, [-1]) == (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert await alter(port, "t", 0, [99]) == (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert await alter(port, "t", 7, [o]) == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert await alter(port, "t", 0, None) == (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    assert (await alter(brokers.by_id(o).port, "t", 0, [o]))[0] == ErrorCode.NOT_CONTROLLER
    assert assignment_of(kazoo, "t") == plain_assignment([c])

    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(other).port}") as admin:
        # A paused target cannot catch up, so the reassignment stays in flight.
        brokers.by_id(o).signal(signal.SIGSTOP)
        try:
            answer = await admin.alter_partition_reassignments({("t", 0): [o]})
            assert [p.error_code for t in answer.responses for p in t.partitions] == [0]
            listed = await admin.list_partition_reassignments()
            assert [
                (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                for t in listed.topics
                for p in t.partitions
            ] == [("t", 0, [o, c], [o], [c])]
            only = await admin.list_partition_reassignments([("t", 0), ("t", 3)])
            assert [p.partition_index for t in only.topics for p in t.partitions] == [0]
            cancelled = await admin.alter_partition_reassignments({("t", 0): None})
            assert [p.error_code for t in cancelled.responses for p in t.partitions] == [0]
            assert (await admin.list_partition_reassignments()).topics == []
        finally:
            brokers.by_id(o).signal(signal.SIGCONT)
    assert assignment_of(kazoo, "t") == plain_assignment([c])
    await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == c and s[0][2] == [c], "c lost the partition")

    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(o).port}") as admin:
        await admin.alter_partition_reassignments({("t", 0): [other, c]})
    state = await settled_to(
        brokers, kazoo, "t", lambda s: s[0][2] == [other, c] or s[0][2] == [c, other], "never in sync"
    )
    await eventually(
        lambda: _plain(kazoo, [other, c]), timeout=30, message="the API reassignment did not complete"
    )
    assert state[0][0] == c, "the leader stays when it is in the target"


async def _plain(kazoo: KazooClient, replicas: list[int]) -> bool:
    return assignment_of(kazoo, "t") == plain_assignment(replicas)


async def test_the_next_controller_finishes_a_reassignment(brokers: Brokers, kazoo: KazooClient) -> None:
    brokers.start(1, 2, 3)
    c = await controller_of(brokers)
    x, o = [b for b in (1, 2, 3) if b != c]
    await create_topic(brokers.by_id(c), "t", assignment={0: [x]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (x, 0, [x]), "topic never agreed")
    await kill(brokers, kazoo, o)
    request_reassignment(kazoo, "t", 0, [o])
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (x, 1, [x]), "A1 did not bump the epoch")
    await kill(brokers, kazoo, c)
    assert await controller_of(brokers) == x
    returned = brokers.new(o).start()
    await eventually(returned.describe, timeout=20, message="o did not come back")
    await eventually(
        lambda: gone(kazoo, REASSIGN), timeout=30, message="the new controller did not finish it"
    )
    await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == o, "o does not lead")
    assert assignment_of(kazoo, "t") == plain_assignment([o])


async def test_a_reassignment_under_acks_all_traffic_loses_nothing_and_deletes_the_old_log(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    c = await controller_of(brokers)
    await create_topic(brokers.by_id(c), "moving", assignment={0: [1, 2]})
    await settled_to(brokers, kazoo, "moving", lambda s: s[0][2] == [1, 2], "topic never agreed")
    # About 3 MB in the short form; the 50 MB with KEEL_LONG_TESTS=1.
    preload = [f"p{i:06d}".encode() + b"x" * 1000 for i in range(50_000 if LONG else 3000)]
    async with KeelProducer(bootstrap(brokers), acks=-1, request_timeout=10, delivery_timeout=20) as producer:
        for start in range(0, len(preload), 100):
            await producer.send_many("moving", [(None, v) for v in preload[start : start + 100]], partition=0)
    assert data_dir(brokers.by_id(1), "moving", 0).exists()

    stop = asyncio.Event()
    produced = ProduceLog()
    producing = asyncio.create_task(produce_until(brokers, "moving", stop, produced))
    await eventually(lambda: _acknowledged(produced, 100), timeout=30, message="nothing acknowledged")
    async with KeelAdminClient(bootstrap(brokers)) as admin:
        answer = await admin.alter_partition_reassignments({("moving", 0): [3, 2]})
    assert [p.error_code for t in answer.responses for p in t.partitions] == [0]
    await eventually(
        lambda: _assigned(kazoo, "moving", [3, 2]),
        timeout=300 if LONG else 60,
        message="the reassignment did not complete",
    )
    after = len(produced.acknowledged) + 100
    await eventually(lambda: _acknowledged(produced, after), timeout=30, message="nothing acknowledged after")
    stop.set()
    await producing

    state = await settled_to(brokers, kazoo, "moving", lambda s: sorted(s[0][2]) == [2, 3], "ISR not [3, 2]")
    assert state[0][0] == 3, "the first target replica leads"
    acknowledged = preload + produced.acknowledged
    got = (
        await consume_all(brokers, "moving", [0], expected=len(acknowledged), timeout=300 if LONG else 60)
    )[0]
    values = [r.value for r in got]
    missing = set(acknowledged) - set(values)
    assert not missing, f"{len(missing)} acknowledged records were lost"

    async def identical() -> bool:
        return all(log_records(brokers.by_id(b), "moving", 0)[: len(got)] == got for b in (2, 3))

    await eventually(identical, timeout=30, message="the new replica's log differs from what was consumed")
    await eventually(
        lambda: _missing(data_dir(brokers.by_id(1), "moving", 0)),
        timeout=20,
        message="the removed replica's log is still on disk",
    )


async def _acknowledged(produced: ProduceLog, count: int) -> bool:
    return len(produced.acknowledged) >= count


async def _assigned(kazoo: KazooClient, topic: str, replicas: list[int]) -> bool:
    return assignment_of(kazoo, topic) == plain_assignment(replicas)


async def _missing(path: Path) -> bool:
    return not await asyncio.to_thread(path.exists)


async def test_a_preferred_election_during_a_halted_reassignment_and_its_completion(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """Spec §12.1 AutoPreferred...WithSamePartitionBeingReassigned, with an ElectLeaders in
    place of the rebalance task: the first target replica leads while the reassignment waits,
    and keeps leading when it completes."""
    brokers.start(1, 2, 3)
    c = await controller_of(brokers)
    leader, o = [b for b in (1, 2, 3) if b != c]
    await create_topic(brokers.by_id(c), "t", assignment={0: [c, leader]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 0, [c, leader]), "topic never agreed")
    await kill(brokers, kazoo, o)
    request_reassignment(kazoo, "t", 0, [leader, c, o])
    await settled_to(brokers, kazoo, "t", lambda s: s[0][1] == 1, "A1 did not bump the epoch")
    assert topic_znode(kazoo, "t")["partitions"] == {"0": [leader, c, o]}
    async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(c).port}") as admin:
        await admin.elect_leaders(ElectionType.PREFERRED, [("t", 0)])
    await settled_to(
        brokers, kazoo, "t", lambda s: s[0][:2] == (leader, 2), "the preferred replica does not lead"
    )

    returned = brokers.new(o).start()
    await eventually(returned.describe, timeout=20, message="o did not come back")
    await eventually(lambda: gone(kazoo, REASSIGN), timeout=30, message="the reassignment did not complete")
    state = await settled_to(brokers, kazoo, "t", lambda s: len(s[0][2]) == 3, "o never joined the ISR")
    assert state[0][:2] == (leader, 4), "A1 again (3), then the completion's epoch bump (4)"
    assert assignment_of(kazoo, "t") == plain_assignment([leader, c, o])


REBALANCE = {"auto_leader_rebalance_enable": "true", "leader_imbalance_check_interval_seconds": "1"}


async def three_with_rebalance(brokers: Brokers) -> tuple[int, int, int]:
    """c (the controller, started first), L and o, each with a 1 s auto-rebalance."""
    c, leader, o = 1, 2, 3
    brokers.new(c, **REBALANCE).start()
    assert await controller_of(brokers) == c
    for broker_id in (leader, o):
        brokers.new(broker_id, **REBALANCE).start()
    await eventually(brokers.agreed_controller, timeout=20, message="L and o did not join")
    return c, leader, o


async def test_auto_rebalance_with_another_partition_being_reassigned(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """Spec §12.1 AutoPreferredReplicaLeaderElectionWithOtherReassigningPartitions: a halted
    reassignment of r-0 does not keep the rebalance task from moving t-0 back to L."""
    c, leader, o = await three_with_rebalance(brokers)
    await create_topic(brokers.by_id(c), "t", assignment={0: [leader, c]})
    await create_topic(brokers.by_id(c), "r", assignment={0: [c]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (leader, 0, [leader, c]), "t never agreed")
    await settled_to(brokers, kazoo, "r", lambda s: s[0] == (c, 0, [c]), "r never agreed")

    await kill(brokers, kazoo, leader)
    await settled_to(brokers, kazoo, "t", lambda s: s[0][:2] == (c, 1), "t-0 did not move to c")
    await kill(brokers, kazoo, o)
    request_reassignment(kazoo, "r", 0, [o])
    await settled_to(brokers, kazoo, "r", lambda s: s[0] == (c, 1, [c]), "r-0's A1 did not bump its epoch")

    brokers.new(leader, **REBALANCE).start()
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == leader, "no rebalance to L")
    assert state[0][1] == 2
    assert kazoo.exists(REASSIGN) is not None, "r-0's reassignment is still waiting for o"

    brokers.new(o, **REBALANCE).start()
    await eventually(lambda: gone(kazoo, REASSIGN), timeout=30, message="r-0's reassignment did not complete")
    state = await settled_to(brokers, kazoo, "r", lambda s: s[0][0] == o, "o does not lead r-0")
    assert state[0] == (o, 4, [o])
    assert assignment_of(kazoo, "r") == plain_assignment([o])


async def test_auto_rebalance_of_the_partition_being_reassigned(brokers: Brokers, kazoo: KazooClient) -> None:
    """Spec §12.1 AutoPreferredReplicaLeaderElectionWithSamePartitionBeingReassigned: while the
    reassignment to [L, c, o] waits for o, the rebalance task makes its first target replica L
    the leader; the reassignment then completes with L still leading."""
    c, leader, o = await three_with_rebalance(brokers)
    await create_topic(brokers.by_id(c), "t", assignment={0: [c, leader]})
    await settled_to(brokers, kazoo, "t", lambda s: s[0] == (c, 0, [c, leader]), "t never agreed")
    await kill(brokers, kazoo, o)
    request_reassignment(kazoo, "t", 0, [leader, c, o])
    await settled_to(brokers, kazoo, "t", lambda s: s[0][1] >= 1, "A1 did not bump the epoch")
    assert topic_znode(kazoo, "t")["partitions"] == {"0": [leader, c, o]}
    state = await settled_to(brokers, kazoo, "t", lambda s: s[0][0] == leader, "no rebalance to L")
    assert state[0][1] == 2

    brokers.new(o, **REBALANCE).start()
    await eventually(lambda: gone(kazoo, REASSIGN), timeout=30, message="the reassignment did not complete")
    state = await settled_to(brokers, kazoo, "t", lambda s: len(s[0][2]) == 3, "o never joined the ISR")
    assert state[0][:2] == (leader, 4), "A1 again (3), then the completion's epoch bump (4)"
    assert assignment_of(kazoo, "t") == plain_assignment([leader, c, o])
