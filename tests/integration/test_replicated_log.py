"""The replicated log across real broker processes on a real ZooKeeper (issue: replicated
log, acceptance): produce and consume, leader and controller failures under acks=all, ISR
shrink and expansion, min.insync.replicas, unclean election, and log recovery."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

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
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, eventually_sync
from wire import records
from wire.api import ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData
from wire.client import RpcClient
from wire.errors import ErrorCode


async def test_ten_thousand_records_with_acks_all_come_back_in_order(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "orders", partitions=3, rf=3)
    await settled_to(brokers, kazoo, "orders", lambda s: len(s) == 3, "topic never agreed")
    next_offset = {0: 0, 1: 0, 2: 0}
    async with KeelProducer(bootstrap(brokers), acks=-1) as producer:
        for start in range(0, 10_000, 500):
            values = [f"record-{i}".encode() for i in range(start, start + 500)]
            for delivered in await producer.send_many("orders", [(None, v) for v in values]):
                assert delivered.base_offset == next_offset[delivered.partition], "acknowledged in order"
                next_offset[delivered.partition] += delivered.count
    got = await consume_all(brokers, "orders", [0, 1, 2], expected=10_000)
    assert sum(len(v) for v in got.values()) == 10_000
    for partition, items in got.items():
        assert [r.offset for r in items] == list(range(len(items))), "offsets are dense and in order"
        numbers = [int(r.value.split(b"-")[1]) for r in items if r.value]
        assert numbers == sorted(numbers), f"partition {partition} is in send order"
    # A follower that fell out of the ISR on a slow machine catches up after the fact.
    eventually_sync(
        lambda: all(log_records(b, "orders", p) == items for p, items in got.items() for b in brokers.all),
        timeout=20,
        interval=0.2,
        message="every replica holds the same log as was consumed",
    )


async def leader_of(brokers: Brokers, kazoo: KazooClient, topic: str) -> tuple[int, int]:
    """(leader, leader epoch) of partition 0 once it has a live leader everyone agrees on."""
    state = await settled_to(brokers, kazoo, topic, lambda s: s[0][0] >= 0, "partition 0 has no leader")
    return state[0][0], state[0][1]


async def assert_nothing_acknowledged_was_lost(
    brokers: Brokers, kazoo: KazooClient, topic: str, produced: ProduceLog
) -> None:
    """Every acknowledged record is consumed; once every replica is back in the ISR their logs
    are identical up to the high watermark, so no offset holds two different records."""
    assert produced.acknowledged, "the producer got acknowledgements"
    await settled_to(brokers, kazoo, topic, lambda s: len(s[0][2]) == 3, "not every replica rejoined the ISR")
    got = (await consume_all(brokers, topic, [0], expected=len(produced.acknowledged)))[0]
    values = [r.value for r in got]
    missing = set(produced.acknowledged) - set(values)
    assert not missing, f"{len(missing)} acknowledged records were lost, e.g. {sorted(missing)[:3]}"
    high_watermark = len(got)

    async def identical() -> list[list[records.Record]] | None:
        logs = [log_records(b, topic, 0)[:high_watermark] for b in brokers.running()]
        return logs if all(log == got for log in logs) else None

    await eventually(identical, timeout=20, message="the replicas' logs differ below the high watermark")


async def produce_through(
    brokers: Brokers, topic: str, disruption: Callable[[], Awaitable[None]]
) -> ProduceLog:
    """Produce with acks=all before, during and after `disruption`."""
    stop = asyncio.Event()
    produced = ProduceLog()
    producing = asyncio.create_task(produce_until(brokers, topic, stop, produced))

    async def acknowledged_at_least(count: int) -> bool:
        return len(produced.acknowledged) >= count

    await eventually(lambda: acknowledged_at_least(200), timeout=30, message="nothing acknowledged before")
    await disruption()
    after = len(produced.acknowledged) + 200
    await eventually(lambda: acknowledged_at_least(after), timeout=60, message="nothing acknowledged after")
    stop.set()
    return await producing


async def start_replicated_topic(
    brokers: Brokers, kazoo: KazooClient, topic: str, *, start: bool = True, **configs: str
) -> None:
    """Brokers 1, 2, 3 (unless started already) and a topic of one partition on [1, 2, 3] with
    a full ISR; min.insync.replicas 2 unless `configs` say otherwise."""
    if start:
        brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(
        brokers.by_id(controller), topic, assignment={0: [1, 2, 3]}, **{"min_insync_replicas": "2", **configs}
    )
    await settled_to(brokers, kazoo, topic, lambda s: len(s[0][2]) == 3, "topic never agreed")


async def test_kill_9_of_the_leader_during_acks_all_produce_loses_nothing(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_replicated_topic(brokers, kazoo, "payments")
    leader, epoch = await leader_of(brokers, kazoo, "payments")
    victim = brokers.by_id(leader)

    async def kill_leader() -> None:
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        await settled_to(brokers, kazoo, "payments", lambda s: s[0][0] not in (-1, leader), "no new leader")
        for survivor in brokers.running():
            warnings = [
                line
                for line in survivor.log().splitlines()
                if "WARNING" in line and f"fetch from broker {leader} " in line
            ]
            # Retried every backoff until the controller moves the partitions: logged once.
            assert len(warnings) <= 1, warnings

    produced = await produce_through(brokers, "payments", kill_leader)
    victim.start()  # it comes back, truncates to where it agrees with the new leader, and catches up
    await assert_nothing_acknowledged_was_lost(brokers, kazoo, "payments", produced)
    assert (await leader_of(brokers, kazoo, "payments"))[1] > epoch


async def test_kill_9_of_the_controller_during_acks_all_produce_loses_nothing(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_replicated_topic(brokers, kazoo, "ledger")
    controller = brokers.by_id(await controller_of(brokers))

    async def kill_controller() -> None:
        controller.signal(signal.SIGKILL)
        controller.wait(10)
        await eventually(
            lambda: _new_controller(brokers, controller.broker_id), timeout=20, message="no new controller"
        )

    produced = await produce_through(brokers, "ledger", kill_controller)
    controller.start()
    await assert_nothing_acknowledged_was_lost(brokers, kazoo, "ledger", produced)


async def _new_controller(brokers: Brokers, old: int) -> bool:
    agreed = await brokers.agreed_controller()
    return agreed is not None and agreed[0] != old


async def test_five_leader_bounces_in_a_row_lose_nothing(brokers: Brokers, kazoo: KazooClient) -> None:
    await start_replicated_topic(brokers, kazoo, "events")

    async def bounce_five_times() -> None:
        for _ in range(5):
            leader, epoch = await leader_of(brokers, kazoo, "events")
            victim = brokers.by_id(leader)
            victim.signal(signal.SIGKILL)
            victim.wait(10)
            victim.start()
            # The next round bounces whoever leads as soon as everyone agrees on it. (When the
            # victim was also the controller and is back before the next controller loads its
            # context, it keeps the lead at the same epoch, as in Kafka.)
            await settled_to(
                brokers, kazoo, "events", lambda s, e=epoch: s[0][0] >= 0 and s[0][1] >= e, "no leader"
            )

    produced = await produce_through(brokers, "events", bounce_five_times)
    await assert_nothing_acknowledged_was_lost(brokers, kazoo, "events", produced)


async def produce_acknowledged(brokers: Brokers, topic: str, values: list[bytes]) -> None:
    async with KeelProducer(bootstrap(brokers), acks=-1, request_timeout=10, delivery_timeout=20) as producer:
        await producer.send_many(topic, [(None, v) for v in values], partition=0)


async def test_a_paused_follower_leaves_the_isr_and_rejoins_after_it_resumes(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    # The lag limit is well below the ZooKeeper session timeout: the leader, not the
    # controller, must notice the paused follower.
    settings = {"replica_lag_time_max_ms": "1500", "zookeeper_session_timeout_ms": "10000"}
    for broker_id in (1, 2, 3):
        brokers.new(broker_id, **settings).start()
    await start_replicated_topic(brokers, kazoo, "audit", start=False)
    follower = brokers.by_id(3)
    follower.signal(signal.SIGSTOP)
    stop = asyncio.Event()
    producing = asyncio.create_task(produce_until(brokers, "audit", stop))
    shrunk = await settled_to(
        brokers, kazoo, "audit", lambda s: 3 not in s[0][2], "the paused follower stayed in the ISR"
    )
    assert shrunk[0][2] == [1, 2] and shrunk[0][0] == 1, (
        "the leader keeps its lead and drops only the laggard"
    )
    follower.signal(signal.SIGCONT)
    await settled_to(
        brokers, kazoo, "audit", lambda s: sorted(s[0][2]) == [1, 2, 3], "the follower never rejoined"
    )
    stop.set()
    produced = await producing
    await assert_nothing_acknowledged_was_lost(brokers, kazoo, "audit", produced)


async def test_below_min_insync_replicas_acks_all_is_refused_and_nothing_is_appended(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_replicated_topic(brokers, kazoo, "strict")
    committed = [f"c{i}".encode() for i in range(100)]
    await produce_acknowledged(brokers, "strict", committed)
    for victim in [brokers.by_id(2), brokers.by_id(3)]:
        victim.signal(signal.SIGKILL)
    await settled_to(
        brokers, kazoo, "strict", lambda s: s[0][2] == [1], "the ISR did not shrink to the leader"
    )
    leader = brokers.by_id(1)
    before = log_records(leader, "strict", 0)
    request = ProduceRequest(
        acks=-1,
        topic_data=[
            ProduceTopicData(
                name="strict",
                partition_data=[
                    ProducePartitionData(index=0, records=records.build_batch([(None, b"x")], timestamp=1))
                ],
            )
        ],
    )
    client = await RpcClient.connect("127.0.0.1", leader.port)
    try:
        response = await client.send(request)
    finally:
        await client.close()
    assert isinstance(response, ProduceResponse)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, answer
    assert log_records(leader, "strict", 0) == before, "nothing was appended"
    got = (await consume_all(brokers, "strict", [0], expected=100))[0]
    assert [r.value for r in got] == committed, "consumers still read everything committed"


async def test_unclean_election_loses_what_the_new_leader_never_had(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_replicated_topic(
        brokers, kazoo, "lossy", min_insync_replicas="1", unclean_leader_election_enable="true"
    )
    early = [f"early-{i}".encode() for i in range(50)]
    await produce_acknowledged(brokers, "lossy", early)
    laggard = brokers.by_id(3)
    laggard.signal(signal.SIGKILL)
    laggard.wait(10)
    await settled_to(brokers, kazoo, "lossy", lambda s: 3 not in s[0][2], "broker 3 stayed in the ISR")
    late = [f"late-{i}".encode() for i in range(50)]
    await produce_acknowledged(brokers, "lossy", late)  # acknowledged by 1 and 2 only
    for victim in [brokers.by_id(1), brokers.by_id(2)]:
        victim.signal(signal.SIGKILL)
        victim.wait(10)
    laggard.start()
    state = await settled_to(
        brokers, kazoo, "lossy", lambda s: s[0][0] == 3, "broker 3 was not elected uncleanly"
    )
    assert state[0][2] == [3], "an unclean leader starts with an ISR of itself"
    async with KeelAdminClient(f"127.0.0.1:{laggard.port}") as admin:
        metrics = (await admin.describe_controller()).metrics
    assert metrics["UncleanLeaderElections"] >= 1
    got = [r.value for r in (await consume_all(brokers, "lossy", [0], expected=len(early)))[0]]
    lost = [v for v in late if v not in got]
    print(
        f"unclean election: {len(lost)} of {len(early) + len(late)} acknowledged records lost,"
        " as Kafka documents"
    )
    assert got == early and lost == late, "exactly what the new leader never replicated is gone"


async def test_a_log_cut_mid_batch_recovers_and_catches_up_by_fetching(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_replicated_topic(brokers, kazoo, "journal")
    first = [f"a{i}".encode() for i in range(200)]
    for start in range(0, 200, 50):  # several batches, so recovery keeps the good ones
        await produce_acknowledged(brokers, "journal", first[start : start + 50])
    follower = brokers.by_id(3)
    follower.signal(signal.SIGKILL)
    follower.wait(10)
    (segment,) = sorted(data_dir(follower, "journal", 0).glob("*.log"))
    whole = segment.read_bytes()
    segment.write_bytes(whole[: len(whole) - 7])  # the last batch is torn
    more = [f"b{i}".encode() for i in range(200)]
    await produce_acknowledged(brokers, "journal", more)
    follower.start()

    async def recovered() -> bool:
        return "torn bytes dropped" in follower.log()

    await eventually(recovered, timeout=20, message="the broker did not report recovering its log")
    assert "recovered to offset 150" in follower.log(), "only the torn last batch was dropped"
    await assert_nothing_acknowledged_was_lost(
        brokers, kazoo, "journal", ProduceLog(acknowledged=first + more)
    )
