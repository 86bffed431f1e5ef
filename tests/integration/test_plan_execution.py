"""Plans executed by the planner's executor on real brokers, a real ZooKeeper and real Spark:
a rebalance onto two empty brokers under a throttle, with the planner killed mid-way and
the standby (its own state dir) taking the plan over from its copy in ZooKeeper, and
self-healing of a broker killed for good. Spark starts in each planner process (~10 s on this machine)."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from node.clients.planner import PlannerClient
from node.clients.producer import KeelProducer
from node.cluster.local import PlannerProcess
from tests.integration.conftest import Brokers
from tests.integration.replication import bootstrap, consume_all, data_dir
from tests.integration.test_partition_leadership import create_topic, zk_assignment, zk_state
from tests.support import eventually, keel

SPARK_START_S = 120
RECORD = 1000
RECORDS = 300  # about 300 KB per partition
THROTTLE = 400_000  # bytes/s per broker


async def fill(
    brokers: Brokers, topics: dict[str, dict[int, list[int]]]
) -> dict[tuple[str, int], list[bytes]]:
    """Create the topics with these assignments and produce to every partition with acks=all;
    returns what was acknowledged."""
    for name, assignment in topics.items():
        await create_topic(brokers.by_id(1), name, assignment=assignment)
    acknowledged: dict[tuple[str, int], list[bytes]] = {}
    async with KeelProducer(bootstrap(brokers), acks=-1, request_timeout=10, delivery_timeout=30) as producer:
        for name, assignment in topics.items():
            for p in assignment:
                values = [f"{name}-{p}-{i:05d}".encode().ljust(RECORD, b".") for i in range(RECORDS)]
                for start in range(0, RECORDS, 100):
                    await producer.send_many(
                        name, [(None, v) for v in values[start : start + 100]], partition=p
                    )
                acknowledged[name, p] = values
    return acknowledged


async def registered(kazoo: KazooClient, planner: PlannerProcess) -> bool:
    try:
        data = kazoo.get("/keel/planner")[0]
    except NoNodeError:  # none yet, or the killed planner's session just expired
        return False
    return bool(orjson.loads(data)["port"] == planner.port)


def plan_record(kazoo: KazooClient) -> dict[str, object]:
    if kazoo.exists("/keel/plan") is None:
        return {}
    value = orjson.loads(kazoo.get("/keel/plan")[0])
    assert isinstance(value, dict)
    return value


async def status(planner: PlannerProcess) -> dict[str, object]:
    async with PlannerClient.at(planner.address, timeout=5) as client:
        value = orjson.loads((await client.status()).status_json)
    assert isinstance(value, dict)
    return value


def moving_per_broker(kazoo: KazooClient, topics: list[str]) -> Counter[int]:
    """Reassignments in progress per broker, from the topic znodes (adding and removing)."""
    load: Counter[int] = Counter()
    for topic in topics:
        znode = orjson.loads(kazoo.get(f"/brokers/topics/{topic}")[0])
        for p in znode["partitions"]:
            load.update(
                set(znode.get("adding_replicas", {}).get(p, []))
                | set(znode.get("removing_replicas", {}).get(p, []))
            )
    return load


async def full_isr(kazoo: KazooClient, topic: str, partition: int, replicas: list[int]) -> bool:
    state = zk_state(kazoo, topic, partition)
    return state is not None and sorted(state["isr"]) == sorted(replicas)  # type: ignore[call-overload]


async def no_log(brokers: Brokers, broker: int, topic: str, partition: int) -> bool:
    return not await asyncio.to_thread(data_dir(brokers.by_id(broker), topic, partition).exists)


async def check_executed(
    brokers: Brokers,
    kazoo: KazooClient,
    topics: dict[str, dict[int, list[int]]],
    plan: dict[tuple[str, int], list[int]],
    acknowledged: dict[tuple[str, int], list[bytes]],
) -> None:
    """ZooKeeper's assignment is the plan, spread within one of the mean per broker and per
    topic; no throttle is left; every acknowledged record is readable; every ISR is full;
    and the old replicas' logs are gone."""
    assignment = {(t, p): r for t in topics for p, r in zk_assignment(kazoo, t).items()}
    for tp, replicas in plan.items():
        assert assignment[tp] == replicas, tp
    per_broker = Counter(b for r in assignment.values() for b in r)
    assert max(per_broker.values()) - min(per_broker[b] for b in range(1, 6)) <= 1, per_broker
    for topic in topics:
        spread = Counter(b for (t, _), r in assignment.items() if t == topic for b in r)
        assert max(spread.values()) - min(spread[b] for b in range(1, 6)) <= 1, (topic, spread)
    # The throttles are gone.
    for broker in range(1, 6):
        path = f"/config/brokers/{broker}"
        assert kazoo.exists(path) is None or orjson.loads(kazoo.get(path)[0])["config"] == {}
    for topic in topics:
        assert orjson.loads(kazoo.get(f"/config/topics/{topic}")[0])["config"] == {}

    # Every acknowledged record is readable, every ISR full, and the old replicas' logs are gone.
    for topic, assignment_of_topic in topics.items():
        got = await consume_all(
            brokers, topic, list(assignment_of_topic), expected=RECORDS * len(assignment_of_topic)
        )
        for p, records in got.items():
            assert [r.value for r in records] == acknowledged[topic, p]
    for (topic, p), replicas in assignment.items():
        await eventually(
            lambda t=topic, q=p, r=replicas: full_isr(kazoo, t, q, r),  # type: ignore[misc]
            timeout=30,
            message=f"{topic}-{p}: ISR not full",
        )
        for broker in set(range(1, 6)) - set(replicas):
            await eventually(
                lambda b=broker, t=topic, q=p: no_log(brokers, b, t, q),  # type: ignore[misc]
                timeout=30,
                message=f"{topic}-{p}: the old replica's log is still on broker {broker}",
            )


async def test_a_rebalance_executes_within_its_limits_and_the_standby_takes_it_over_when_the_planner_dies(
    brokers: Brokers, kazoo: KazooClient, tmp_path: Path
) -> None:
    brokers.start(1, 2, 3, 4, 5)
    await brokers.wait_for_controller()
    topics = {
        "a": {p: [1 + (p + i) % 3 for i in range(3)] for p in range(6)},
        "b": {p: [1 + (p + i) % 3 for i in range(2)] for p in range(6)},
    }
    acknowledged = await fill(brokers, topics)
    settings = {"planner.max.concurrent.moves.per.broker": "1", "planner.snapshot.interval.ms": "0"}
    planner = brokers.new_planner(settings, home=tmp_path / "planner").start()
    planners = [planner]
    try:
        await eventually(lambda: registered(kazoo, planner), timeout=SPARK_START_S, message="no planner")
        # The standby, as on another machine: its own state dir, nothing of the plan on it.
        standby = brokers.new_planner(settings, home=tmp_path / "standby").start()
        planners.append(standby)
        await eventually(
            lambda: asyncio.sleep(0, "standing by" in standby.log()),
            timeout=SPARK_START_S,
            message="the standby never stood by",
        )
        plan_file = tmp_path / "plan.json"
        done = keel(
            "reassign",
            "plan",
            "--goal",
            "rebalance",
            "--execute",
            "--throttle",
            str(THROTTLE),
            "--output",
            str(plan_file),
            "--bootstrap-server",
            bootstrap(brokers),
        )
        assert done.returncode == 0, done.stderr
        plan = {
            (e["topic"], e["partition"]): e["replicas"]
            for e in orjson.loads(plan_file.read_text())["partitions"]
        }
        assert plan and all(set(r) & {4, 5} for r in plan.values())
        plan_id = plan_record(kazoo)["plan_id"]
        # The throttle is on every broker of the plan while it runs.
        config = orjson.loads(kazoo.get("/config/brokers/4")[0])["config"]
        assert config["follower.replication.throttled.rate"] == str(THROTTLE)

        # Never more than one move in flight per broker; kill the planner once some are done.
        async def some_done() -> bool:
            assert max(moving_per_broker(kazoo, ["a", "b"]).values(), default=0) <= 1
            record = plan_record(kazoo)
            return 1 <= int(str(record["moves_done"])) < int(str(record["moves_total"]))

        await eventually(some_done, timeout=60, interval=0.05, message="no move completed")
        planner.kill()
        before_takeover = plan_record(kazoo)
        await eventually(
            lambda: registered(kazoo, standby), timeout=SPARK_START_S, message="the standby never took over"
        )

        async def complete() -> bool:
            assert max(moving_per_broker(kazoo, ["a", "b"]).values(), default=0) <= 1
            return plan_record(kazoo).get("state") == "complete"

        await eventually(complete, timeout=120, interval=0.1, message="the plan did not complete")
        assert f"resuming plan {plan_id}" in standby.log()
        assert "taken over from its copy in ZooKeeper" in standby.log()
        assert int(str(before_takeover["moves_done"])) >= 1

        shown = keel("reassign", "status", "--format", "json", "--bootstrap-server", bootstrap(brokers))
        assert shown.returncode == 0, shown.stderr
        final = orjson.loads(shown.stdout)
        assert (final["plan_id"], final["state"], final["moves_done"]) == (plan_id, "complete", len(plan))
        assert final["bytes_copied"] == final["bytes_total"] > 0
    except BaseException:
        for process in planners:
            sys.stderr.write(f"\n--- planner log ---\n{process.log()[-6000:]}")
        raise
    finally:
        for process in planners:
            process.kill()

    await check_executed(brokers, kazoo, topics, plan, acknowledged)


async def test_self_healing_recreates_the_replicas_of_a_broker_gone_for_good(
    brokers: Brokers, kazoo: KazooClient, tmp_path: Path
) -> None:
    brokers.start(1, 2, 3, 4)
    await brokers.wait_for_controller()
    topics = {"h": {p: [1 + (p + i) % 4 for i in range(2)] for p in range(8)}}
    acknowledged = await fill(brokers, topics)
    planner = brokers.new_planner(
        {
            "planner.self.healing.enable": "true",
            "planner.self.healing.broker.failure.threshold.ms": "3000",
            "planner.snapshot.interval.ms": "0",
        },
        home=tmp_path / "planner",
    ).start()
    try:
        await eventually(lambda: registered(kazoo, planner), timeout=SPARK_START_S, message="no planner")
        brokers.by_id(3).kill()

        async def healed() -> bool:
            assignment = zk_assignment(kazoo, "h")
            if any(3 in r or len(r) != 2 for r in assignment.values()):
                return False
            return all([await full_isr(kazoo, "h", p, r) for p, r in assignment.items()])

        await eventually(
            healed, timeout=SPARK_START_S, interval=0.2, message="broker 3's replicas not re-created"
        )
        await eventually(
            lambda: asyncio.sleep(0, plan_record(kazoo).get("state") == "complete"),
            timeout=30,
            message="the heal plan did not finish",
        )
        shown = await status(planner)
        assert shown["origin"] == "self-healing" and shown["state"] == "complete"
        healing = shown["self_healing"]
        assert isinstance(healing, dict) and healing["last_heal"]["brokers"] == [3]
        # The status carries the executed plan's report: broker 3 emptied, the others filled.
        report = shown["report"]
        assert isinstance(report, dict)
        after = {row["broker"]: row["replicas_after"] for row in report["brokers"]}
        assert after.get(3, 0) == 0 and sum(after.values()) == 16
        assert "self-healing: heal plan" in planner.log_path.read_text()
    except BaseException:
        sys.stderr.write(f"\n--- planner log ---\n{planner.log()[-6000:]}")
        raise
    finally:
        planner.kill()
    got = await consume_all(brokers, "h", list(range(8)), expected=RECORDS * 8)
    for p, records in got.items():
        assert [r.value for r in records] == acknowledged["h", p]
