"""Consumer-group rebalances through librdkafka (confluent-kafka) against Keel's coordinator.

3 brokers with Kafka listeners, a topic of 6 partitions (RF 3), `__consumer_offsets` of 50
partitions made by the first group. Each run, in a group of its own:

- baseline: one consumer subscribes; the time until it holds all 6 partitions (one member's
  JoinGroup and SyncGroup, and librdkafka's own steps around them);
- join: two more subscribe at once; the time until the three hold two partitions each;
- leave: one of the three closes (LeaveGroup); the time until the two left hold all six.

Consumers heartbeat every 100 ms, so that the members learn of a rebalance in about that
time (librdkafka's default of 3 s would dominate every figure); `group.initial.rebalance.delay.ms`
is 0, as in Kafka's test clusters. Prints each run and the medians, and the join and leave
rebalances as ratios of the baseline.

    .venv/bin/python -m bench.group_rebalance [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.election import cpu_model
from bench.kafka_listener import start_brokers
from node.cluster.zookeeper import EmbeddedZooKeeper

TOPIC = "rebalanced"
PARTITIONS = 6
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


class Member:
    """A librdkafka consumer polled on a thread of its own; `assignment` is what it holds."""

    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.assignment: set[int] = set()
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 100,
                "enable.auto.commit": False,
            }
        )
        self._consumer.subscribe(
            [TOPIC],
            on_assign=lambda _c, parts: self.assignment.update(p.partition for p in parts),
            on_revoke=lambda _c, parts: self.assignment.difference_update(p.partition for p in parts),
        )
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.01)
        self._consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def time_until(condition: object, timeout: float = 60.0) -> float:
    started = time.perf_counter()
    while not condition():  # type: ignore[operator]
        if time.perf_counter() - started > timeout:
            raise TimeoutError("the group never settled")
        time.sleep(0.002)
    return time.perf_counter() - started


def shared(members: list[Member], each: int) -> bool:
    held = [m.assignment for m in members]
    return all(len(h) == each for h in held) and len(set().union(*held)) == PARTITIONS


def one_run(bootstrap: str, group: str) -> tuple[float, float, float]:
    first = Member(bootstrap, group)
    baseline = time_until(lambda: shared([first], PARTITIONS))
    others = [Member(bootstrap, group), Member(bootstrap, group)]
    members = [first, *others]
    join = time_until(lambda: shared(members, PARTITIONS // 3))
    leaving = members.pop()
    started = time.perf_counter()
    leaving.close()
    leave = time.perf_counter() - started + time_until(lambda: shared(members, PARTITIONS // 2))
    for m in members:
        m.close()
    return baseline, join, leave


async def create_topic(ports: dict[int, int]) -> None:
    from node.clients.admin import KeelAdminClient
    from wire.api import CreatableTopic

    async with KeelAdminClient(",".join(f"127.0.0.1:{p}" for p in ports.values()), timeout=30) as admin:
        await admin.create_topics(
            [CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=3)]
        )
        deadline = time.monotonic() + 60
        while True:
            answer = await admin.metadata([TOPIC])
            parts = answer.topics[0].partitions if answer.topics else []
            if len(parts) == PARTITIONS and all(p.leader >= 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{TOPIC} has no leaders")
            await asyncio.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        cluster, ports, kafka_ports = start_brokers(zookeeper.connect_string, Path(tmp), GROUP_SETTINGS)
        try:
            asyncio.run(create_topic(ports))
            bootstrap = ",".join(f"127.0.0.1:{p}" for p in kafka_ports.values())
            one_run(bootstrap, "warm-up")  # makes __consumer_offsets and elects its leaders
            results = []
            for run in range(args.runs):
                baseline, join, leave = one_run(bootstrap, f"group-{run}")
                results.append((baseline, join, leave))
                print(
                    f"run {run + 1}: one member {baseline * 1000:.0f} ms, "
                    f"2 join {join * 1000:.0f} ms, 1 leaves {leave * 1000:.0f} ms",
                    flush=True,
                )
        finally:
            cluster.kill_all()
            zookeeper.stop()
    base, join, leave = (statistics.median(column) for column in zip(*results, strict=True))
    print(
        f"median of {args.runs}: one member {base * 1000:.0f} ms; 3 members after 2 join "
        f"{join * 1000:.0f} ms ({join / base:.2f}x); 2 members after 1 leaves {leave * 1000:.0f} ms "
        f"({leave / base:.2f}x)"
    )


if __name__ == "__main__":
    main()
