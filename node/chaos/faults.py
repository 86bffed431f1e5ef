"""The nemesis: injects each fault of the plan at its time, heals it after its duration, and
heals everything at the end. Faults overlap; a broker already under a fault is not picked
by another broker fault while it lasts. What takes away something an election needs (a broker
down or cut from ZooKeeper, a ZooKeeper server down) is recorded as an Outage, from its
injection to its heal, for the checker's controller-absent check."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from collections.abc import Awaitable, Callable

import orjson

from node.chaos.cluster import ChaosCluster
from node.chaos.history import BROKER_CUT, BROKER_DOWN, ZOOKEEPER_DOWN, History, Outage, Shutdown
from node.chaos.schedule import (
    BROKER_FAULTS,
    CONTROLLER_DELETIONS,
    CONTROLLER_GRACE_S,
    PEER_PARTITIONS,
    Fault,
)
from node.chaos.workload import PARTITIONS, TOPICS
from node.clients.planner import PlannerClient
from node.cluster.local import PlannerProcess

# How long a controlled shutdown may take before the broker is killed.
TERM_TIMEOUT_S = 30.0
# How often the supervisor looks for brokers that exited by themselves.
SUPERVISE_EVERY_S = 1.0
# How long the planner fault waits for the executor to be running a plan before the kill.
PLAN_WAIT_S = 5.0
# How often a deletion burst reads /controller while it waits for the next controller: the next
# deletion follows the election within this, while the new controller still takes office.
CONTROLLER_POLL_S = 0.02
# How long a restarted ZooKeeper server may take to serve again before its outage is closed
# anyway (its quorum's election, the JVM's start).
ZOOKEEPER_SERVE_WAIT_S = 60.0


class Nemesis:
    def __init__(
        self,
        cluster: ChaosCluster,
        history: History,
        clock: Callable[[], float],
        say: Callable[[str], None],
    ) -> None:
        self.cluster = cluster
        self.history = history
        self.now = clock
        self.say = say
        self.busy: set[int] = set()
        self.injected: dict[str, int] = {}
        self.skipped: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._killed_zookeeper: set[int] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        # Restarted ZooKeeper servers being watched until they serve again.
        self._serving: list[asyncio.Task[None]] = []

    def supervise(self) -> None:
        """Start restarting the brokers that exit by themselves, as a process supervisor would:
        a broker that finds no ZooKeeper quorum at start-up exits (Kafka's does too), and left
        down it would keep its partitions offline until the end of the run."""
        self._supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        # The broker exited after the last look: its outage counts from there, the earliest it
        # can have started.
        looked = self.now()
        while not self._done.is_set():
            for broker in self.cluster.broker_ids:
                process = self.cluster.process(broker)
                if broker in self.busy or process is None or process.running:
                    continue
                code = process.process.returncode if process.process is not None else None
                self.history.outages.append(Outage(BROKER_DOWN, broker, looked, self.now()))
                self.cluster.launch(broker)
                self._event("restart", f"broker {broker} exited (status {code}); restarted")
            looked = self.now()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._done.wait(), SUPERVISE_EVERY_S)

    async def run(self, plan: list[Fault]) -> None:
        """Start each fault at its time on the run's clock; returns when the last has started."""
        for fault in plan:
            delay = fault.at_s - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
            self._tasks.append(asyncio.create_task(self._inject(fault)))

    async def finish(self) -> None:
        """Let the faults under way end (each heals itself), then heal whatever is left."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.heal_all()

    async def stop_supervising(self) -> None:
        """At the very end: a broker restarted by the heal may still exit at start-up (its
        ZooKeeper server just restarted), so the supervisor runs until the checks are done."""
        self._done.set()
        if self._supervisor is not None:
            await asyncio.wait([self._supervisor], timeout=5.0)
        for task in self._serving:
            task.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)

    async def heal_all(self) -> None:
        for link in [*self.cluster.listener_links.values(), *self.cluster.zookeeper_links.values()]:
            link.heal()
        self.cluster.peer_links.heal_all()
        for server_id in sorted(self._killed_zookeeper):
            await asyncio.to_thread(self.cluster.zookeeper.start_server, server_id)
            self._watch_serving(server_id)
        self._killed_zookeeper.clear()
        for planner in self.cluster.planners:
            if not planner.running:
                planner.start()
        for broker_id in self.cluster.broker_ids:
            process = self.cluster.process(broker_id)
            if process is not None and process.running:
                process.signal(signal.SIGCONT)
            else:
                self.cluster.launch(broker_id)
        self.busy.clear()
        for outage in self.history.outages:
            if outage.kind != ZOOKEEPER_DOWN:
                self._healed(outage)

    # --- one fault ---

    async def _inject(self, fault: Fault) -> None:
        handler = getattr(self, "_" + fault.kind.replace("-", "_"))
        try:
            await handler(fault, random.Random(fault.pick))
        except Exception as e:
            self._event("fault-error", f"{fault.kind}/{fault.variant}: {type(e).__name__}: {e}")

    def _event(self, kind: str, detail: str) -> None:
        event = self.history.event(self.now(), kind, detail)
        self.say(event.line())

    def _skip(self, fault: Fault, why: str) -> None:
        self.skipped.append(f"{fault.describe()}: {why}")
        self._event("fault-skipped", f"{fault.kind}/{fault.variant}: {why}")

    def _count(self, fault: Fault, detail: str) -> None:
        self.injected[fault.kind] = self.injected.get(fault.kind, 0) + 1
        self._event("fault", f"{fault.kind}/{fault.variant} {detail}")

    def _outage(self, kind: str, target: int) -> Outage:
        outage = Outage(kind, target, self.now())
        self.history.outages.append(outage)
        return outage

    def _healed(self, outage: Outage) -> None:
        if outage.end is None:
            outage.end = self.now()

    def _watch_serving(self, server_id: int) -> None:
        """Close the server's outage once it serves again (in a quorum), not when it is
        launched: until then it counts for nothing in the ensemble's majority."""
        outages = [o for o in self.history.outages if o.kind == ZOOKEEPER_DOWN and o.target == server_id]

        async def watch() -> None:
            deadline = self.now() + ZOOKEEPER_SERVE_WAIT_S
            try:
                while self.now() < deadline:
                    if await asyncio.to_thread(self.cluster.zookeeper_serving, server_id):
                        break
                    await asyncio.sleep(0.1)
            finally:
                for outage in outages:
                    self._healed(outage)

        self._serving.append(asyncio.create_task(watch()))

    def _free(self) -> list[int]:
        return [b for b in self.cluster.broker_ids if b not in self.busy and self.cluster.running(b)]

    async def _target(self, fault: Fault, rng: random.Random) -> tuple[int | None, str]:
        """The broker holding the fault's role and not under another fault, or None."""
        free = self._free()
        role = fault.variant
        if role == "controller":
            controller = await self.cluster.controller()
            return (controller if controller in free else None), "the controller"
        if role == "from-controller":
            controller = await self.cluster.controller()
            others = [b for b in free if b != controller]
            chosen = rng.choice(others) if controller is not None and others else None
            return chosen, "a broker other than the controller"
        if role in ("leader", "leader-with-isr", "from-followers"):
            tp = (rng.choice(TOPICS), rng.randrange(PARTITIONS))
            leader = await self.cluster.leader(*tp)
            return (leader if leader in free else None), f"the leader of {tp[0]}-{tp[1]}"
        return (rng.choice(free) if free else None), "a random broker"

    async def _with_broker(
        self, fault: Fault, rng: random.Random, act: Callable[[int, str], Awaitable[None]]
    ) -> None:
        broker, role = await self._target(fault, rng)
        if broker is None:
            self._skip(fault, f"no free broker is {role}")
            return
        assert fault.kind in BROKER_FAULTS
        self.busy.add(broker)
        try:
            await act(broker, role)
        finally:
            self.busy.discard(broker)

    async def _restart(self, broker: int, outage: Outage) -> None:
        process = self.cluster.process(broker)
        if process is None or not process.running:
            self.cluster.launch(broker)
            self._event("heal", f"broker {broker} restarted")
        self._healed(outage)

    # --- process faults ---

    async def _kill(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            process.signal(signal.SIGKILL)
            down = self._outage(BROKER_DOWN, broker)
            await asyncio.to_thread(process.wait, 10)
            self._count(fault, f"kill -9 broker {broker} ({role})")
            await asyncio.sleep(fault.duration_s)
            await self._restart(broker, down)

        await self._with_broker(fault, rng, act)

    async def _term(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            self._count(fault, f"SIGTERM broker {broker} ({role})")
            # Shutting down, it is not one to elect.
            down = self._outage(BROKER_DOWN, broker)
            started = self.now()
            code = await asyncio.to_thread(process.stop, TERM_TIMEOUT_S)
            took = self.now() - started
            self.history.shutdowns.append(Shutdown(self.now(), broker, took, code))
            self._event("fault", f"broker {broker} shut down in {took:.1f}s (exit status {code})")
            await asyncio.sleep(fault.duration_s)
            await self._restart(broker, down)

        await self._with_broker(fault, rng, act)

    async def _pause(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            process.signal(signal.SIGSTOP)
            down = self._outage(BROKER_DOWN, broker)
            self._count(fault, f"SIGSTOP broker {broker} ({role}) for {fault.duration_s:.1f}s")
            await asyncio.sleep(fault.duration_s)
            process.signal(signal.SIGCONT)
            self._healed(down)
            self._event("heal", f"SIGCONT broker {broker}")

        await self._with_broker(fault, rng, act)

    # --- ZooKeeper faults ---

    async def _expire(self, fault: Fault, rng: random.Random) -> None:
        """Cut the broker from every ZooKeeper server until its registration is gone: the
        ensemble expires its session while the process runs on and still talks to the other
        brokers and clients."""

        async def act(broker: int, role: str) -> None:
            link = self.cluster.zookeeper_links[broker]
            link.cut()
            cut = self._outage(BROKER_CUT, broker)
            self._count(fault, f"broker {broker} ({role}) cut from ZooKeeper until its session expires")
            deadline = self.now() + fault.duration_s
            while self.now() < deadline:
                registered = await self.cluster.registered_brokers()
                if registered is not None and broker not in registered:
                    self._event("fault", f"broker {broker}'s session expired")
                    break
                await asyncio.sleep(0.2)
            link.heal()
            self._healed(cut)
            self._event("heal", f"broker {broker} reconnects to ZooKeeper")

        await self._with_broker(fault, rng, act)

    async def _zk(self, fault: Fault, rng: random.Random) -> None:
        servers = [
            s.server_id for s in self.cluster.zookeeper.servers if s.server_id not in self._killed_zookeeper
        ]
        count = len(self.cluster.zookeeper.servers) // 2 + 1 if fault.variant == "majority" else 1
        if len(servers) < count:
            self._skip(fault, "its servers are already down")
            return
        victims = rng.sample(servers, count)
        for server_id in victims:
            self._killed_zookeeper.add(server_id)
            self._outage(ZOOKEEPER_DOWN, server_id)
            await asyncio.to_thread(self.cluster.zookeeper.kill_server, server_id)
        self._count(fault, f"kill -9 ZooKeeper server(s) {victims} for {fault.duration_s:.1f}s")
        await asyncio.sleep(fault.duration_s)
        for server_id in victims:
            if server_id in self._killed_zookeeper:
                self._killed_zookeeper.discard(server_id)
                await asyncio.to_thread(self.cluster.zookeeper.start_server, server_id)
                self._watch_serving(server_id)
        self._event("heal", f"ZooKeeper server(s) {victims} restarted")

    # --- network partitions ---

    async def _partition(self, fault: Fault, rng: random.Random) -> None:
        if fault.variant in PEER_PARTITIONS:
            await self._peer_partition(fault, rng)
            return

        async def act(broker: int, role: str) -> None:
            listener = self.cluster.listener_links[broker]
            zookeeper = self.cluster.zookeeper_links[broker]
            variant = fault.variant
            cut: Outage | None = None
            if variant == "from-zookeeper":
                zookeeper.cut()
                cut = self._outage(BROKER_CUT, broker)
                self._count(fault, f"broker {broker} ({role}) cut from ZooKeeper for {fault.duration_s:.1f}s")
                await asyncio.sleep(fault.duration_s)
            elif variant == "isolated":
                listener.cut()
                self._count(fault, f"nothing reaches broker {broker} ({role}) for {fault.duration_s:.1f}s")
                await asyncio.sleep(fault.duration_s)
            elif variant == "leader-with-isr":
                # Jepsen's case: the followers lose the leader, so it shrinks the ISR to itself;
                # then it loses ZooKeeper too.
                listener.cut()
                self._count(fault, f"{role} (broker {broker}) cut from its followers, then from ZooKeeper")
                await asyncio.sleep(fault.duration_s / 2)
                zookeeper.cut()
                cut = self._outage(BROKER_CUT, broker)
                self._event("fault", f"broker {broker} cut from ZooKeeper too")
                await asyncio.sleep(fault.duration_s / 2)
            elif variant == "asymmetric":
                listener.cut(to_server=False)
                self._count(
                    fault,
                    f"broker {broker} ({role}) receives requests but its answers are lost "
                    f"for {fault.duration_s:.1f}s",
                )
                await asyncio.sleep(fault.duration_s)
            else:
                self._count(fault, f"broker {broker}'s ({role}) link flaps for {fault.duration_s:.1f}s")
                end = self.now() + fault.duration_s
                while self.now() < end:
                    listener.cut()
                    await asyncio.sleep(rng.uniform(0.2, 1.0))
                    listener.heal()
                    await asyncio.sleep(rng.uniform(0.2, 1.0))
            listener.heal()
            zookeeper.heal()
            if cut is not None:
                self._healed(cut)
            self._event("heal", f"broker {broker}'s links healed")

        await self._with_broker(fault, rng, act)

    async def _peer_partition(self, fault: Fault, rng: random.Random) -> None:
        """Cut the broker from some of the other brokers only, both ways: it still reaches
        ZooKeeper, the clients still reach it, and so do the brokers on its side."""

        async def act(broker: int, role: str) -> None:
            variant = fault.variant
            if variant == "from-one-peer":
                free = [b for b in self._free() if b != broker]
                if not free:
                    self._skip(fault, f"no other free broker for broker {broker}")
                    return
                peer = rng.choice(free)
                self.busy.add(peer)
                try:
                    await self._cut_pairs(fault, broker, role, [peer], f"broker {peer}")
                finally:
                    self.busy.discard(peer)
                return
            if variant == "from-controller":
                controller = await self.cluster.controller()
                if controller is None or controller == broker:
                    self._skip(fault, f"the controller moved to broker {broker}, or there is none")
                    return
                await self._cut_pairs(
                    fault, broker, role, [controller], f"the controller (broker {controller})"
                )
                return
            followers = await self._followers(broker)
            if not followers:
                self._skip(fault, f"broker {broker} leads no workload partition with followers")
                return
            await self._cut_pairs(fault, broker, role, followers, f"its followers (brokers {followers})")

        await self._with_broker(fault, rng, act)

    async def _cut_pairs(self, fault: Fault, broker: int, role: str, others: list[int], who: str) -> None:
        for other in others:
            self.cluster.peer_links.cut(broker, other)
        self._count(fault, f"broker {broker} ({role}) and {who} cannot talk for {fault.duration_s:.1f}s")
        try:
            await asyncio.sleep(fault.duration_s)
        finally:
            for other in others:
                self.cluster.peer_links.heal(broker, other)
        self._event("heal", f"broker {broker} and {who} talk again")

    async def _followers(self, leader: int) -> list[int]:
        """The other replicas of the workload partitions `leader` leads."""
        followers: set[int] = set()
        for topic in TOPICS:
            for partition in range(PARTITIONS):
                if await self.cluster.leader(topic, partition) == leader:
                    followers.update(await self.cluster.replicas(topic, partition))
        followers.discard(leader)
        return sorted(followers)

    # --- leader bounces ---

    async def _bounce_leader(self, fault: Fault, rng: random.Random) -> None:
        """kill -9 the leader of one partition and restart it at once, round after round, each
        round chasing the partition's new leader (KIP-101/KIP-279's fast leader changes)."""
        tp = (rng.choice(TOPICS), rng.randrange(PARTITIONS))
        self._count(fault, f"chasing the leader of {tp[0]}-{tp[1]} for {fault.duration_s:.1f}s")
        end = self.now() + fault.duration_s
        bounced = []
        while self.now() < end:
            leader = await self.cluster.leader(*tp)
            if leader is None or leader in self.busy or not self.cluster.running(leader):
                await asyncio.sleep(0.3)
                continue
            self.busy.add(leader)
            try:
                process = self.cluster.process(leader)
                assert process is not None
                process.signal(signal.SIGKILL)
                down = self._outage(BROKER_DOWN, leader)
                await asyncio.to_thread(process.wait, 10)
                bounced.append(leader)
                self.cluster.launch(leader)
                self._healed(down)
            finally:
                self.busy.discard(leader)
            # Until a new leader is elected, or the old one is back.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leader_moved(tp, leader), max(0.5, end - self.now()))
        self._event("heal", f"bounced leaders of {tp[0]}-{tp[1]}: {bounced}")

    async def _leader_moved(self, tp: tuple[str, int], old: int) -> None:
        while (await self.cluster.leader(*tp)) in (None, old):  # noqa: ASYNC110 (a poll of ZooKeeper)
            await asyncio.sleep(0.2)

    # --- forced re-elections ---

    async def _delete_controller(self, fault: Fault, rng: random.Random) -> None:
        """An operator's forced re-election (`rmr /controller`, `keel controller reelect`)
        through the run's own ZooKeeper client, in a burst: /controller deleted, then deleted
        again as soon as a broker holds it at a higher epoch, as many times as the variant
        says. Each deletion lands while the controller just elected is still taking office, as
        an operator's or a script's retries would. Waiting for the next controller gives up
        after the session timeout plus CONTROLLER_GRACE_S (the checker's controller-absent
        bound), and the deletions left are not made. No broker is touched: none is busy."""
        times = CONTROLLER_DELETIONS[fault.variant]
        wait_s = self.cluster.session_timeout_s + CONTROLLER_GRACE_S
        end = self.now() + fault.duration_s
        current = await self.cluster.controller_and_epoch()
        if current is None:
            self._skip(fault, "no broker holds /controller, or ZooKeeper does not answer")
            return
        deleted: list[tuple[int, int]] = []
        last_deleted_at = self.now()
        while current is not None and len(deleted) < times:
            broker, epoch, version = current
            answer = await self.cluster.delete_controller(version)
            if answer is not True:
                # Another election or a resignation came first, or the answer was lost: read
                # /controller again and delete whichever controller holds it then.
                if answer is None:
                    self._event("fault", f"no answer to the deletion of broker {broker}'s /controller")
                await asyncio.sleep(CONTROLLER_POLL_S)
                current = await self._next_controller(epoch - 1, min(end, self.now() + wait_s))
                continue
            after = self.now() - last_deleted_at
            last_deleted_at = self.now()
            deleted.append((broker, epoch))
            if len(deleted) == 1:
                self._count(
                    fault,
                    f"/controller deleted (broker {broker} at epoch {epoch}), "
                    f"{times} deletion(s) in a row planned",
                )
            else:
                self._event(
                    "fault",
                    f"/controller deleted again (broker {broker} at epoch {epoch}, "
                    f"{after:.2f}s after the deletion before)",
                )
            if len(deleted) < times:
                current = await self._next_controller(epoch, min(end, self.now() + wait_s))
        if not deleted:
            self._skip(fault, "/controller could not be deleted")
            return
        # The controller after the last deletion, waited for the whole bound even when the
        # burst's end (the run's) came first, unless the burst has waited it out already.
        last_epoch = deleted[-1][1]
        back = None
        if current is not None or self.now() < last_deleted_at + wait_s:
            back = await self._next_controller(last_epoch, last_deleted_at + wait_s)
        took = self.now() - last_deleted_at
        if back is None:
            self._event(
                "fault",
                f"no controller above epoch {last_epoch} {took:.1f}s after the last of "
                f"{len(deleted)} deletion(s) of /controller ({times} planned)",
            )
        else:
            self._event(
                "heal",
                f"broker {back[0]} is controller at epoch {back[1]}, {took:.2f}s after the last of "
                f"{len(deleted)} deletion(s) of /controller",
            )

    async def _next_controller(self, above_epoch: int, until: float) -> tuple[int, int, int] | None:
        """The controller once one holds /controller at an epoch above `above_epoch`, or None
        if none does by `until` (the run's clock)."""
        while True:
            current = await self.cluster.controller_and_epoch()
            if current is not None and current[1] > above_epoch:
                return current
            if self.now() >= until:
                return None
            await asyncio.sleep(CONTROLLER_POLL_S)

    async def _planner(self, fault: Fault, rng: random.Random) -> None:
        """kill -9 the active planner, if possible while its executor runs a plan; the standby
        takes over and resumes the plan from its copy in ZooKeeper."""
        active = await self.cluster.active_planner()
        if active is None:
            self._skip(fault, "no planner is active")
            return
        status = await planner_status(active)
        waited = 0.0
        while status.get("state") != "running" and waited < PLAN_WAIT_S:
            await asyncio.sleep(0.5)
            waited += 0.5
            status = await planner_status(active)
        active.signal(signal.SIGKILL)
        await asyncio.to_thread(active.wait, 10)
        self._count(
            fault,
            f"kill -9 the active planner (port {active.port}; plan {status.get('state', 'none')}, "
            f"{status.get('moves_done', 0)}/{status.get('moves_total', 0)} moves done)",
        )
        await asyncio.sleep(fault.duration_s)
        if not active.running:
            active.start()
            self._event("heal", f"planner on port {active.port} restarted")


async def planner_status(planner: PlannerProcess) -> dict[str, object]:
    """The executor's status as the planner reports it ({} when it does not answer)."""
    with contextlib.suppress(Exception):
        async with PlannerClient.at(planner.address, timeout=3.0) as client:
            value = orjson.loads((await client.status()).status_json)
            return value if isinstance(value, dict) else {}
    return {}
