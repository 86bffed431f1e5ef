"""The nemesis: injects each fault of the plan at its time, heals it after its duration, and
heals everything at the end. Faults overlap; a broker already under a fault is not picked
by another broker fault while it lasts."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from collections.abc import Awaitable, Callable

import orjson

from node.chaos.cluster import ChaosCluster
from node.chaos.history import History, Shutdown
from node.chaos.schedule import BROKER_FAULTS, PEER_PARTITIONS, Fault
from node.chaos.workload import PARTITIONS, TOPICS
from node.clients.planner import PlannerClient
from node.cluster.local import PlannerProcess

# How long a controlled shutdown may take before the broker is killed.
TERM_TIMEOUT_S = 30.0
# How often the supervisor looks for brokers that exited by themselves.
SUPERVISE_EVERY_S = 1.0
# How long the planner fault waits for the executor to be running a plan before the kill.
PLAN_WAIT_S = 5.0


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

    def supervise(self) -> None:
        """Start restarting the brokers that exit by themselves, as a process supervisor would:
        a broker that finds no ZooKeeper quorum at start-up exits (Kafka's does too), and left
        down it would keep its partitions offline until the end of the run."""
        self._supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        while not self._done.is_set():
            for broker in self.cluster.broker_ids:
                process = self.cluster.process(broker)
                if broker in self.busy or process is None or process.running:
                    continue
                code = process.process.returncode if process.process is not None else None
                self.cluster.launch(broker)
                self._event("restart", f"broker {broker} exited (status {code}); restarted")
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

    async def heal_all(self) -> None:
        for link in [*self.cluster.listener_links.values(), *self.cluster.zookeeper_links.values()]:
            link.heal()
        self.cluster.peer_links.heal_all()
        for server_id in sorted(self._killed_zookeeper):
            await asyncio.to_thread(self.cluster.zookeeper.start_server, server_id)
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

    async def _restart(self, broker: int) -> None:
        process = self.cluster.process(broker)
        if process is None or not process.running:
            self.cluster.launch(broker)
            self._event("heal", f"broker {broker} restarted")

    # --- process faults ---

    async def _kill(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            process.signal(signal.SIGKILL)
            await asyncio.to_thread(process.wait, 10)
            self._count(fault, f"kill -9 broker {broker} ({role})")
            await asyncio.sleep(fault.duration_s)
            await self._restart(broker)

        await self._with_broker(fault, rng, act)

    async def _term(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            self._count(fault, f"SIGTERM broker {broker} ({role})")
            started = self.now()
            code = await asyncio.to_thread(process.stop, TERM_TIMEOUT_S)
            took = self.now() - started
            self.history.shutdowns.append(Shutdown(self.now(), broker, took, code))
            self._event("fault", f"broker {broker} shut down in {took:.1f}s (exit status {code})")
            await asyncio.sleep(fault.duration_s)
            await self._restart(broker)

        await self._with_broker(fault, rng, act)

    async def _pause(self, fault: Fault, rng: random.Random) -> None:
        async def act(broker: int, role: str) -> None:
            process = self.cluster.process(broker)
            assert process is not None
            process.signal(signal.SIGSTOP)
            self._count(fault, f"SIGSTOP broker {broker} ({role}) for {fault.duration_s:.1f}s")
            await asyncio.sleep(fault.duration_s)
            process.signal(signal.SIGCONT)
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
            self._count(fault, f"broker {broker} ({role}) cut from ZooKeeper until its session expires")
            deadline = self.now() + fault.duration_s
            while self.now() < deadline:
                registered = await self.cluster.registered_brokers()
                if registered is not None and broker not in registered:
                    self._event("fault", f"broker {broker}'s session expired")
                    break
                await asyncio.sleep(0.2)
            link.heal()
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
            await asyncio.to_thread(self.cluster.zookeeper.kill_server, server_id)
        self._count(fault, f"kill -9 ZooKeeper server(s) {victims} for {fault.duration_s:.1f}s")
        await asyncio.sleep(fault.duration_s)
        for server_id in victims:
            if server_id in self._killed_zookeeper:
                self._killed_zookeeper.discard(server_id)
                await asyncio.to_thread(self.cluster.zookeeper.start_server, server_id)
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
            if variant == "from-zookeeper":
                zookeeper.cut()
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
                await asyncio.to_thread(process.wait, 10)
                bounced.append(leader)
                self.cluster.launch(leader)
            finally:
                self.busy.discard(leader)
            # Until a new leader is elected, or the old one is back.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leader_moved(tp, leader), max(0.5, end - self.now()))
        self._event("heal", f"bounced leaders of {tp[0]}-{tp[1]}: {bounced}")

    async def _leader_moved(self, tp: tuple[str, int], old: int) -> None:
        while (await self.cluster.leader(*tp)) in (None, old):  # noqa: ASYNC110 (a poll of ZooKeeper)
            await asyncio.sleep(0.2)

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
