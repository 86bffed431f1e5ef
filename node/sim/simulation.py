"""One seeded run of the control plane: brokers on the simulated network and the in-memory
ZooKeeper, a produce workload, admin operations and faults chosen by the seed, the
invariants checked after every step, then everything healed and the cluster required to
converge.

Determinism: the run's only sources of chance are `random.Random(seed)` for the schedule and
the network, and the `random` module's generator (seeded here) for what production code draws
(backoff jitter, replica placement). Time is the loop's virtual clock. The trace of what
happened is hashed, so two runs of one seed can be compared byte for byte.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

from actors.base.ports import TopicPartition
from node.sim.broker import BrokerSettings, SimBroker
from node.sim.invariants import Ack, Checker, UnexpectedErrors, Violation
from node.sim.log_store import MemoryLogStore
from node.sim.loop import EPOCH_S, run_simulated
from node.sim.network import CLIENT, SimNetwork, endpoint_of
from node.sim.zookeeper import FakeClusterStore, FakeZooKeeper
from wire import records
from wire.api import (
    AlterPartitionReassignmentsRequest,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ReassignablePartition,
    ReassignableTopic,
    Request,
    Response,
)
from wire.errors import ErrorCode, WireError

# Every kind of fault and admin operation a run can inject; `--faults` picks among them.
FAULTS = (
    "crash",
    "restart",
    "shutdown",
    "expire",
    "controller-move",
    "delete-controller",
    "partition",
    "zk-partition",
    "zk-outage",
    "drop",
    "slow",
    "create",
    "delete",
    "reassign",
    "elect",
    "lost-reply",
    "power-loss",
)
DEFAULT_FAULTS = frozenset(FAULTS)
# How long a partition may stay without a live leader while a replica that could lead it is
# live: the session timeout (a dead leader's or controller's), an election, a failover, with room.
LEADER_LIMIT_S = 20.0
TRACE_TAIL = 40


@dataclasses.dataclass(frozen=True)
class RunConfig:
    seed: int
    brokers: int = 5
    steps: int = 60
    faults: frozenset[str] = DEFAULT_FAULTS
    # Simulated seconds the healed cluster has to converge.
    settle_s: float = 60.0
    # The brokers run the warm standby (controller.standby.enable, docs/STANDBY.md).
    standby: bool = False


@dataclasses.dataclass
class RunResult:
    seed: int
    trace_hash: str
    events: int
    faults: collections.Counter[str]
    acknowledged: int
    simulated_s: float
    violation: Violation | None = None
    last_events: list[str] = dataclasses.field(default_factory=list)


class Simulation:
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self._hash = hashlib.sha256()
        self._tail: collections.deque[str] = collections.deque(maxlen=TRACE_TAIL)
        self.events = 0
        self.faults: collections.Counter[str] = collections.Counter()
        self.zk = FakeZooKeeper()
        # An operator's own ZooKeeper session, as zkCli's, and what its watch on
        # `/controller` last heard.
        self._operator = FakeClusterStore(self.zk)
        self._operator_saw_a_controller = asyncio.Event()
        self._operator.watch_controller(_OperatorWatch(self._operator_saw_a_controller))
        self.network = SimNetwork(self.rng, self.trace)
        self.logs = {b: MemoryLogStore() for b in self.broker_ids}
        self.checker = Checker(self.zk, self.logs)
        self.settings = BrokerSettings()
        if config.standby:
            controller = dataclasses.replace(self.settings.controller, standby_enable=True)
            self.settings = dataclasses.replace(self.settings, controller=controller)
        # broker id -> (incarnation, the broker)
        self.brokers: dict[int, tuple[int, SimBroker]] = {}
        self._incarnations = 0
        self._topics: list[str] = []
        self._created = 0
        self._produced = 0
        # Strong references to the clients' tasks while they run (the loop keeps weak ones).
        self._client_tasks: set[asyncio.Task[Any]] = set()
        self._stopping: list[asyncio.Task[Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zookeeper_down = False

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.config.brokers + 1))

    def trace(self, line: str, *, notable: bool = True) -> None:
        """Record an event: every one goes into the run's hash; the notable ones (not the
        steady stream of fetches) are kept for the report of a violation."""
        assert self._loop is not None
        entry = f"{self._loop.time() - EPOCH_S:.6f} {line}"
        self._hash.update(entry.encode())
        self._hash.update(b"\n")
        if notable:
            self._tail.append(entry)
        self.events += 1

    # --- the run ---

    def run(self) -> RunResult:
        return run_simulated(self._run())

    async def _run(self) -> RunResult:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(self._loop_error)
        started = self._loop.time()
        random.seed(self.config.seed)
        self.zk.latency = lambda: self.rng.uniform(0.0002, 0.002)
        violation = None
        try:
            for broker_id in self.broker_ids:
                await self._start(broker_id)
            self._client(self._watch_for_a_controller())
            await asyncio.sleep(1.0)
            await self._create_topic()
            for _ in range(self.config.steps):
                await self._step()
            await self._heal_and_settle()
        except Violation as v:
            violation = v
            self.trace(f"VIOLATION {v}")
        return RunResult(
            seed=self.config.seed,
            trace_hash=self._hash.hexdigest(),
            events=self.events,
            faults=self.faults,
            acknowledged=len(self.checker.acks),
            simulated_s=self._loop.time() - started,
            violation=violation,
            last_events=list(self._tail),
        )

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """What reaches the event loop's handler: a task whose error nobody retrieved, a
        callback that raised."""
        error = context.get("exception")
        what = context.get("message", "")
        self.checker.unexpected_error(what if error is None else f"{what}: {type(error).__name__}: {error}")

    async def _step(self) -> None:
        for _ in range(self.rng.randint(0, 3)):
            self._client(self._produce())
        action = self._choose_action()
        if action is not None:
            self.faults[action] += 1
            await self._act(action)
        await asyncio.sleep(self.rng.uniform(0.05, 1.5))
        self.checker.check(self.brokers)

    def _choose_action(self) -> str | None:
        if self.rng.random() < 0.4:
            return None
        enabled = [f for f in FAULTS if f in self.config.faults]
        return self.rng.choice(enabled) if enabled else None

    # --- brokers ---

    async def _start(self, broker_id: int) -> None:
        self._incarnations += 1
        broker = SimBroker(broker_id, self.zk, self.network, self.logs[broker_id], self.settings)
        self.brokers[broker_id] = (self._incarnations, broker)
        self.checker.started(broker_id, self._incarnations)
        if self._zookeeper_down:
            broker.starts_cut_off()  # it starts into the outage, and waits for it to end
        self.trace(f"start broker {broker_id} (incarnation {self._incarnations})")
        started = broker.start()
        incarnation = self._incarnations

        def registered(task: asyncio.Task[None]) -> None:
            if task.cancelled() or not broker.alive:
                return
            error = task.exception()
            if error is None:
                self.checker.watch_events(broker, incarnation)
            else:
                # As keel-node exits when its id is still held: down until restarted.
                self.trace(f"broker {broker_id} failed to start: {error}")
                broker.crash()

        started.add_done_callback(registered)

    def _live(self) -> list[int]:
        return [b for b, (_, broker) in sorted(self.brokers.items()) if broker.alive]

    def _down(self) -> list[int]:
        return [b for b, (_, broker) in sorted(self.brokers.items()) if not broker.alive]

    def _controller(self) -> int | None:
        holder = self.zk.controller
        return None if holder is None else int(holder.value)  # type: ignore[call-overload]

    # --- faults and admin operations ---

    async def _act(self, action: str) -> None:
        """Inject one fault or admin operation; one that does not apply now (no broker down
        to restart, too few up to lose one) is not counted."""
        done = await getattr(self, "_" + action.replace("-", "_"))()
        if not done:
            self.faults[action] -= 1

    def _can_lose_one(self) -> bool:
        """Keep a majority up: a cluster with most brokers down only waits."""
        return len(self._live()) - 1 >= self.config.brokers // 2 + 1

    async def _crash(self) -> bool:
        if not self._can_lose_one():
            return False
        victim = self._pick_victim(self._live())
        self.trace(f"crash broker {victim}")
        incarnation, broker = self.brokers[victim]
        broker.crash()
        self.checker.forget_events(incarnation)
        return True

    async def _power_loss(self) -> bool:
        """A broker's machine loses power: it stops as in `crash`, and each of its logs loses
        a tail of random length, what was not yet flushed (Keel, as Kafka, leaves flushing
        to the operating system). Only a broker whose every ISR has another member: a
        partition's last in-sync copy lost is lost in Kafka too. It may rejoin an ISR only
        once it has fetched again what it lost (KIP-903)."""
        if not self._can_lose_one():
            return False
        candidates = [b for b in self._live() if self.checker.another_isr_member_everywhere(b)]
        if not candidates:
            return False
        victim = self._pick_victim(candidates)
        incarnation, broker = self.brokers[victim]
        broker.crash()
        self.checker.forget_events(incarnation)
        lost = 0
        logs = self.logs[victim].logs
        for log in (logs[tp] for tp in sorted(logs)):
            kept = self.rng.randint(0, log.batch_count)
            lost += log.batch_count - kept
            log.lose_tail(kept)
        self.checker.lost_tail(victim, incarnation)
        self.trace(f"power loss on broker {victim}: {lost} unflushed batch(es) lost")
        return True

    async def _shutdown(self) -> bool:
        if not self._can_lose_one():
            return False
        victim = self._pick_victim(self._live())
        self.trace(f"controlled shutdown of broker {victim}")
        incarnation, broker = self.brokers[victim]
        self.checker.forget_events(incarnation)
        self._stopping.append(broker.terminate())
        return True

    async def _restart(self) -> bool:
        # A broker back from a power loss before the controller saw it go would be found
        # live and in the ISRs it lost the tail of: ZooKeeper-mode Kafka cannot tell
        # (KRaft's unclean-shutdown detection, KIP-966, can). A machine takes longer than a
        # session to boot; here, until the ISRs no longer name it.
        down = [b for b in self._down() if not self.checker.named_from_before_its_loss(b)]
        if not down:
            return False
        await self._start(self.rng.choice(down))
        return True

    async def _expire(self) -> bool:
        started = [b for b in self._live() if self.brokers[b][1].started]
        if not started:
            return False
        victim = self._pick_victim(started)
        self.trace(f"expire the session of broker {victim}")
        self._client(self.brokers[victim][1].expire_session())
        return True

    async def _controller_move(self) -> bool:
        controller = self._controller()
        if controller is None or controller not in self._live():
            return False
        self.trace(f"move the controller away from broker {controller}")
        await self.brokers[controller][1].store.force_delete_controller()
        return True

    async def _delete_controller(self) -> bool:
        """An operator's forced re-election (`rmr /controller`, `keel controller reelect`),
        done again as soon as the next controller appears, a few times in a row: each new
        controller loses its znode while it is still taking over."""
        if self._controller() is None:
            return False
        times = self.rng.randint(1, 8)
        self.trace(f"delete /controller {times} time(s) in a row")
        self._client(self._delete_controller_repeatedly(times))
        return True

    async def _delete_controller_repeatedly(self, times: int) -> None:
        """The operator watches `/controller` as zkCli's `stat -w` does: it deletes it, then
        waits for the next creation, then deletes again."""
        for _ in range(times):
            self._operator_saw_a_controller.clear()
            holder = await self._operator.force_delete_controller()
            self.trace(f"operator deleted /controller (held by broker {holder})")
            if (await self._operator.read_controller()).controller_id is None:
                try:
                    await asyncio.wait_for(
                        self._operator_saw_a_controller.wait(), self.settings.session_timeout_s + 1.0
                    )
                except TimeoutError:
                    return
            await asyncio.sleep(self.rng.uniform(0.0, 0.005))

    async def _watch_for_a_controller(self) -> None:
        """Check, every tenth of a simulated second, that a live cluster has a controller, and
        that every partition with a live replica that could lead it gets a leader."""
        assert self._loop is not None
        limit_s = self.settings.session_timeout_s + 1.0
        while True:
            await asyncio.sleep(0.1)
            now = self._loop.time()
            self.checker.controller_presence(now, self._electors(), limit_s)
            self.checker.partition_leaders(
                now,
                self._registered_and_reaching(),
                LEADER_LIMIT_S,
                self.brokers,
                network_whole=not self.network.faults.cut,
            )

    def _registered_and_reaching(self) -> set[int]:
        """The brokers a controller can count on: alive, registered on their current session,
        reaching ZooKeeper."""
        live = set()
        for broker_id, (_, broker) in self.brokers.items():
            node = self.zk.brokers.get(broker_id)
            if (
                broker.alive
                and broker.started
                and broker.store.reachable.is_set()
                and not broker.store.expired
                and node is not None
                and node.owner == broker.store.session
            ):
                live.add(broker_id)
        return live

    def _electors(self) -> list[int]:
        """The brokers that could elect themselves controller now."""
        electors = []
        for broker_id, (_, broker) in sorted(self.brokers.items()):
            store = broker.store
            node = self.zk.brokers.get(broker_id)
            if (
                broker.alive
                and broker.started
                and store.reachable.is_set()
                and not store.expired
                and node is not None
                and node.owner == store.session
                and not broker.controller.event_manager.shutting_down
            ):
                electors.append(broker_id)
        return electors

    async def _partition(self) -> bool:
        live = self._live()
        if len(live) <= 2:
            return False
        side = {self.rng.choice(live)}
        if self.rng.random() < 0.5:
            # Two brokers that cannot reach each other, while both reach every other broker
            # and ZooKeeper (a follower cut from its leader, a broker from the controller).
            rest = {self.rng.choice([b for b in self.broker_ids if b not in side])}
            self.trace(f"partition {sorted(side)} from broker {min(rest)} for a while")
        else:
            rest = set(self.broker_ids) - side
            self.trace(f"partition {sorted(side)} from the other brokers for a while")
        self.network.partition(side, rest)
        self._later(self.rng.uniform(1.0, 8.0), self._heal_network)
        return True

    async def _zk_partition(self) -> bool:
        live = [b for b in self._live() if self.brokers[b][1].started]
        if not live:
            return False
        victim = self._pick_victim(live)
        _, broker = self.brokers[victim]
        duration = self.rng.uniform(1.0, 12.0)
        self.trace(f"cut broker {victim} off from ZooKeeper for {duration:.1f} s")
        broker.cut_off_from_zookeeper()
        self._later(duration, broker.reconnect_to_zookeeper)
        return True

    async def _zk_outage(self) -> bool:
        live = [b for b in self._live() if self.brokers[b][1].started]
        if not live:
            return False
        duration = self.rng.uniform(1.0, 12.0)
        self.trace(f"ZooKeeper unreachable from every broker for {duration:.1f} s")
        self._zookeeper_down = True
        for broker_id in live:
            self.brokers[broker_id][1].cut_off_from_zookeeper()
        self._later(duration, self._heal_zookeeper)
        return True

    def _heal_zookeeper(self) -> None:
        self._zookeeper_down = False
        for _, broker in self.brokers.values():
            broker.reconnect_to_zookeeper()

    async def _lost_reply(self) -> bool:
        """For a while, half of a broker's fenced ZooKeeper writes (half the time the
        controller's) are applied and then answered as failed, as the real store answers a
        write whose reply was lost and whose retry it could not recognise as its own: the
        worst case of a connection that drops after ZooKeeper applied a write."""
        live = [b for b in self._live() if self.brokers[b][1].started]
        if not live:
            return False
        victim = self._pick_victim(live)
        store = self.brokers[victim][1].store
        duration = self.rng.uniform(1.0, 5.0)
        self.trace(f"lose the replies to half of broker {victim}'s fenced writes for {duration:.1f} s")
        store.lose_replies = lambda: self.rng.random() < 0.5
        self._later(duration, lambda: self._replies_back(store))
        return True

    def _replies_back(self, store: FakeClusterStore) -> None:
        store.lose_replies = None

    async def _drop(self) -> bool:
        self.trace("lose 5% of messages for a while")
        self.network.faults.drop_rate = 0.05
        self._later(self.rng.uniform(1.0, 5.0), self._heal_network)
        return True

    async def _slow(self) -> bool:
        self.trace("slow the network for a while")
        self.network.faults.max_delay_s = 0.5
        self._later(self.rng.uniform(1.0, 5.0), self._heal_network)
        return True

    async def _create(self) -> bool:
        await self._create_topic()
        return True

    async def _delete(self) -> bool:
        if len(self._topics) <= 1:
            return False
        topic = self._topics.pop(self.rng.randrange(len(self._topics)))
        self.trace(f"delete topic {topic}")
        self._admin(DeleteTopicsRequest(topic_names=[topic], timeout_ms=5000))
        return True

    async def _reassign(self) -> bool:
        controller = self._controller()
        if not self._topics or controller is None:
            return False
        topic = self.rng.choice(self._topics)
        partition = self.rng.randrange(2)
        target = self.rng.sample(self.broker_ids, 3)
        self.trace(f"reassign {topic}-{partition} to {target}")
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=5000,
            topics=[
                ReassignableTopic(
                    name=topic, partitions=[ReassignablePartition(partition_index=partition, replicas=target)]
                )
            ],
        )
        self._client(self._send(controller, request))
        return True

    async def _elect(self) -> bool:
        if not self._topics:
            return False
        topic = self.rng.choice(self._topics)
        kind = ElectionType.UNCLEAN if self.rng.random() < 0.2 else ElectionType.PREFERRED
        self.trace(f"{kind.name.lower()} election for {topic}")
        self._admin(
            ElectLeadersRequest(
                election_type=int(kind),
                topic_partitions=[ElectLeadersTopicPartitions(topic=topic, partitions=[0, 1])],
                timeout_ms=5000,
            )
        )
        return True

    def _pick_victim(self, live: list[int]) -> int:
        """Half the time the controller, the broker whose loss matters most."""
        controller = self._controller()
        if controller in live and self.rng.random() < 0.5:
            assert controller is not None
            return controller
        return self.rng.choice(live)

    def _heal_network(self) -> None:
        self.trace("heal the network")
        self.network.heal()

    def _later(self, delay_s: float, callback: Callable[[], None]) -> None:
        assert self._loop is not None
        self._loop.call_later(delay_s, callback)

    async def _create_topic(self) -> None:
        # Never a name used before: the checker lets a deleted topic's partitions off for good.
        self._created += 1
        name = f"t{self._created}"
        self._topics.append(name)
        self.trace(f"create topic {name}")
        self._admin(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name=name,
                        num_partitions=2,
                        replication_factor=3,
                        configs={"min.insync.replicas": "2"},
                    )
                ],
            )
        )

    def _admin(self, request: Request) -> None:
        """An admin request to a live broker, as a client would send it."""
        live = self._live()
        if live:
            self._client(self._send(self.rng.choice(live), request))

    async def _send(self, broker_id: int, request: Request) -> Response | None:
        try:
            return await self.network.request(CLIENT, endpoint_of(broker_id), request, 10.0, "sim-client")
        except WireError:
            return None

    # --- the workload ---

    async def _produce(self) -> None:
        """One acks=all record to a partition's leader, as ZooKeeper names it; an answer
        without error is an acknowledgement the checker holds the cluster to."""
        if not self._topics:
            return
        tp = TopicPartition(self.rng.choice(self._topics), self.rng.randrange(2))
        found = self.zk.partition_states.get(tp)
        if found is None or found[0].leader < 0:
            return
        self._produced += 1
        value = f"{self.config.seed}:{self._produced}".encode()
        batch = records.build_batch([(None, value)], timestamp=0)
        unclean_elections = self.checker.unclean_elections(tp)
        request = ProduceRequest(
            acks=-1,
            timeout_ms=3000,
            topic_data=[
                ProduceTopicData(
                    name=tp.topic, partition_data=[ProducePartitionData(index=tp.partition, records=batch)]
                )
            ],
        )
        response = await self._send(found[0].leader, request)
        if not isinstance(response, ProduceResponse):
            return
        for topic in response.responses:
            for answer in topic.partition_responses:
                if answer.error_code == ErrorCode.NONE:
                    self.trace(f"acknowledged {tp} offset {answer.base_offset}")
                    self.checker.acknowledged(Ack(tp, answer.base_offset, value, unclean_elections))

    def _client(self, work: Coroutine[Any, Any, object]) -> asyncio.Task[Any]:
        assert self._loop is not None
        task = self._loop.create_task(work)
        self._client_tasks.add(task)
        task.add_done_callback(self._client_tasks.discard)
        return task

    # --- healing ---

    async def _heal_and_settle(self) -> None:
        self.trace("heal everything")
        self._heal_network()
        for _, broker in self.brokers.values():
            broker.reconnect_to_zookeeper(every_cut=True)
            broker.store.lose_replies = None
        # Controlled shutdowns under way end first: each within its deadline, or the stop
        # hangs, which is a violation too (a broker that never stops never comes back).
        if self._stopping:
            _, hung = await asyncio.wait(self._stopping, timeout=self.config.settle_s)
            if hung:
                raise Violation("converges once healed", f"{len(hung)} controlled shutdown(s) never ended")
        assert self._loop is not None
        lost_tails = [b for b in self._down() if self.checker.named_from_before_its_loss(b)]
        for broker_id in self._down():
            if broker_id not in lost_tails:
                await self._start(broker_id)
        deadline = self._loop.time() + self.config.settle_s / 2
        while lost_tails and self._loop.time() < deadline:
            await asyncio.sleep(0.5)
            self.checker.check(self.brokers)
            lost_tails = [b for b in lost_tails if self.checker.named_from_before_its_loss(b)]
        if lost_tails:
            self.trace(f"brokers {lost_tails} start while ISRs still name them from before their power loss")
        for broker_id in self._down():
            await self._start(broker_id)
        deadline = self._loop.time() + self.config.settle_s
        missing: str | None = "not checked yet"
        while self._loop.time() < deadline:
            await asyncio.sleep(0.5)
            self.checker.check(self.brokers)
            missing = self.checker.settled(self.brokers)
            if missing is None:
                break
        if missing is not None:
            raise Violation("converges once healed", f"after {self.config.settle_s:g} s: {missing}")
        self.checker.final(self.brokers)
        self.trace("settled")


class _OperatorWatch:
    """The operator's watch on `/controller`: it only notes a creation."""

    def __init__(self, created: asyncio.Event) -> None:
        self._created = created

    def controller_changed(self) -> None:
        self._created.set()

    def controller_deleted(self) -> None:
        pass


def run_seed(config: RunConfig) -> RunResult:
    """One seed, with the brokers' logging off (a run logs thousands of lines) but for their
    errors, which go to the checker alone: one logged with an exception is a violation."""
    simulation = Simulation(config)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers, root.level = [UnexpectedErrors(simulation.checker)], logging.ERROR
    logging.disable(logging.WARNING)
    try:
        return simulation.run()
    finally:
        logging.disable(logging.NOTSET)
        root.handlers, root.level = handlers, level
