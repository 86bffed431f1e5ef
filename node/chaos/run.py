"""One chaos run: start the cluster, run the workload and the nemesis's plan for the
duration, heal everything, wait for the cluster to settle, read everything back, check."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from node.chaos import checker, logs, schedule
from node.chaos.cluster import ChaosCluster
from node.chaos.faults import Nemesis, planner_status
from node.chaos.history import FinalState, History, Read
from node.chaos.observer import Observer
from node.chaos.report import Report
from node.chaos.workload import Workload
from node.zk import data, paths

STATUS_EVERY_S = 5.0
# After the heal: how long to wait for a healthy cluster before giving up (the check itself
# asks for checker.HEALTHY_WITHIN_S; waiting longer tells by how much it was missed).
SETTLE_LIMIT_S = checker.HEALTHY_WITHIN_S + 30.0

BROKER_SETTINGS = {
    # A follower cut off leaves the ISR within seconds, so runs show shrinking and expanding.
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
}


@dataclasses.dataclass(frozen=True)
class ChaosOptions:
    seed: int
    duration_s: float = 60.0
    brokers: int = 5
    zookeeper_servers: int = 3
    faults: tuple[str, ...] = schedule.DEFAULT_FAULTS
    session_timeout_ms: int = 4000
    admin: bool = True

    def replay(self) -> str:
        return (
            f"bin/keel-cluster chaos --seed {self.seed} --duration {self.duration_s:g} "
            f"--brokers {self.brokers} --zookeeper-servers {self.zookeeper_servers} "
            f"--faults {','.join(self.faults)} --session-timeout-ms {self.session_timeout_ms}"
        )

    def plan(self) -> list[schedule.Fault]:
        return schedule.plan(
            self.seed, self.duration_s, self.faults, session_timeout_s=self.session_timeout_ms / 1000
        )


async def run_chaos(options: ChaosOptions, directory: Path, say: Callable[[str], None]) -> Report:
    return await ChaosRun(options, directory, say).run()


class ChaosRun:
    def __init__(self, options: ChaosOptions, directory: Path, say: Callable[[str], None]) -> None:
        self.options = options
        self.directory = directory
        self.say = say
        self.plan = options.plan()
        self.history = History(
            session_timeout_s=options.session_timeout_ms / 1000, zookeeper_servers=options.zookeeper_servers
        )
        # The run's clock starts again once the cluster serves: the plan's times count from there.
        self._started = time.monotonic()
        self._wall_started = time.time()
        self.cluster = ChaosCluster(
            directory,
            brokers=options.brokers,
            zookeeper_servers=options.zookeeper_servers,
            session_timeout_ms=options.session_timeout_ms,
            settings=BROKER_SETTINGS,
        )
        self.workload = Workload(self.cluster, self.history, self.clock, options.seed)
        self.observer = Observer(self.cluster, self.history, self.clock)
        self.nemesis = Nemesis(self.cluster, self.history, self.clock, say)

    def clock(self) -> float:
        return time.monotonic() - self._started

    async def run(self) -> Report:
        self.say(
            f"seed {self.options.seed}: {len(self.plan)} faults planned over {self.options.duration_s:g} s"
        )
        for fault in self.plan:
            self.say(f"  {fault.describe()}")
        try:
            await self._start()
            await self._faults()
            await self._heal()
            final = await self._collect()
            return self._report(final)
        finally:
            await self.nemesis.stop_supervising()
            await self.observer.stop()
            await self.cluster.close()

    async def _start(self) -> None:
        self.say("starting ZooKeeper and the brokers")
        await self.cluster.start()
        if "planner" in self.options.faults:
            self.say("starting an active and a standby planner (Spark)")
            await self.cluster.start_planners()
        await self.workload.create_topics()
        self._started = time.monotonic()
        self._wall_started = time.time()
        self.observer.start()
        self.nemesis.supervise()
        self.workload.start(admin=self.options.admin)

    async def _faults(self) -> None:
        """The plan's faults over the duration, with a status line every STATUS_EVERY_S."""
        over = asyncio.Event()
        status = asyncio.create_task(self._status(over))
        try:
            await self.nemesis.run(self.plan)
            await asyncio.sleep(max(0.0, self.options.duration_s - self.clock()))
        finally:
            # A flag, not a cancellation (see Observer.stop).
            over.set()
            await asyncio.wait([status], timeout=5.0)
        self.say(
            f"t={self.clock():.1f}s: the duration is over; waiting for the faults under way, then healing"
        )

    async def _status(self, over: asyncio.Event) -> None:
        history = self.history
        while not over.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(over.wait(), STATUS_EVERY_S)
                return
            controller = await self.cluster.controller()
            self.say(
                f"t={self.clock():5.1f}s/{self.options.duration_s:g}s  sent {history.sent}  "
                f"acked {len(history.acks)}  read {len(history.reads)}  commits {len(history.commits)}  "
                f"faults {sum(self.nemesis.injected.values())}  "
                f"under fault: {sorted(self.nemesis.busy) or '-'}  controller {controller}"
            )

    async def _heal(self) -> None:
        # The admin work ends while the faults under way do; the clock of the healing starts
        # once both are over.
        await asyncio.gather(self.workload.stop_admin(), self.nemesis.finish())
        self.history.healed_s = self.clock()
        self.history.event(self.history.healed_s, "heal", "every fault healed")
        await self.workload.stop()

    async def _collect(self) -> FinalState:
        """Once healthy: the drain, the replicas' files, the brokers' and planners' logs."""
        final = await _settle(self.cluster, self.history, self.clock, self.say)
        final.high_watermarks = await self.workload.drain(timeout=60.0)
        _read_replicas(self.cluster, self.history, final, self.clock)
        await self.observer.stop()
        _read_controller_logs(self.cluster, self.history, self._wall_started)
        _read_planner_logs(self.cluster, self.history, self._wall_started)
        # The logs' events came in last: the file is in time order.
        events = sorted(self.history.events, key=lambda e: e.t)
        (self.directory / "events.log").write_text("".join(e.line() + "\n" for e in events))
        return final

    def _report(self, final: FinalState) -> Report:
        return Report(
            seed=self.options.seed,
            duration_s=self.options.duration_s,
            brokers=self.options.brokers,
            zookeeper_servers=self.options.zookeeper_servers,
            plan=self.plan,
            injected=self.nemesis.injected,
            skipped=self.nemesis.skipped,
            history=self.history,
            final=final,
            controller_changes=self.observer.controller_changes,
            violations=checker.check(self.history, final),
            replay=self.options.replay(),
        )


async def _settle(
    cluster: ChaosCluster, history: History, clock: Callable[[], float], say: Callable[[str], None]
) -> FinalState:
    """Poll ZooKeeper until the cluster is healthy (or SETTLE_LIMIT_S): the final state."""
    final = FinalState(expected_brokers=list(cluster.broker_ids), planner_expected=bool(cluster.planners))
    deadline = clock() + SETTLE_LIMIT_S
    while True:
        try:
            await asyncio.wait_for(_snapshot(cluster, final), 5)
        except Exception:
            with contextlib.suppress(Exception):
                await cluster.renew_zk()
        else:
            reasons = unhealthy_reasons(final)
            if not reasons:
                final.healthy_after_s = round(clock() - history.healed_s, 2)
                say(f"healthy {final.healthy_after_s:.1f} s after the heal")
                return final
            final.held_up_by = reasons
        if clock() > deadline:
            say(f"not healthy {SETTLE_LIMIT_S:g} s after the heal")
            return final
        await asyncio.sleep(0.5)


async def _snapshot(cluster: ChaosCluster, final: FinalState) -> None:
    zk = cluster.zk
    assert zk is not None
    topics = sorted(await zk.children(paths.BROKER_TOPICS))
    partitions: dict[tuple[str, int], tuple[tuple[int, ...], int, tuple[int, ...]]] = {}
    reassigning = []
    for topic in topics:
        got = await zk.get_or_none(paths.topic(topic))
        if got is None:
            continue
        assignment = data.decode_topic(topic, got[0])
        for p, replicas in assignment.partitions.items():
            if replicas.adding or replicas.removing:
                reassigning.append((topic, p))
            state = await zk.get_or_none(paths.partition_state(topic, p))
            if state is None:
                partitions[(topic, p)] = (replicas.replicas, -1, ())
                continue
            info = data.decode_partition_state(topic, state[0], state[1].version).leader_and_isr
            partitions[(topic, p)] = (replicas.replicas, info.leader, tuple(info.isr))
    final.partitions = partitions
    final.reassignments_in_progress = reassigning
    final.topics_pending_deletion = sorted(await zk.children(paths.ADMIN_DELETE_TOPICS))
    final.registered_brokers = sorted(int(b) for b in await zk.children(paths.BROKER_IDS))
    active = await cluster.active_planner()
    final.planner_active = active is not None
    if active is not None:
        plan_state = (await planner_status(active)).get("state")
        final.plan_state = plan_state if isinstance(plan_state, str) else None


def _healthy(final: FinalState) -> bool:
    return not unhealthy_reasons(final)


def unhealthy_reasons(final: FinalState) -> list[str]:
    """What keeps the cluster from healthy at this look, each in a few words."""
    reasons = []
    led = sum(
        leader in isr and set(isr) == set(replicas) for replicas, leader, isr in final.partitions.values()
    )
    if led < len(final.partitions):
        reasons.append(f"{len(final.partitions) - led} partition(s) without a leader in a full ISR")
    if final.reassignments_in_progress:
        reasons.append(f"{len(final.reassignments_in_progress)} reassignment(s) in progress")
    if final.topics_pending_deletion:
        reasons.append(f"topic(s) {final.topics_pending_deletion} pending deletion")
    missing = sorted(set(final.expected_brokers) - set(final.registered_brokers))
    if missing:
        reasons.append(f"broker(s) {missing} not registered")
    if final.planner_expected and not final.planner_active:
        reasons.append("no planner active")
    if final.plan_state == "running":
        reasons.append("the planner's plan still running")
    return reasons


def _read_replicas(
    cluster: ChaosCluster, history: History, final: FinalState, clock: Callable[[], float]
) -> None:
    t = clock()
    for tp in history.partitions:
        replicas = final.partitions.get(tp, ((), -1, ()))[0]
        by_broker = {b: cluster.replica_records(b, *tp) for b in replicas}
        final.replica_logs[tp] = by_broker
        hw = final.high_watermarks.get(tp, 0)
        for broker, log in by_broker.items():
            history.reads.extend(
                Read(t, f"replica-{broker}", tp[0], tp[1], offset, value)
                for offset, value in sorted(log.items())
                if offset < hw
            )


def _read_controller_logs(cluster: ChaosCluster, history: History, wall_started: float) -> None:
    """Every broker's elections (controller.log) and the state changes it made as controller
    (state-change.log), each incarnation's and across rotations."""
    for broker in cluster.broker_ids:
        directory = cluster.log_dir(broker)
        history.controllers.extend(logs.elections(directory, f"broker {broker}'s log", wall_started))
        history.controller_actions.extend(
            logs.controller_actions(directory, f"broker {broker}'s state-change.log", wall_started)
        )


def _read_planner_logs(cluster: ChaosCluster, history: History, wall_started: float) -> None:
    """Each plan's start, resumptions and end, and its moves, from every planner's log."""
    logs.read_plans(history, [(p.log_path.stem, p.log()) for p in cluster.planners], wall_started)
