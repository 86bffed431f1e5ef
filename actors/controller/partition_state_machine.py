"""The partition state machine (spec §5.1): NonExistent, New, Online, Offline.

Moving a partition Online either initialises it (from New: leader = first live replica,
ISR = live replicas, leader epoch 0) or elects a leader with a strategy (from Online or
Offline). Every state-znode write is fenced by the controller epoch and conditional on the
partition epoch; a conflict re-reads and retries that partition. An invalid transition is
logged and leaves the partition as it was. Each call sends its own request batch. Every
change goes to the state-change log, with the controller epoch, as Kafka's does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from actors.controller.context import ControllerContext, PartitionState
from actors.controller.elections import (
    ElectionResult,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from actors.controller.request_batch import RequestBatch
from actors.ports import ClusterStore, LeaderAndIsr, LeadershipInfo, PartitionStateConflict, TopicPartition
from actors.state_change_log import StateChangeLogger, describe_leader_and_isr

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
    cached = {tp: context.leadership[tp] for tp in partitions if tp in context.leadership}
    missing = [tp for tp in partitions if tp not in cached]
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
    for tp, result in (
        await store.update_partition_states(updates, context.epoch, context.epoch_zk_version)
    ).items():
        if isinstance(result, PartitionStateConflict):
            outcome.conflicts.append(tp)
        elif isinstance(result, Exception):
            outcome.failed[tp] = result
        else:
            info = LeadershipInfo(result, context.epoch)
            context.leadership[tp] = info
            outcome.written[tp] = info
    return outcome


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
    ) -> None:
        self._context = context
        self._state_change_log = state_change_log or StateChangeLogger.for_controller(
            -1, lambda: context.epoch
        )
        self._store = store
        self._new_batch = new_batch
        self._unclean_default = unclean_default
        self._on_unclean_election = on_unclean_election

    def state(self, tp: TopicPartition) -> PartitionState:
        return self._context.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def startup(self) -> None:
        """Set every known partition's state from its leadership (spec §5.1 startup)."""
        for tp in self._context.all_partitions():
            info = self._context.leadership.get(tp)
            if info is None:
                self._context.partition_states[tp] = PartitionState.NEW
            elif self._context.is_replica_online(info.leader_and_isr.leader, tp):
                self._context.partition_states[tp] = PartitionState.ONLINE
            else:
                self._context.partition_states[tp] = PartitionState.OFFLINE

    async def trigger_online_partition_state_change(self) -> dict[TopicPartition, PartitionResult]:
        """Every New or Offline partition to Online, by offline election (topic config decides
        on unclean election), except those of topics whose deletion may proceed (see
        `ControllerContext.topics_whose_deletion_may_proceed`)."""
        context = self._context
        deleting = context.topics_whose_deletion_may_proceed()
        candidates = [
            tp
            for tp, state in context.partition_states.items()
            if state in (PartitionState.NEW, PartitionState.OFFLINE) and tp.topic not in deleting
        ]
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
        for tp in partitions:
            if self.state(tp) in _VALID_FROM[target]:
                valid.append(tp)
            else:
                log.error(
                    "invalid partition state change of %s from %s to %s", tp, self.state(tp).name, target.name
                )
        results: dict[TopicPartition, PartitionResult] = {}
        before = {tp: self.state(tp) for tp in valid}
        if target == PartitionState.ONLINE:
            new = [tp for tp in valid if self.state(tp) == PartitionState.NEW]
            elect = [tp for tp in valid if self.state(tp) != PartitionState.NEW]
            if new:
                results.update(await self._initialize(batch, new))
            if elect:
                if strategy is None:
                    raise ValueError(
                        "moving an Online or Offline partition Online needs an election strategy"
                    )
                results.update(await self._elect(batch, elect, strategy, allow_unclean))
            for tp, result in results.items():
                if isinstance(result, LeaderAndIsr):
                    self._context.partition_states[tp] = PartitionState.ONLINE
            self._log_online(before, results)
        else:
            for tp in valid:
                self._context.partition_states[tp] = target
            self._log_changes(before, target)
        await batch.send()
        return results

    def _log_online(
        self,
        before: Mapping[TopicPartition, PartitionState],
        results: Mapping[TopicPartition, PartitionResult],
    ) -> None:
        online = PartitionState.ONLINE.kafka_name
        self._state_change_log.log(
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

    def _log_changes(self, before: Mapping[TopicPartition, PartitionState], target: PartitionState) -> None:
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
        self._state_change_log.log(logging.INFO, lines)

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
        for tp, result in written.items():
            if isinstance(result, Exception):
                log.warning("cannot initialise %s: %s", tp, result)
                results[tp] = result
                continue
            info = LeadershipInfo(result, context.epoch)
            context.leadership[tp] = info
            batch.add_leader_and_isr(result.isr, tp, info, context.assignment(tp), is_new=True)
            results[tp] = result
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
            for tp in remaining:
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
            for tp, info in outcome.written.items():
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
            for tp in partitions
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
