"""The partition state machine (spec §5.1): NonExistent, New, Online, Offline.

Moving a partition Online either initialises it (from New: leader = first live replica,
ISR = live replicas, leader epoch 0) or elects a leader with a strategy (from Online or
Offline). Every state-znode write is fenced by the controller epoch and conditional on the
partition epoch; a conflict re-reads and retries that partition. An invalid transition is
logged and leaves the partition as it was. Each call sends its own request batch. Every
change goes to the state-change log, with the controller epoch, as Kafka's does.

A state znode whose create failed is read back: one written at this controller epoch is this
controller's own create (its answer lost) and is taken as the initial state; one written at
another epoch makes the partition an existing one, whose leader is elected from it as for an
Offline partition; a missing one is created again later (initialization_retries.py). Kafka
leaves such a partition New, offline until something else moves it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from actors.base.loop_slices import SLICE, each, sliced, turn_if_held
from actors.base.ports import (
    ClusterStore,
    LeaderAndIsr,
    LeadershipInfo,
    PartitionStateConflict,
    TopicPartition,
)
from actors.base.state_change_log import StateChangeLogger, describe_leader_and_isr
from actors.controller.context import ControllerContext, PartitionState
from actors.controller.elections import (
    ElectionResult,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from actors.controller.initialization_retries import InitializationRetries
from actors.controller.request_batch import RequestBatch

log = logging.getLogger(__name__)

UNCLEAN_CONFIG = "unclean.leader.election.enable"

_VALID_FROM = {
    PartitionState.NEW: {PartitionState.NON_EXISTENT},
    PartitionState.ONLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.OFFLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.NON_EXISTENT: {PartitionState.OFFLINE},
}


async def cached_or_read(
    context: ControllerContext, store: ClusterStore, partitions: list[TopicPartition]
) -> dict[TopicPartition, LeadershipInfo]:
    """The controller's cached state, read from ZooKeeper only where it has none. Every write
    is conditional on the cached partition epoch and fenced by the controller epoch, so a
    stale cache costs a conflict and a re-read, never a wrong write."""
    cached = {tp: context.leadership[tp] async for tp in each(partitions) if tp in context.leadership}
    missing = [tp async for tp in each(partitions) if tp not in cached]
    if missing:
        cached.update(await store.partition_states(missing))
    return cached


@dataclasses.dataclass
class WrittenStates:
    """What a batch of conditional state writes came to: the states written (now in the
    context's cache), the partitions whose version moved (re-read and retry), the failures."""

    written: dict[TopicPartition, LeadershipInfo] = dataclasses.field(default_factory=dict)
    conflicts: list[TopicPartition] = dataclasses.field(default_factory=list)
    failed: dict[TopicPartition, Exception] = dataclasses.field(default_factory=dict)


async def write_states(
    context: ControllerContext, store: ClusterStore, updates: dict[TopicPartition, LeaderAndIsr]
) -> WrittenStates:
    """Write `updates` fenced by the controller epoch, each conditional on its partition
    epoch, and cache what was written."""
    outcome = WrittenStates()
    if not updates:
        return outcome
    answers = await store.update_partition_states(updates, context.epoch, context.epoch_zk_version)
    async for tp, result in each(answers.items()):
        if isinstance(result, PartitionStateConflict):
            outcome.conflicts.append(tp)
        elif isinstance(result, Exception):
            outcome.failed[tp] = result
        else:
            info = LeadershipInfo(result, context.epoch)
            context.leadership[tp] = info
            outcome.written[tp] = info
    if outcome.conflicts:
        await _take_own_writes(context, store, updates, outcome)
    return outcome


async def _take_own_writes(
    context: ControllerContext,
    store: ClusterStore,
    updates: dict[TopicPartition, LeaderAndIsr],
    outcome: WrittenStates,
) -> None:
    """A conflict whose znode holds, one version on, exactly the state this controller epoch
    wrote is this controller's own write answered as a conflict (its reply lost, its retry
    refused): written, not to be elected again. Left as a conflict, an ISR change would be
    refused to its leader although it is in ZooKeeper, and the leader would wait for a
    LeaderAndIsr that never comes."""
    found = await store.partition_states(outcome.conflicts)
    conflicts = []
    for tp in outcome.conflicts:
        info, intended = found.get(tp), updates[tp]
        if (
            info is not None
            and info.controller_epoch == context.epoch
            and info.leader_and_isr == intended._replace(partition_epoch=intended.partition_epoch + 1)
        ):
            context.leadership[tp] = info
            outcome.written[tp] = info
        else:
            conflicts.append(tp)
    outcome.conflicts = conflicts


class StateChangeFailed(Exception):
    pass


class Strategy(Enum):
    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled shutdown"


PartitionResult = LeaderAndIsr | Exception


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        store: ClusterStore,
        new_batch: Callable[[], RequestBatch],
        *,
        unclean_default: bool,
        on_unclean_election: Callable[[TopicPartition], None],
        state_change_log: StateChangeLogger | None = None,
        retries: InitializationRetries | None = None,
        on_initialization_failures: Callable[[int], None] | None = None,
    ) -> None:
        self._context = context
        self._retries = retries
        self._on_initialization_failures = on_initialization_failures
        self._state_change_log = state_change_log or StateChangeLogger.for_controller(
            -1, lambda: context.epoch
        )
        self._store = store
        self._new_batch = new_batch
        self._unclean_default = unclean_default
        self._on_unclean_election = on_unclean_election

    def state(self, tp: TopicPartition) -> PartitionState:
        return self._context.partition_states.get(tp, PartitionState.NON_EXISTENT)

    async def startup(self) -> None:
        """Set every known partition's state from its leadership (spec §5.1 startup), in
        slices between which the loop turns (actors/base/loop_slices.py), all of them
        handed to the map at once. It goes over the leadership's keys rather than building
        every partition's name again: at 1M partitions that alone took half a second."""
        context = self._context
        leadership, assignments = context.leadership, context.assignments
        leaders = {b for b in context.live_brokers if b not in context.shutting_down}
        checks_dirs = bool(context.replicas_on_offline_dirs)
        # Online is the usual answer: the loop only finds the exceptions, and the map of
        # every partition is made from the leadership's keys in one call.
        exceptions: dict[TopicPartition, PartitionState | None] = {}
        topic, assigned = None, {}
        async for items in sliced(list(leadership.items())):
            for tp, info in items:
                if tp.topic != topic:  # the leadership comes topic by topic
                    topic, assigned = tp.topic, assignments.get(tp.topic, {})
                if tp.partition not in assigned:
                    exceptions[tp] = None  # a state read for a partition no longer assigned
                    continue
                leader = info.leader_and_isr.leader
                online = leader in leaders
                if online and checks_dirs:
                    online = context.is_replica_online(leader, tp)
                if not online:
                    exceptions[tp] = PartitionState.OFFLINE
        states = dict.fromkeys(leadership, PartitionState.ONLINE)
        for tp, exception in exceptions.items():
            if exception is None:
                del states[tp]
            else:
                states[tp] = exception
        not_online = [tp for tp, exception in exceptions.items() if exception is not None]
        if len(states) < sum(map(len, assignments.values())):  # partitions with no state yet
            async for partitions in sliced(context.all_partitions()):
                for tp in partitions:
                    if tp not in states:
                        states[tp] = PartitionState.NEW
                        not_online.append(tp)
        context.partition_states.load(states, not_online=not_online)

    async def trigger_online_partition_state_change(self) -> dict[TopicPartition, PartitionResult]:
        """Every New or Offline partition to Online, by offline election (topic config decides
        on unclean election), except those of topics whose deletion may proceed (see
        `ControllerContext.topics_whose_deletion_may_proceed`)."""
        context = self._context
        deleting = context.topics_whose_deletion_may_proceed()
        # The map keeps them: a pass over those without a leader, not over every partition.
        candidates = [tp for tp in context.partition_states.new_or_offline() if tp.topic not in deleting]
        return await self.handle_state_changes(candidates, PartitionState.ONLINE, Strategy.OFFLINE)

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: Strategy | None = None,
        *,
        allow_unclean: bool = False,
    ) -> dict[TopicPartition, PartitionResult]:
        batch = self._new_batch()
        valid = []
        async for tp in each(partitions):
            if self.state(tp) in _VALID_FROM[target]:
                valid.append(tp)
            else:
                log.error(
                    "invalid partition state change of %s from %s to %s", tp, self.state(tp).name, target.name
                )
        results: dict[TopicPartition, PartitionResult] = {}
        before = {tp: self.state(tp) async for tp in each(valid)}
        if target == PartitionState.ONLINE:
            new = [tp for tp, state in before.items() if state == PartitionState.NEW]
            elect = [tp for tp, state in before.items() if state != PartitionState.NEW]
            if new:
                results.update(await self._initialize(batch, new))
            if elect:
                if strategy is None:
                    raise ValueError(
                        "moving an Online or Offline partition Online needs an election strategy"
                    )
                results.update(await self._elect(batch, elect, strategy, allow_unclean))
            async for tp, result in each(results.items()):
                if isinstance(result, LeaderAndIsr):
                    self._context.partition_states[tp] = PartitionState.ONLINE
            await self._log_online(before, results)
        else:
            async for tp in each(valid):
                self._context.partition_states[tp] = target
            await self._log_changes(before, target)
        await batch.send()
        return results

    async def _log_online(
        self,
        before: Mapping[TopicPartition, PartitionState],
        results: Mapping[TopicPartition, PartitionResult],
    ) -> None:
        online = PartitionState.ONLINE.kafka_name
        await self._state_change_log.log_in_slices(
            logging.INFO,
            (
                f"Changed partition {tp} from {before[tp].kafka_name} to {online} with state "
                f"{describe_leader_and_isr(result)}"
                for tp, result in results.items()
                if isinstance(result, LeaderAndIsr)
            ),
        )
        self._state_change_log.log(
            logging.ERROR,
            (
                f"Failed to change state of partition {tp} from {before[tp].kafka_name} to {online}: {result}"
                for tp, result in results.items()
                if not isinstance(result, LeaderAndIsr)
            ),
        )

    async def _log_changes(
        self, before: Mapping[TopicPartition, PartitionState], target: PartitionState
    ) -> None:
        context = self._context
        if target == PartitionState.NEW:
            lines = (
                f"Changed partition {tp} state from {state.kafka_name} to {target.kafka_name} with assigned "
                f"replicas {','.join(map(str, context.replicas(tp)))}"
                for tp, state in before.items()
            )
        else:
            lines = (
                f"Changed partition {tp} state from {state.kafka_name} to {target.kafka_name}"
                for tp, state in before.items()
            )
        await self._state_change_log.log_in_slices(logging.INFO, lines)

    async def _initialize(
        self, batch: RequestBatch, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, PartitionResult]:
        results: dict[TopicPartition, PartitionResult] = {}
        states = {}
        for tp in partitions:
            live = tuple(r for r in self._context.replicas(tp) if self._context.is_replica_online(r, tp))
            if not live:
                log.warning("cannot initialise %s: no assigned replica is alive", tp)
                results[tp] = StateChangeFailed(f"no assigned replica of {tp} is alive")
                continue
            states[tp] = LeaderAndIsr(live[0], 0, live)
        context = self._context
        written = await self._store.create_partition_states(states, context.epoch, context.epoch_zk_version)
        failed: dict[TopicPartition, Exception] = {}
        for tp, result in written.items():
            if isinstance(result, Exception):
                failed[tp] = result
                continue
            self._initialized(batch, tp, LeadershipInfo(result, context.epoch))
            results[tp] = result
        if failed:
            results.update(await self._after_failed_creates(batch, failed))
        return results

    def _initialized(self, batch: RequestBatch, tp: TopicPartition, info: LeadershipInfo) -> None:
        context = self._context
        context.leadership[tp] = info
        batch.add_leader_and_isr(info.leader_and_isr.isr, tp, info, context.assignment(tp), is_new=True)
        if self._retries is not None:
            self._retries.succeeded((tp,))

    async def _after_failed_creates(
        self, batch: RequestBatch, failed: dict[TopicPartition, Exception]
    ) -> dict[TopicPartition, PartitionResult]:
        """Read back the state znodes whose create failed: adopt the ones this controller
        epoch wrote, elect from the ones another wrote, create the missing ones again later."""
        context = self._context
        if self._on_initialization_failures is not None:
            self._on_initialization_failures(len(failed))
        self._state_change_log.log(
            logging.WARNING,
            (
                f"Failed to create the state znode of partition {tp}: {error!r}"
                for tp, error in failed.items()
            ),
        )
        found = await self._store.partition_states(sorted(failed))
        results: dict[TopicPartition, PartitionResult] = {}
        existing = []
        for tp, info in found.items():
            if info.controller_epoch == context.epoch:
                # This controller's own create, applied though its answer was lost.
                self._state_change_log.info(
                    f"Partition {tp}'s state znode holds {describe_leader_and_isr(info.leader_and_isr)}, "
                    "written at this controller epoch: taken as its initial state"
                )
                self._initialized(batch, tp, info)
                results[tp] = info.leader_and_isr
            else:
                self._state_change_log.info(
                    f"Partition {tp}'s state znode was written at controller epoch {info.controller_epoch}: "
                    "electing its leader from it"
                )
                context.leadership[tp] = info
                context.partition_states[tp] = PartitionState.OFFLINE
                existing.append(tp)
        if existing:
            results.update(await self._elect(batch, existing, Strategy.OFFLINE, False))
            if self._retries is not None:
                # Existing partitions now: an Offline one waits for a replica, as any other.
                self._retries.succeeded(existing)
        missing = {tp: error for tp, error in failed.items() if tp not in found}
        if missing:
            results.update(missing)
            self._retry_later(missing)
        return results

    def _retry_later(self, missing: dict[TopicPartition, Exception]) -> None:
        if self._retries is None:
            for tp, error in missing.items():
                log.warning("cannot initialise %s: %s", tp, error)
            return
        delay_ms = self._retries.failed(missing) * 1000
        log.warning("cannot initialise %d partition(s) yet; trying again in %.0f ms", len(missing), delay_ms)
        self._state_change_log.log(
            logging.WARNING,
            (f"Retrying initialization of partition {tp} in {delay_ms:.0f} ms" for tp in sorted(missing)),
        )

    async def retry_initialization(self) -> dict[TopicPartition, PartitionResult]:
        """The retry event: every partition whose create failed and that is still New to
        Online, but for those of topics being deleted."""
        if self._retries is None:
            return {}
        deleting = self._context.topics_whose_deletion_may_proceed()
        due = [
            tp
            for tp in self._retries.take_due()
            if self.state(tp) == PartitionState.NEW and tp.topic not in deleting
        ]
        results: dict[TopicPartition, PartitionResult] = {}
        if due:
            self._state_change_log.log(
                logging.INFO, (f"Retrying initialization of partition {tp}" for tp in due)
            )
            results = await self.handle_state_changes(due, PartitionState.ONLINE, Strategy.OFFLINE)
        self._retries.round_done()
        return results

    async def _elect(
        self, batch: RequestBatch, partitions: list[TopicPartition], strategy: Strategy, allow_unclean: bool
    ) -> dict[TopicPartition, PartitionResult]:
        context = self._context
        results: dict[TopicPartition, PartitionResult] = {}
        remaining = partitions
        current = await cached_or_read(self._context, self._store, remaining)
        while remaining:
            unclean = await self._unclean_allowed(remaining, current, strategy, allow_unclean)
            updates: dict[TopicPartition, LeaderAndIsr] = {}
            chosen: dict[TopicPartition, ElectionResult] = {}
            for count, tp in enumerate(remaining, 1):
                if count % SLICE == 0:
                    await turn_if_held()  # a broker's controlled shutdown: every partition it leads
                info = current.get(tp)
                if info is None:
                    results[tp] = StateChangeFailed(f"LeaderAndIsr information of {tp} doesn't exist")
                elif info.controller_epoch > context.epoch:
                    results[tp] = StateChangeFailed(
                        f"{tp} was written by a newer controller ({info.controller_epoch})"
                    )
                else:
                    election = self._run(strategy, tp, info.leader_and_isr, tp.topic in unclean)
                    if election is None:
                        log.warning("no leader for %s by %s election", tp, strategy.value)
                        results[tp] = StateChangeFailed(f"no eligible leader for {tp}")
                    else:
                        chosen[tp] = election
                        state = info.leader_and_isr.new_leader_and_isr(election.leader, election.isr)
                        updates[tp] = state
            outcome = await write_states(context, self._store, updates)
            remaining = outcome.conflicts
            results.update(outcome.failed)
            async for tp, info in each(outcome.written.items()):
                batch.add_leader_and_isr(chosen[tp].recipients, tp, info, context.assignment(tp))
                if chosen[tp].unclean:
                    log.warning(
                        "unclean election: %s led by %d, an out-of-sync replica",
                        tp,
                        info.leader_and_isr.leader,
                    )
                    self._on_unclean_election(tp)
                results[tp] = info.leader_and_isr
            if remaining:
                current = await self._store.partition_states(remaining)
        return results

    async def _unclean_allowed(
        self,
        partitions: list[TopicPartition],
        current: dict[TopicPartition, LeadershipInfo],
        strategy: Strategy,
        forced: bool,
    ) -> set[str]:
        """Topics whose partitions may elect uncleanly: consulted only for partitions with
        no live ISR member, from the topic's override over the broker default (spec §6)."""
        if strategy != Strategy.OFFLINE:
            return set()
        online = self._context.is_replica_online
        needing = {
            tp.topic
            async for tp in each(partitions)
            if tp in current and not any(online(r, tp) for r in current[tp].leader_and_isr.isr)
        }
        if forced or not needing:
            return needing if forced else set()
        configs = await self._store.topic_configs(needing)
        default = "true" if self._unclean_default else "false"
        return {
            t for t in needing if configs.get(t, {}).get(UNCLEAN_CONFIG, default).strip().lower() == "true"
        }

    def _run(
        self, strategy: Strategy, tp: TopicPartition, state: LeaderAndIsr, unclean: bool
    ) -> ElectionResult | None:
        context = self._context
        assignment = context.assignment(tp)
        online = context.online_replica_ids(tp)
        match strategy:
            case Strategy.OFFLINE:
                return offline_election(assignment.replicas, state.isr, online, unclean_allowed=unclean)
            case Strategy.REASSIGN:
                target = tuple(r for r in assignment.replicas if r not in assignment.removing)
                return reassignment_election(target, state.isr, online)
            case Strategy.PREFERRED:
                return preferred_election(assignment.replicas, state.isr, online)
            case Strategy.CONTROLLED_SHUTDOWN:
                return controlled_shutdown_election(
                    assignment.replicas, state.isr, context.live_or_shutting_down_ids(), context.shutting_down
                )
