"""Controlled shutdown across real broker processes on a real ZooKeeper (spec §7.3, §12.1):
requests straight to the controller, SIGTERM moving a broker's leaders before it exits, a
controller that dies in the middle, and a rolling restart under an acks=all producer.

"Before it exits" is read from ZooKeeper itself: the broker's znode is deleted when it
closes its session, which moves `/brokers/ids`' pzxid; every state written before that has
a smaller mzxid."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from node.clients.producer import KeelProducer, ProduceFailed
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import bootstrap, consume_all
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, eventually_sync
from wire.api import ControlledShutdownRequest, ControlledShutdownResponse, RemainingPartition
from wire.client import RpcClient
from wire.errors import ErrorCode, WireError

FAST_RETRIES = {"controlled_shutdown_retry_backoff_ms": "250", "controlled_shutdown_max_retries": "20"}


def broker_epoch(kazoo: KazooClient, broker_id: int) -> int:
    return int(kazoo.get(f"/brokers/ids/{broker_id}")[1].czxid)


async def ask_controller(brokers: Brokers, broker_id: int, epoch: int) -> ControlledShutdownResponse:
    controller = brokers.by_id(await controller_of(brokers))
    client = await RpcClient.connect("127.0.0.1", controller.port)
    try:
        answer = await client.send(ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch))
    finally:
        await client.close()
    assert isinstance(answer, ControlledShutdownResponse)
    return answer


def states(kazoo: KazooClient, topic: str) -> dict[int, tuple[dict[str, object], int]]:
    """Each partition's state znode and the zxid that last wrote it."""
    out = {}
    for partition in kazoo.get_children(f"/brokers/topics/{topic}/partitions"):
        data, stat = kazoo.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        out[int(partition)] = (orjson.loads(data), stat.mzxid)
    return out


async def start_with_topic(
    brokers: Brokers, kazoo: KazooClient, topic: str, assignment: dict[int, list[int]], **settings: str
) -> None:
    for broker_id in (0, 1, 2):
        brokers.new(broker_id, **settings).start()
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), topic, assignment=assignment)
    await settled_to(
        brokers,
        kazoo,
        topic,
        lambda s: all(len(s[p][2]) == len(r) for p, r in assignment.items()),
        "the topic never got a full ISR",
    )


def stop_and_check_leaders_moved_first(kazoo: KazooClient, victim: BrokerProcess, topic: str) -> None:
    victim.signal(signal.SIGTERM)
    assert victim.wait(20) == 0, "an orderly exit"
    deregistered = kazoo.get("/brokers/ids")[1].pzxid
    for partition, (state, written) in states(kazoo, topic).items():
        assert state["leader"] != victim.broker_id, f"partition {partition} is still led by the broker"
        assert victim.broker_id not in state["isr"], f"partition {partition} still has it in the ISR"  # type: ignore[operator]
        assert written < deregistered, f"partition {partition} changed after the broker left"


async def test_brokers_ask_in_turn_as_kafka_controller_integration_test(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """Spec §12.1 ControlledShutdown: brokers 2, 1, 0 ask the controller directly."""
    await start_with_topic(brokers, kazoo, "t", {0: [0, 1, 2]}, controlled_shutdown_enable="false")
    answer = await ask_controller(brokers, 2, broker_epoch(kazoo, 2))
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    state = states(kazoo, "t")[0][0]
    assert (state["leader"], state["isr"]) == (0, [0, 1])
    answer = await ask_controller(brokers, 1, broker_epoch(kazoo, 1))
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    answer = await ask_controller(brokers, 0, broker_epoch(kazoo, 0))
    assert answer.error_code == ErrorCode.NONE
    assert answer.remaining_partitions == [RemainingPartition(topic_name="t", partition_index=0)]
    assert states(kazoo, "t")[0][0]["leader"] == 0


async def test_a_stale_broker_epoch_is_refused(brokers: Brokers, kazoo: KazooClient) -> None:
    await start_with_topic(brokers, kazoo, "t", {0: [1, 2, 0]}, controlled_shutdown_enable="false")
    before = states(kazoo, "t")
    answer = await ask_controller(brokers, 1, broker_epoch(kazoo, 1) - 1)
    assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert states(kazoo, "t") == before


async def test_sigterm_moves_every_leader_before_the_broker_exits(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_with_topic(brokers, kazoo, "t", {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(6)})
    victim = brokers.by_id(1)
    assert any(s["leader"] == 1 for s, _ in states(kazoo, "t").values())
    stop_and_check_leaders_moved_first(kazoo, victim, "t")
    assert "controlled shutdown of broker 1 done" in victim.log()


async def test_the_next_controller_finishes_a_controlled_shutdown_when_the_controller_dies(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_with_topic(
        brokers, kazoo, "t", {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(6)}, **FAST_RETRIES
    )
    controller = brokers.by_id(await controller_of(brokers))
    victim = next(b for b in brokers.running() if b is not controller)
    # The controller stops answering, the broker's request reaches it, then the controller dies.
    controller.signal(signal.SIGSTOP)
    victim.signal(signal.SIGTERM)
    eventually_sync(
        lambda: f"asking the controller, broker {controller.broker_id}" in victim.log(),
        timeout=10,
        message="the broker never asked the controller",
    )
    controller.signal(signal.SIGKILL)
    controller.wait(10)
    assert victim.wait(20) == 0, "an orderly exit"
    assert f"controlled shutdown of broker {victim.broker_id} done" in victim.log()
    deregistered = kazoo.get("/brokers/ids")[1].pzxid
    for partition, (state, written) in states(kazoo, "t").items():
        assert state["leader"] not in (victim.broker_id, controller.broker_id), partition
        assert written < deregistered, f"partition {partition} changed after the broker left"


class LeaderlessSampler:
    """Samples ZooKeeper in a thread while a test runs: a partition whose leader is not
    registered while an ISR member is registered (before and after the read) is leaderless
    though it could be led."""

    def __init__(self, kazoo: KazooClient, topic: str) -> None:
        self._kazoo = kazoo
        self._topic = topic
        self._stop = threading.Event()
        self.samples = 0
        self.violations: list[tuple[int, dict[str, object], set[int]]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LeaderlessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                before = {int(b) for b in self._kazoo.get_children("/brokers/ids")}
                current = states(self._kazoo, self._topic)
                after = {int(b) for b in self._kazoo.get_children("/brokers/ids")}
            except NoNodeError:
                continue
            self.samples += 1
            for partition, (state, _) in current.items():
                leader, isr = state["leader"], set(state["isr"])  # type: ignore[call-overload]
                if leader not in before | after and isr & before & after:
                    self.violations.append((partition, state, before & after))


async def test_a_rolling_restart_under_an_acks_all_producer_loses_nothing_and_fails_no_send(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    topic = "rolling"
    await start_with_topic(
        brokers,
        kazoo,
        topic,
        {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(3)},
        controlled_shutdown_retry_backoff_ms="500",
    )
    acknowledged: list[bytes] = []
    failed: list[Exception] = []
    stop = asyncio.Event()

    async def produce() -> None:
        number = 0
        async with KeelProducer(
            bootstrap(brokers), acks=-1, request_timeout=10, delivery_timeout=30
        ) as producer:
            while not stop.is_set():
                values = [f"r{number + i}".encode() for i in range(6)]
                number += len(values)
                try:
                    await producer.send_many(topic, [(None, v) for v in values])
                except (ProduceFailed, WireError) as e:
                    failed.append(e)
                    continue
                acknowledged.extend(values)
                await asyncio.sleep(0.005)  # paces the producer to a few thousand records

    async def acknowledged_at_least(count: int) -> bool:
        return len(acknowledged) >= count

    async def full_isrs() -> bool:
        return all(len(s["isr"]) == 3 and s["leader"] >= 0 for s, _ in states(kazoo, topic).values())  # type: ignore[arg-type, operator]

    producing = asyncio.create_task(produce())
    with LeaderlessSampler(kazoo, topic) as sampler:
        await eventually(lambda: acknowledged_at_least(100), timeout=20, message="nothing acknowledged")
        for broker_id in (0, 1, 2):
            broker = brokers.by_id(broker_id)
            broker.signal(signal.SIGTERM)
            assert await asyncio.to_thread(broker.wait, 20) == 0
            broker.start()
            await eventually(
                full_isrs, timeout=30, interval=0.1, message=f"broker {broker_id} never rejoined"
            )
        target = len(acknowledged) + 100
        await eventually(
            lambda: acknowledged_at_least(target), timeout=20, message="nothing acknowledged after"
        )
    stop.set()
    await producing
    assert not failed, f"{len(failed)} sends failed, e.g. {failed[0]!r}"
    assert sampler.samples > 10
    assert not sampler.violations, f"leaderless while a live ISR member could lead: {sampler.violations[:3]}"
    got = await consume_all(brokers, topic, [0, 1, 2], expected=len(acknowledged))
    values = {r.value for items in got.values() for r in items}
    missing = set(acknowledged) - values
    assert not missing, f"{len(missing)} acknowledged records were lost, e.g. {sorted(missing)[:3]}"
    for broker in brokers.all:
        assert "proceeding to an unclean shutdown" not in broker.log()


async def test_a_controller_that_never_answers_delays_the_stop_by_at_most_shutdown_timeout(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    await start_with_topic(
        brokers,
        kazoo,
        "t",
        {0: [0, 1, 2]},
        shutdown_timeout_ms="3000",
        controlled_shutdown_max_retries="100",
        controlled_shutdown_retry_backoff_ms="200",
    )
    controller = brokers.by_id(await controller_of(brokers))
    victim = next(b for b in brokers.running() if b is not controller)
    controller.signal(signal.SIGSTOP)
    started = time.monotonic()
    victim.signal(signal.SIGTERM)
    assert await asyncio.to_thread(victim.wait, 20) == 0, "it stops anyway, in order"
    assert time.monotonic() - started < 3.0 + 1.0, "within shutdown.timeout.ms, and some start-up slack"
    assert f"controlled shutdown of broker {victim.broker_id} failed; proceeding" in victim.log()
    controller.signal(signal.SIGCONT)
