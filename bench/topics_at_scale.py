"""Topics at scale, created as an operator creates them in ZooKeeper mode: `--partitions` in
topics of 1,000 partitions, replication factor 3, written into ZooKeeper as Kafka's
AdminZkClient (and `kafka-topics --zookeeper`) writes them: `/config/topics/<t>`, then the
assignment at `/brokers/topics/<t>`. The controller creates every partition state, and tells
the brokers. 3 brokers with `zookeeper.session.timeout.ms=6000`, one embedded ZooKeeper; a
fresh ZooKeeper and cluster per run.

Each run times from the first write until every partition is led and every broker's
Metadata is complete (every topic with all its partitions, each with a live leader). Each
broker's Metadata is asked about its oldest topics not yet seen complete, two at a time (a
request for all 200k partitions would itself hold a broker's loop for a second or more); a
topic once complete is asked about again at the end, which must still find it so. The figure
thus includes up to one pause between these requests (0.2 s). Alongside, every broker's
/metrics is scraped every 15 s, as a Prometheus would, for the most its event loop was held
(`keel_eventloop_lag_max_seconds`, a maximum over the last minute).

Reported per run: the settle time; ZooKeeper sessions that expired ("session ... expired" in
each broker's server.log) and the controller epoch before and after; partitions the
controller could not initialise ("cannot initialise" in controller.log, per partition); each broker's
largest loop lag and peak resident memory; the machine's load average, and the largest lag of
an idle process's event loop over the same time (what the machine itself imposes on any loop:
the brokers wait for the processor as long as it is busy elsewhere).

With `--operations`, each settled run goes on with a controlled shutdown, a killed broker and
a controller failover, each timed until the cluster has settled again, with every broker's
loop lag and longest garbage collection (`operate`).

    .venv/bin/python -m bench.topics_at_scale [--partitions 200000] [--runs 3] [--operations] [--keep-logs]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvloop

from actors.base.ports import ReplicaAssignment, TopicAssignment
from bench.election import cpu_model
from bench.failover import BROKERS, PER_TOPIC, topic_names
from node.broker.gc_tuning import tune_gc
from node.broker.logs import CONTROLLER_LOG, SERVER_LOG
from node.clients.admin import KeelAdminClient
from node.cluster.local import ROOT, BrokerProcess, LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from node.metrics.loop_lag import GC_PAUSE_MAX, LAG_MAX
from node.zk import data, paths
from node.zk.client import ZooKeeperClient
from wire.errors import ErrorCode

SESSION_TIMEOUT_MS = 6000
# Topics written at once: as many `kafka-topics --create` run side by side.
WRITE_WINDOW = 20
# Topics asked about per Metadata request: 2,000 partitions, about ten milliseconds of a broker;
# the pause after an answer that showed no progress, and how many such answers in a row send
# the topics asked about to the back of the list.
PROBE_TOPICS = 2
PROBE_PAUSE_S = 0.2
STUCK_PROBES = 25
SCRAPE_INTERVAL_S = 15.0

_EXPIRED = re.compile(r"ZooKeeper session 0x[0-9a-f]+ expired")
# "cannot initialise t-0: ..." per partition, or "cannot initialise 12 partition(s) yet; ...".
_CANNOT_INITIALISE = re.compile(r"cannot initialise (?:(\d+) partition\(s\)|\S+)")
_LAG = re.compile(rf"^{LAG_MAX} (\S+)$", re.MULTILINE)
_GC_PAUSE = re.compile(rf"^{GC_PAUSE_MAX} (\S+)$", re.MULTILINE)


@dataclasses.dataclass
class RunResult:
    settle_s: float | None
    missing: dict[int, int]
    expiries: dict[int, int]
    epochs: tuple[int, int]
    cannot_initialise: int
    lag_s: dict[int, float]
    peak_rss_mib: dict[int, float]
    # The longest garbage collection of each broker (node/broker/gc_tuning.py).
    gc_s: dict[int, float] = dataclasses.field(default_factory=dict)
    # The machine's 1-minute load average as the topics were written and once settled: the
    # brokers share its cores with whatever else runs.
    load: tuple[float, float] = (0.0, 0.0)
    # The most an idle process's event loop was late over the run: what the machine itself
    # (other work, the brokers' and ZooKeeper's own demand) imposes on every loop.
    idle_lag_s: float | None = None
    operations: list[OperationResult] = dataclasses.field(default_factory=list)


def assignment(topic: str, count: int) -> TopicAssignment:
    """Kafka's round-robin placement over the 3 brokers: leaders spread evenly."""
    return TopicAssignment(
        topic,
        {p: ReplicaAssignment(tuple(BROKERS[(p + k) % 3] for k in range(3))) for p in range(count)},
    )


async def write_topics(zk: ZooKeeperClient, topics: dict[str, int]) -> None:
    """AdminZkClient.createTopicWithAssignment: the config znode, then the assignment."""

    async def one(topic: str, count: int) -> None:
        await zk.create(paths.topic_config(topic), data.encode_topic_config({}))
        await zk.create(paths.topic(topic), data.encode_topic(assignment(topic, count)))

    items = list(topics.items())
    for i in range(0, len(items), WRITE_WINDOW):
        await asyncio.gather(*(one(t, c) for t, c in items[i : i + WRITE_WINDOW]))


def _complete(answer_topic, expected: int, live: frozenset[int] | None = None) -> bool:  # type: ignore[no-untyped-def]
    """Every partition of the topic listed, each with a leader (one of `live` if given)."""
    return (
        answer_topic.error_code == ErrorCode.NONE
        and len(answer_topic.partitions) == expected
        and all(
            p.error_code == ErrorCode.NONE and p.leader >= 0 and (live is None or p.leader in live)
            for p in answer_topic.partitions
        )
    )


async def confirm(
    port: int, topics: dict[str, int], deadline: float, live: frozenset[int] | None = None
) -> tuple[float | None, set[str]]:
    """Ask one broker about its oldest topics not yet seen complete, a few at a time, until
    none is left: (when the last was seen complete, or None at the deadline; those left).
    Topics complete about in the order they were written, so each is asked about once or
    twice; one that stays incomplete goes to the back after a while, not to hide the rest."""
    pending = list(topics)
    idle = 0
    async with KeelAdminClient(f"127.0.0.1:{port}", timeout=60) as admin:
        while pending:
            if time.monotonic() > deadline:
                return None, set(pending)
            asked = pending[:PROBE_TOPICS]
            try:
                answer = await admin.metadata(asked)
            except Exception:  # a broker busy past the timeout, or between connections
                await asyncio.sleep(PROBE_PAUSE_S)
                continue
            done = {t.name for t in answer.topics if _complete(t, topics[t.name], live)}
            pending = [t for t in pending if t not in done]
            if done:
                idle = 0
                continue
            idle += 1
            if idle % STUCK_PROBES == 0:
                pending = pending[len(asked) :] + asked
            await asyncio.sleep(PROBE_PAUSE_S)
    return time.monotonic(), set()


async def still_complete(port: int, topics: dict[str, int]) -> set[str]:
    """The topics one broker's Metadata no longer shows complete (asked a few at a time)."""
    names = list(topics)
    lost: set[str] = set()
    async with KeelAdminClient(f"127.0.0.1:{port}", timeout=60) as admin:
        for i in range(0, len(names), PROBE_TOPICS):
            answer = await admin.metadata(names[i : i + PROBE_TOPICS])
            lost |= {t.name for t in answer.topics if not _complete(t, topics[t.name])}
    return lost


async def scrape_lag(session: aiohttp.ClientSession, broker: BrokerProcess) -> tuple[float, float] | None:
    """(loop lag, longest garbage collection), each a maximum over the last minute."""
    assert broker.metrics_url is not None
    try:
        async with session.get(broker.metrics_url, timeout=aiohttp.ClientTimeout(total=30)) as response:
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    lag, pause = _LAG.search(text), _GC_PAUSE.search(text)
    if lag is None:
        return None
    return float(lag.group(1)), float(pause.group(1)) if pause else 0.0


async def follow_lag(
    brokers: list[BrokerProcess],
    worst: dict[int, float],
    stop: asyncio.Event,
    interval_s: float = SCRAPE_INTERVAL_S,
    worst_gc: dict[int, float] | None = None,
) -> None:
    """Scrape every broker every `interval_s` (and once more when stopped), keeping the
    largest lag each reported (a broker down at the time is skipped)."""
    async with aiohttp.ClientSession() as session:
        while True:
            values = await asyncio.gather(*(scrape_lag(session, b) for b in brokers))
            for broker, value in zip(brokers, values, strict=True):
                if value is not None:
                    worst[broker.broker_id] = max(worst.get(broker.broker_id, 0.0), value[0])
                    if worst_gc is not None:
                        worst_gc[broker.broker_id] = max(worst_gc.get(broker.broker_id, 0.0), value[1])
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


async def controller_epoch(cluster: LocalCluster) -> int:
    views = await cluster.views()
    return max((v.controller_epoch for v in views.values() if v is not None), default=-1)


async def settle(cluster: LocalCluster, connect: str, partitions: int, timeout_s: float) -> RunResult:
    brokers = list(cluster.all)
    names = topic_names(partitions)
    topics = {t: min(PER_TOPIC, partitions - i * PER_TOPIC) for i, t in enumerate(names)}
    await cluster.wait_for_full_metadata(60)
    epoch_before = await controller_epoch(cluster)
    worst: dict[int, float] = {}
    worst_gc: dict[int, float] = {}
    stop = asyncio.Event()
    scraper = asyncio.create_task(follow_lag(brokers, worst, stop, worst_gc=worst_gc))
    zk = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await zk.start()
    idle = IdleLoop()
    try:
        load_before = load_average()
        started = time.monotonic()
        await write_topics(zk, topics)
        written_s = time.monotonic() - started
        deadline = started + timeout_s
        confirmed = await asyncio.gather(*(confirm(b.port, topics, deadline) for b in brokers))
        times = [t for t, _ in confirmed]
        settle_s = None if any(t is None for t in times) else max(t for t in times if t) - started
        missing = {b.broker_id: len(left) for b, (_, left) in zip(brokers, confirmed, strict=True)}
        print(f"  topics written in {written_s:.1f} s")
        if settle_s is not None:
            lost = await asyncio.gather(*(still_complete(b.port, topics) for b in brokers))
            if any(lost):
                print(f"  after settling, topics no longer complete: {[len(x) for x in lost]}")
                settle_s = None
                missing = {b.broker_id: len(x) for b, x in zip(brokers, lost, strict=True)}
    finally:
        await zk.close()
        stop.set()
        await scraper
    load_after = load_average()
    idle_lag_s = idle.stop()
    epoch_after = await controller_epoch(cluster)
    return RunResult(
        settle_s=settle_s,
        missing=missing,
        expiries={b.broker_id: len(_EXPIRED.findall(b.broker_log(SERVER_LOG))) for b in brokers},
        epochs=(epoch_before, epoch_after),
        cannot_initialise=sum(cannot_initialise(b.broker_log(CONTROLLER_LOG)) for b in brokers),
        lag_s=worst,
        gc_s=worst_gc,
        peak_rss_mib={b.broker_id: peak_rss_kib(b) / 1024 for b in brokers},
        load=(load_before, load_after),
        idle_lag_s=idle_lag_s,
    )


@dataclasses.dataclass
class OperationResult:
    name: str
    # From the operation until every running broker's Metadata again showed every partition
    # led by a running broker (None: not within the timeout).
    settle_s: float | None
    lag_s: dict[int, float]
    # For a controlled shutdown, how long the broker took to exit once asked.
    exit_s: float | None = None
    # The longest garbage collection of each broker (node/broker/gc_tuning.py).
    gc_s: dict[int, float] = dataclasses.field(default_factory=dict)


async def operate(
    cluster: LocalCluster, connect: str, partitions: int, timeout_s: float
) -> list[OperationResult]:
    """After settling: what an operator does to a cluster of that size, each timed until the
    cluster has settled again, with every broker's loop lag scraped throughout (every 5 s; the
    metric is a maximum over the last minute, so a figure may carry the previous step's).
    A controlled shutdown of a broker that is not the controller, and its restart; the other
    broker that is not the controller killed (it leads a share of the partitions, and more
    since the first one's moved to it; its session expires and the controller moves its
    leaders), and its restart; a controller failover (`/controller` deleted)."""
    names = topic_names(partitions)
    topics = {t: min(PER_TOPIC, partitions - i * PER_TOPIC) for i, t in enumerate(names)}
    results: list[OperationResult] = []

    async def step(name: str, action: Callable[[], Awaitable[float | None]]) -> None:
        worst: dict[int, float] = {}
        worst_gc: dict[int, float] = {}
        stop = asyncio.Event()
        scraper = asyncio.create_task(follow_lag(list(cluster.all), worst, stop, 5.0, worst_gc))
        try:
            started = time.monotonic()
            exit_s = await action()
            running = cluster.running()
            live = frozenset(b.broker_id for b in running)
            deadline = started + timeout_s
            confirmed = await asyncio.gather(*(confirm(b.port, topics, deadline, live) for b in running))
            times = [t for t, _ in confirmed]
            settle_s = None if any(t is None for t in times) else max(t for t in times if t) - started
        finally:
            stop.set()
            await scraper
        results.append(OperationResult(name, settle_s, worst, exit_s, worst_gc))
        print(f"  {describe_operation(results[-1])}", flush=True)

    controller_id, _ = await cluster.wait_for_controller(60)
    stopped, killed = (cluster.by_id(b) for b in BROKERS if b != controller_id)

    async def controlled_shutdown() -> float:
        started = time.monotonic()
        await asyncio.to_thread(stopped.stop, 120.0)
        return time.monotonic() - started

    def restart(broker: BrokerProcess) -> Callable[[], Awaitable[None]]:
        async def action() -> None:
            broker.start()
            await cluster.wait_for_full_metadata(120)

        return action

    async def kill() -> None:
        killed.kill()

    async def failover() -> None:
        zk = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
        await zk.start()
        try:
            await zk.delete(paths.CONTROLLER)
        finally:
            await zk.close()

    await step(f"controlled shutdown of broker {stopped.broker_id}", controlled_shutdown)
    await step(f"broker {stopped.broker_id} restarted", restart(stopped))
    await step(f"broker {killed.broker_id} killed", kill)
    await step(f"broker {killed.broker_id} restarted", restart(killed))
    await step("controller failover", failover)
    return results


def describe_operation(result: OperationResult) -> str:
    settled = f"{result.settle_s:.1f} s" if result.settle_s is not None else "NOT settled"
    lags = ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in sorted(result.lag_s.items()))
    exited = f" (exited in {result.exit_s:.1f} s)" if result.exit_s is not None else ""
    pauses = ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in sorted(result.gc_s.items()))
    return f"{result.name}: settled {settled}{exited}; max loop lag {lags}; longest collection {pauses}"


_IDLE_LOOP = """
import asyncio, sys
from node.metrics.loop_lag import LoopLagMonitor
async def main():
    monitor = LoopLagMonitor(window_s=3600)
    monitor.start()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(monitor.max_lag_s())
asyncio.run(main())
"""


class IdleLoop:
    """A process that does nothing but measure its own event loop's lag, for the run."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _IDLE_LOOP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
        )

    def stop(self) -> float | None:
        try:
            out, _ = self._process.communicate(b"", timeout=30)
            return float(out.decode().strip())
        except (subprocess.TimeoutExpired, ValueError):
            self._process.kill()
            return None


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def cannot_initialise(log: str) -> int:
    """Partitions the controller said it could not initialise."""
    return sum(int(count) if count else 1 for count in _CANNOT_INITIALISE.findall(log))


def peak_rss_kib(broker: BrokerProcess) -> int:
    for line in Path(f"/proc/{broker.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def one_run(home: Path, partitions: int, timeout_s: float, operations: bool) -> RunResult:
    zookeeper = EmbeddedZooKeeper(home / "zk", heap_mb=2048)
    zookeeper.start()
    connect = f"{zookeeper.connect_string}/topics"
    cluster = LocalCluster(home, connect, session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        for broker_id in BROKERS:
            listener = f"127.0.0.1:{free_ports(1)[0]}"
            cluster.new(
                broker_id, {"metrics.http.listener": listener}, home=home / f"broker-{broker_id}"
            ).start()

        async def run() -> RunResult:
            result = await settle(cluster, connect, partitions, timeout_s)
            if operations and result.settle_s is not None:
                result.operations = await operate(cluster, connect, partitions, timeout_s)
            return result

        return uvloop.run(run())
    finally:
        cluster.kill_all()
        zookeeper.stop()


def describe(run: int, result: RunResult) -> str:
    settled = (
        f"{result.settle_s:.1f} s"
        if result.settle_s is not None
        else (f"NOT settled (topics incomplete per broker: {result.missing})")
    )
    lags = ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in sorted(result.lag_s.items()))
    rss = ", ".join(f"broker {b} {m:.0f} MiB" for b, m in sorted(result.peak_rss_mib.items()))
    pauses = ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in sorted(result.gc_s.items()))
    return (
        f"run {run}: settled {settled}; session expiries {sum(result.expiries.values())} "
        f"{result.expiries}; controller epoch {result.epochs[0]} -> {result.epochs[1]}; "
        f"cannot initialise {result.cannot_initialise}; max loop lag {lags}; longest collection "
        f"{pauses}; peak RSS {rss}; "
        f"load average {result.load[0]:.1f} -> {result.load[1]:.1f}; an idle process's loop lag "
        + ("?" if result.idle_lag_s is None else f"{result.idle_lag_s * 1000:.0f} ms")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take to settle")
    parser.add_argument(
        "--operations",
        action="store_true",
        help="once settled, also time a controlled shutdown, a killed broker and a controller failover",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep broker logs in a directory it prints")
    args = parser.parse_args()
    tune_gc()
    print(
        f"machine: {cpu_model()}, python {sys.version.split()[0]}; {args.partitions} partitions in "
        f"topics of {PER_TOPIC}, RF 3, 3 brokers, zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"
    )
    results = []
    with contextlib.ExitStack() as stack:
        if args.keep_logs:
            tmp = tempfile.mkdtemp(prefix="keel-topics-")
            print(f"logs kept in {tmp}")
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="keel-topics-"))
        for run in range(1, args.runs + 1):
            home = Path(tmp) / f"run{run}"
            home.mkdir()
            result = one_run(home, args.partitions, args.timeout, args.operations)
            results.append(result)
            print(describe(run, result), flush=True)
    settled = [r.settle_s for r in results if r.settle_s is not None]
    worst_lag = max(
        (
            s
            for r in results
            for s in [*r.lag_s.values(), *(x for o in r.operations for x in o.lag_s.values())]
        ),
        default=0.0,
    )
    print(
        f"settled in {len(settled)} of {len(results)} runs"
        + (f", median {statistics.median(settled):.1f} s" if settled else "")
        + f"; session expiries {sum(sum(r.expiries.values()) for r in results)}; cannot initialise "
        f"{sum(r.cannot_initialise for r in results)}; largest loop lag {worst_lag * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
