"""A soak at scale: `--partitions` (1M) on 3 brokers at replication factor 3, a light produce
load, and a broker restarted every `--restart-every` minutes in turn, for `--minutes`.

Setup as bench/scaling.py: the topics of 1,000 partitions and their states written straight
into ZooKeeper, the brokers started together, the first settle awaited. Then, for the soak's
length:
  - a producer sends `--rate` records a second (acks=all, one at a time) to a topic of 3
    partitions, each record's value its number; every acknowledged record is kept with where
    it landed;
  - every `--restart-every` minutes, the next broker in turn (`--order`, 1, 2, 3, 1, ...: the
    controller's broker among them; with `--spare-controller` the controller's broker is
    passed over, so that one controller handles every restart) gets SIGTERM (a controlled
    shutdown), and is started again once it has exited;
  - after each restart, the cluster must settle again within `--settle-timeout`: the
    controller idle with every request answered, no partition offline, and no broker
    reporting an under-replicated partition (`UnderReplicatedPartitions`, scraped from each
    broker's /metrics);
  - each broker's resident memory is read at every settle.
At the end every acknowledged record is read back from the start of its partition, at its
offset with its value (the chaos checker's first invariant).

The verdict: passed when every restart settled in time, no acknowledged record is missing, and
the memory is flat: no broker process grew by more than 10 % between two settles under the
load in which it kept its role (the controller's broker holds the controller's context too, so
a broker that becomes or stops being the controller is compared only within each role).

    .venv/bin/python -m bench.soak [--partitions 1000000] [--minutes 60] [--restart-every 10]
                                   [--order 1,2,3] [--spare-controller]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import uvloop

from bench.election import cpu_model
from bench.failover import BROKERS, ControllerHold, controller_idle, populate, wait_for
from node.broker.gc_tuning import tune_gc
from node.clients.admin import KeelAdminClient
from node.clients.consumer import KeelConsumer
from node.clients.producer import KeelProducer
from node.cluster.local import BrokerProcess, LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports

TOPIC = "soak"
PRODUCED_PARTITIONS = 3
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
GROWTH_ALLOWED = 1.10


@dataclasses.dataclass
class Settle:
    """The cluster once settled: when, who was controller, and each broker's memory."""

    at_s: float
    controller: int
    rss_kib: dict[int, int]
    starts: dict[int, int]  # each broker's process incarnation (how often it was started)


@dataclasses.dataclass
class Restart:
    broker: int
    exit_s: float
    settle_s: float | None  # None: not settled within the timeout


@dataclasses.dataclass
class Load:
    acknowledged: dict[tuple[int, int], bytes] = dataclasses.field(default_factory=dict)
    failed: int = 0
    sent: int = 0


async def produce(bootstrap: str, rate: float, load: Load, stop: asyncio.Event) -> None:
    async with KeelProducer(bootstrap, acks=-1, delivery_timeout=60.0) as producer:
        started, n = time.monotonic(), 0
        while not stop.is_set():
            value = f"{n}".encode()
            load.sent += 1
            try:
                (delivered,) = await producer.send_many(
                    TOPIC, [(None, value)], partition=n % PRODUCED_PARTITIONS
                )
                load.acknowledged[(delivered.partition, delivered.base_offset)] = value
            except Exception:  # not acknowledged: nothing is owed
                load.failed += 1
            n += 1
            ahead = started + n / rate - time.monotonic()
            if ahead > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), ahead)


async def missing_records(bootstrap: str, load: Load, timeout_s: float) -> list[tuple[int, int]]:
    """The acknowledged records not found at their offset with their value."""
    wanted = dict(load.acknowledged)
    ends = {p: max((o for q, o in wanted if q == p), default=-1) for p in range(PRODUCED_PARTITIONS)}
    found: dict[tuple[int, int], bytes | None] = {}
    deadline = time.monotonic() + timeout_s
    async with KeelConsumer(bootstrap, TOPIC, from_beginning=True) as consumer:
        while time.monotonic() < deadline:
            for record in await consumer.poll():
                found[(record.partition, record.offset)] = record.value
            positions = consumer.positions
            if all((positions.get(p) or 0) > end for p, end in ends.items()):
                break
    return sorted(k for k, v in wanted.items() if found.get(k) != v)


async def under_replicated(session: aiohttp.ClientSession, broker: BrokerProcess) -> int | None:
    url = broker.metrics_url
    if url is None:
        return None
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    for line in text.splitlines():
        if line.startswith(UNDER_REPLICATED):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


async def settled(cluster: LocalCluster) -> int | None:
    """The controller's id once the cluster has settled (see the module's docstring)."""
    ports = [b.port for b in cluster.running()]
    idle = await controller_idle(ports, answered=True)
    if idle is None or len(ports) != len(BROKERS):
        return None
    controller = idle[0]
    async with KeelAdminClient(f"127.0.0.1:{cluster.by_id(controller).port}", timeout=30) as admin:
        metrics = (await admin.describe_controller()).metrics
    if metrics.get("OfflinePartitionsCount") != 0:
        return None
    async with aiohttp.ClientSession() as session:
        counts = await asyncio.gather(*(under_replicated(session, b) for b in cluster.running()))
    return controller if all(c == 0 for c in counts) else None


async def wait_settled(cluster: LocalCluster, timeout_s: float) -> int | None:
    with contextlib.suppress(RuntimeError):  # wait_for's timeout
        return int(await wait_for(lambda: settled(cluster), timeout=timeout_s, interval=1.0))
    return None


def grown(settles: list[Settle]) -> list[str]:
    """Broker processes that grew more than allowed between two settles in one role, under
    the load (the first settle comes before it: the first records, fetch sessions and
    segments are the load's own, not growth)."""
    found = []
    for broker in BROKERS:
        by_life: dict[tuple[int, bool], list[int]] = {}
        for s in settles[1:]:
            by_life.setdefault((s.starts[broker], s.controller == broker), []).append(s.rss_kib[broker])
        for (start, controller), series in by_life.items():
            if len(series) > 1 and series[-1] > series[0] * GROWTH_ALLOWED:
                role = "controller's broker" if controller else "broker"
                found.append(
                    f"broker {broker} (start {start}, as the {role}): {series[0]:,} -> {series[-1]:,} KiB"
                )
    return found


async def soak(
    cluster: LocalCluster, args: argparse.Namespace, started: float
) -> tuple[list[Settle], list[Restart], Load, list[tuple[int, int]]]:
    starts = dict.fromkeys(BROKERS, 1)

    def snapshot(controller: int) -> Settle:
        rss = {b.broker_id: b.rss_kib() for b in cluster.running()}
        return Settle(time.perf_counter() - started, controller, rss, dict(starts))

    controller = await wait_settled(cluster, args.settle_timeout)
    if controller is None:
        raise RuntimeError(f"not settled within {args.settle_timeout:.0f} s of the start")
    settles = [snapshot(controller)]
    print(
        f"settled in {settles[0].at_s:.1f} s; controller {controller}; RSS KiB {settles[0].rss_kib}",
        flush=True,
    )
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in cluster.all)
    load, stop = Load(), asyncio.Event()
    producing = asyncio.create_task(produce(bootstrap, args.rate, load, stop))
    restarts: list[Restart] = []
    soak_started = time.monotonic()
    turn = 0
    try:
        while True:
            next_restart = soak_started + (len(restarts) + 1) * args.restart_every * 60
            if next_restart > soak_started + args.minutes * 60:
                break
            await asyncio.sleep(max(0.0, next_restart - time.monotonic()))
            order = [b for b in args.order if not (args.spare_controller and b == controller)]
            if not order:
                raise RuntimeError(f"--order {args.order} leaves no broker but the controller to restart")
            broker = cluster.by_id(order[turn % len(order)])
            turn += 1
            stop_started = time.monotonic()
            await asyncio.to_thread(broker.stop, 300.0)
            exit_s = time.monotonic() - stop_started
            broker.start()
            starts[broker.broker_id] += 1
            controller = await wait_settled(cluster, args.settle_timeout)
            settle_s = None if controller is None else time.monotonic() - stop_started
            restarts.append(Restart(broker.broker_id, exit_s, settle_s))
            if controller is None:
                print(
                    f"broker {broker.broker_id} restarted: NOT settled within {args.settle_timeout:.0f} s",
                    flush=True,
                )
                break
            settles.append(snapshot(controller))
            print(
                f"{(time.monotonic() - soak_started) / 60:.1f} min: broker {broker.broker_id} restarted "
                f"(exit {exit_s:.1f} s), settled {settle_s:.1f} s after the SIGTERM; "
                f"controller {controller}; RSS KiB {settles[-1].rss_kib}; "
                f"records acknowledged {len(load.acknowledged)}, failed {load.failed}",
                flush=True,
            )
        await asyncio.sleep(max(0.0, soak_started + args.minutes * 60 - time.monotonic()))
    finally:
        stop.set()
        await producing
    missing = await missing_records(bootstrap, load, timeout_s=120)
    return settles, restarts, load, missing


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--restart-every", type=float, default=10.0, help="minutes")
    parser.add_argument("--rate", type=float, default=20.0, help="records a second")
    parser.add_argument("--settle-timeout", type=float, default=600.0, help="seconds, after each restart")
    parser.add_argument("--standby", action="store_true", help="the brokers run the warm standby")
    parser.add_argument("--zk-heap-mb", type=int, default=4096)
    parser.add_argument(
        "--order",
        type=lambda text: [int(b) for b in text.split(",")],
        default=list(BROKERS),
        help="the brokers restarted in turn (1,2,3)",
    )
    parser.add_argument(
        "--spare-controller",
        action="store_true",
        help="restart only brokers that are not the controller, so that one controller sees every restart",
    )
    args = parser.parse_args()
    if args.partitions < 1 or args.minutes <= 0 or args.restart_every <= 0 or args.rate <= 0:
        parser.error("--partitions, --minutes, --restart-every and --rate must be positive")
    if not set(args.order) <= set(BROKERS):
        parser.error(f"--order names brokers among {','.join(map(str, BROKERS))}")
    tune_gc()
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}; {args.partitions:,} partitions, RF 3, "
        f"3 brokers{', warm standby' if args.standby else ''}; {args.minutes:g} min, a restart every "
        f"{args.restart_every:g} min, {args.rate:g} records/s",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="keel-soak-") as tmp:
        home = Path(tmp)
        zookeeper = EmbeddedZooKeeper(home / "zk", heap_mb=args.zk_heap_mb)
        zookeeper.start()
        connect = zookeeper.connect_string + "/soak"
        settings = {"controller.standby.enable": "true"} if args.standby else {}
        cluster = LocalCluster(home, connect, session_timeout_ms=30_000, settings=settings)
        try:
            uvloop.run(populate(connect, args.partitions, {TOPIC: PRODUCED_PARTITIONS}))
            metrics_ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))

            def launch() -> None:
                for b in BROKERS:
                    listener = {"metrics.http.listener": f"127.0.0.1:{metrics_ports[b]}"}
                    cluster.new(b, home=home / f"broker-{b}", settings=listener).start()

            started = time.perf_counter()
            uvloop.run(ControllerHold.start_together(connect, launch))
            settles, restarts, load, missing = uvloop.run(soak(cluster, args, started))
        finally:
            cluster.kill_all()
            zookeeper.stop()
    report(settles, restarts, load, missing, args)


def report(
    settles: list[Settle],
    restarts: list[Restart],
    load: Load,
    missing: list[tuple[int, int]],
    args: argparse.Namespace,
) -> None:
    print("\n| after | controller | " + " | ".join(f"broker {b} RSS (start)" for b in BROKERS) + " |")
    print("|---|---|" + "---|" * len(BROKERS))
    for i, s in enumerate(settles):
        label = "the first settle" if i == 0 else f"restart {i} (broker {restarts[i - 1].broker})"
        cells = " | ".join(f"{s.rss_kib[b] / 1024:,.0f} MiB ({s.starts[b]})" for b in BROKERS)
        print(f"| {label} | {s.controller} | {cells} |")
    unsettled = [r for r in restarts if r.settle_s is None]
    growth = grown(settles)
    print(
        f"\nrestarts: {len(restarts)}; exits "
        + ", ".join(f"{r.exit_s:.1f}" for r in restarts)
        + " s; settled after "
        + ", ".join("NOT" if r.settle_s is None else f"{r.settle_s:.1f}" for r in restarts)
        + " s"
    )
    print(
        f"records: {load.sent} sent, {len(load.acknowledged)} acknowledged, {load.failed} not; "
        f"{len(missing)} acknowledged missing{': e.g. ' + str(missing[:5]) if missing else ''}"
    )
    print("memory: " + ("flat" if not growth else "GREW: " + "; ".join(growth)))
    expected = int(args.minutes // args.restart_every)
    failures = []
    if len(restarts) < expected or unsettled:
        failures.append(f"{len(restarts) - len(unsettled)} of {expected} restarts settled")
    if missing:
        failures.append(f"{len(missing)} acknowledged records missing")
    if growth:
        failures.append("memory grew")
    print("verdict: " + ("passed" if not failures else "FAILED (" + "; ".join(failures) + ")"))


if __name__ == "__main__":
    main()
