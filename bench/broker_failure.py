"""Broker failure at scale: 30k partitions, replication factor 3, 3 brokers, so the victim
leads 10k of them.

Each run starts from a fresh cluster (topics and states written straight into ZooKeeper),
kills -9 a broker that is not the controller, and times two things from its znode's
disappearance (as seen by an independent ZooKeeper client's watch):

- leaders moved: until every partition the victim led has a new leader in ZooKeeper and both
  surviving brokers have applied their LeaderAndIsr. The controller sends the elections'
  requests sorted by partition, LeaderAndIsr before UpdateMetadata on one ordered channel,
  and a broker applies each request whole; so once a survivor's Metadata shows a new leader
  for a small sentinel topic that sorts last, that broker has answered the LeaderAndIsr for
  every moved leader. Polling three partitions costs the brokers next to nothing.
- whole change: until the controller has finished the broker change, ISR shrinks of the
  victim's other 20k partitions included, and every request it sent has been answered.

It then checks in ZooKeeper that none of the victim's partitions still names it as leader.

In the same run, the baseline: the same ZooKeeper work by one bare client on scratch znodes.
The controller writes from its cached state (re-reading only on a version conflict), so that
work is 30k conditional sets (10k elections, 20k ISR shrinks) in fenced multi-ops of 500.

    .venv/bin/python -m bench.broker_failure [--partitions 30000] [--runs 3]
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import time

import orjson
import uvloop

from bench.failover import (
    BROKERS,
    PER_TOPIC,
    controller_idle,
    topic_names,
    wait_for,
)
from bench.scale import SENTINEL, fresh_clusters, parse_args
from node.clients.admin import KeelAdminClient
from node.cluster.local import LocalCluster
from node.zk.client import DELETED, ZooKeeperClient
from wire.errors import WireError


async def elections_done(port: int) -> float:
    async with KeelAdminClient(f"127.0.0.1:{port}", timeout=5) as admin:
        return (await admin.describe_controller()).metrics["LeaderElectionRateAndTimeMs.count"]


async def measure(
    connect: str, cluster: LocalCluster, partitions: int, timeout_s: float = 120.0
) -> tuple[float, float, int]:
    ports = {b.broker_id: b.port for b in cluster.all}
    # Every request answered, not only the queue empty: at 1M partitions the brokers are still
    # applying the first LeaderAndIsr long after the controller's last event.
    controller, _ = await wait_for(
        lambda: controller_idle(list(ports.values()), answered=True),
        timeout=max(300, timeout_s),
        interval=0.2,
    )
    victim = next(b for b in BROKERS if b != controller)
    before = await elections_done(ports[controller])
    watcher = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await watcher.start()
    gone: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def on_deleted(_: str) -> None:
        if not gone.done():
            gone.set_result(time.perf_counter())

    watcher.add_watch(DELETED, f"/brokers/ids/{victim}", on_deleted)
    assert await watcher.exists(f"/brokers/ids/{victim}", watch=True) is not None
    paths = [
        f"/brokers/topics/{t}/partitions/{p}/state" for t in topic_names(partitions) for p in range(PER_TOPIC)
    ]
    before_states = [
        orjson.loads(s[0] or b"{}") for s in await watcher.get_many(paths[:partitions]) if s is not None
    ]
    led = sum(1 for s in before_states if s["leader"] == victim)
    full = sum(1 for s in before_states if len(s["isr"]) == 3)
    if led < partitions // 3 * 0.99 or full != partitions:
        raise RuntimeError(f"not the starting state: the victim leads {led}, {full} ISRs are full")
    cluster.by_id(victim).signal(signal.SIGKILL)
    disappeared = await asyncio.wait_for(gone, 30)

    async def finished() -> bool:
        try:
            async with KeelAdminClient(f"127.0.0.1:{ports[controller]}", timeout=5) as admin:
                m = (await admin.describe_controller()).metrics
        except WireError:
            return False
        return (
            m["LeaderElectionRateAndTimeMs.count"] > before
            and m["EventQueueSize"] == 0
            and m["ControllerState"] == 0
            and m["TotalQueueSize"] == 0
        )

    moved_task = asyncio.create_task(leaders_moved_on_survivors(ports, controller, victim, timeout_s))
    await wait_for(finished, timeout=timeout_s, interval=0.01)
    elapsed = time.perf_counter() - disappeared
    moved = await moved_task - disappeared
    async with KeelAdminClient(f"127.0.0.1:{ports[controller]}", timeout=5) as admin:
        processing = (await admin.describe_controller()).metrics["LeaderElectionRateAndTimeMs.last"]
    print(f"  the controller spent {processing / 1000:.2f} s on the broker change itself")
    paths = [
        f"/brokers/topics/{t}/partitions/{p}/state" for t in topic_names(partitions) for p in range(PER_TOPIC)
    ]
    states = await watcher.get_many(paths[:partitions])
    still_led = sum(1 for s in states if s is not None and orjson.loads(s[0] or b"{}")["leader"] == victim)
    assert still_led == 0, f"{still_led} partitions still name the dead broker as leader"
    await watcher.close()
    return moved, elapsed, led


async def leaders_moved_on_survivors(
    ports: dict[int, int], controller: int, victim: int, timeout_s: float
) -> float:
    """When both survivors' Metadata show a leader other than the victim for every sentinel
    partition (see the module's docstring)."""
    survivors = [b for b in BROKERS if b != victim]

    async def moved(port: int) -> bool:
        try:
            async with KeelAdminClient(f"127.0.0.1:{port}", timeout=5) as admin:
                answer = await admin.metadata([SENTINEL])
        except WireError:
            return False  # a broker busy with the change answers late: ask again

        partitions = answer.topics[0].partitions if answer.topics else []
        return len(partitions) == len(BROKERS) and all(p.leader not in (victim, -1) for p in partitions)

    for broker in survivors:
        await wait_for(lambda b=broker: moved(ports[b]), timeout=timeout_s, interval=0.01)
    return time.perf_counter()


async def baseline(connect: str, partitions: int) -> float:
    """Bare-client ZooKeeper work of the same size, on scratch znodes."""
    client = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await client.start()
    await client.create_all_if_missing(["/baseline"])
    state = orjson.dumps(
        {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2, 3]}
    )
    paths = [f"/baseline/p{i}" for i in range(partitions)]
    existing = await client.get_many(paths[:1])
    if existing[0] is None:
        for i in range(0, partitions, 500):
            await client.multi([client.create_op(p, state) for p in paths[i : i + 500]])
    epoch = (await client.get("/controller_epoch"))[1].version
    started = time.perf_counter()
    chunks = [paths[i : i + 500] for i in range(0, partitions, 500)]
    await asyncio.gather(
        *(
            client.multi([client.check_op("/controller_epoch", epoch), *(client.set_op(p, state) for p in c)])
            for c in chunks
        )
    )
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    moved_runs, whole_runs, raw_moved, raw_whole = [], [], [], []
    for run, connect, cluster in fresh_clusters("broker-failure", args):
        moved, whole, led = uvloop.run(measure(connect, cluster, args.partitions))
        cluster.kill_all()  # the baseline runs on a quiet ZooKeeper
        # The elections alone are a third of the conditional sets; the whole change all.
        raw_moved.append(uvloop.run(baseline(connect, args.partitions // 3)))
        raw_whole.append(uvloop.run(baseline(connect, args.partitions)))
        moved_runs.append(moved)
        whole_runs.append(whole)
        print(
            f"run {run}: {led} leaders moved and acknowledged in {moved:.2f} s"
            f" (raw ZooKeeper work {raw_moved[-1]:.2f} s); whole change {whole:.2f} s"
            f" (raw {raw_whole[-1]:.2f} s)"
        )
    for label, keel, raw in (
        ("leaders moved", moved_runs, raw_moved),
        ("whole change", whole_runs, raw_whole),
    ):
        k, r = statistics.median(keel), statistics.median(raw)
        print(
            f"{label}, median of {args.runs}: {k:.2f} s (runs {', '.join(f'{x:.2f}' for x in keel)});"
            f" raw ZooKeeper work {r:.2f} s; ratio {k / r:.1f}x"
        )


if __name__ == "__main__":
    main()
