"""Leader elections asked for from outside the controller's own workflows (spec §7.8).

Three triggers, one path: the admin node `/admin/preferred_replica_election` (ZooKeeper
triggered, also read at failover), the ElectLeaders API (admin client, preferred or unclean),
and the auto-rebalance task (`auto.leader.rebalance.enable`). Which partitions to elect is
decided by the pure functions below; the election itself is the partition state machine's,
with the Preferred strategy, or the Offline one with unclean election forced for an admin
UNCLEAN election. Only a ZooKeeper-triggered election touches the node: whatever happens,
it is deleted (fenced) at the end and its watch re-armed by a fresh event.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from actors.base.clock import Cancellable, Clock
from actors.base.loop_slices import turn_if_held
from actors.base.ports import ClusterStore, ControllerMovedError, LeaderAndIsr, TopicPartition
from actors.controller.context import ControllerContext, PartitionState
from actors.controller.events import ElectionTrigger
from actors.controller.partition_state_machine import (
    PartitionResult,
    PartitionStateMachine,
    StateChangeFailed,
    Strategy,
)
from wire.api import ElectionType, ElectLeadersResponse, PartitionElectionResult, ReplicaElectionResult
from wire.errors import ErrorCode, WireError

log = logging.getLogger(__name__)

# Kafka schedules the first auto-rebalance this long after a controller takes over.
FIRST_REBALANCE_DELAY_S = 5.0


@dataclasses.dataclass(frozen=True)
class ElectionOutcome:
    """One partition's answer to an admin election: the new leader, or an error."""

    leader: int = -1
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


# --- decisions (pure) ---


def election_needed(context: ControllerContext, tp: TopicPartition, election_type: ElectionType) -> bool:
    """PREFERRED: the leader is not the first assigned replica. UNCLEAN: there is no live
    leader."""
    info = context.leadership.get(tp)
    if election_type == ElectionType.PREFERRED:
        return info is None or info.leader_and_isr.leader != context.replicas(tp)[0]
    return info is None or not context.is_replica_online(info.leader_and_isr.leader)


@dataclasses.dataclass
class ElectionPlan:
    electable: list[TopicPartition] = dataclasses.field(default_factory=list)
    unknown: list[TopicPartition] = dataclasses.field(default_factory=list)
    deleting: list[TopicPartition] = dataclasses.field(default_factory=list)
    not_needed: list[TopicPartition] = dataclasses.field(default_factory=list)


def plan_election(
    context: ControllerContext, partitions: Iterable[TopicPartition], election_type: ElectionType
) -> ElectionPlan:
    """Sort the partitions asked for: unknown, queued for deletion, already led as wanted,
    and the rest, which are to be elected."""
    plan = ElectionPlan()
    for tp in sorted(set(partitions)):
        if not context.replicas(tp):
            plan.unknown.append(tp)
        elif tp.topic in context.topics_to_be_deleted:
            plan.deleting.append(tp)
        elif not election_needed(context, tp, election_type):
            plan.not_needed.append(tp)
        else:
            plan.electable.append(tp)
    return plan


def rebalance_candidates(context: ControllerContext, imbalance_percentage: int) -> list[TopicPartition]:
    """The auto-rebalance's choice (spec §7.8): group partitions by preferred replica; for
    each broker whose share of partitions led by another broker is strictly greater than
    the threshold, those partitions whose preferred replica is online and in the ISR."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    group_by_preferred_replica(context, context.all_partitions(), by_preferred)
    candidates: list[TopicPartition] = []
    for broker, owned in sorted(by_preferred.items()):
        candidates += broker_rebalance_candidates(context, broker, owned, imbalance_percentage)
    return sorted(candidates)


def group_by_preferred_replica(
    context: ControllerContext,
    partitions: Iterable[TopicPartition],
    by_preferred: dict[int, list[TopicPartition]],
) -> None:
    """Add `partitions` to `by_preferred` under their preferred (first) replica, but those of
    topics queued for deletion."""
    deleting = context.topics_to_be_deleted
    for tp in partitions:
        replicas = context.replicas(tp)
        if replicas and tp.topic not in deleting:
            by_preferred.setdefault(replicas[0], []).append(tp)


def broker_rebalance_candidates(
    context: ControllerContext, broker: int, owned: list[TopicPartition], imbalance_percentage: int
) -> list[TopicPartition]:
    """Of the partitions `broker` prefers, those to move back to it, if its share led by
    others is strictly greater than the threshold."""
    not_led = [
        tp
        for tp in owned
        if (info := context.leadership.get(tp)) is not None and info.leader_and_isr.leader != broker
    ]
    if len(not_led) * 100 <= imbalance_percentage * len(owned):
        return []
    log.info(
        "broker %d leads %d of the %d partitions it prefers; rebalancing",
        broker,
        len(owned) - len(not_led),
        len(owned),
    )
    return [
        tp
        for tp in not_led
        if tp.topic in context.all_topics
        and context.is_replica_online(broker)
        and broker in context.leadership[tp].leader_and_isr.isr
    ]


def outcome_of(result: PartitionResult | None, election_type: ElectionType) -> ElectionOutcome:
    """What an admin election answers for a partition the state machine tried to elect."""
    if isinstance(result, LeaderAndIsr):
        return ElectionOutcome(leader=result.leader)
    if result is None or isinstance(result, StateChangeFailed):
        error = (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type == ElectionType.PREFERRED
            else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
        return ElectionOutcome(error=error, message=str(result) if result else "invalid partition state")
    if isinstance(result, WireError):
        return ElectionOutcome(error=result.error_code, message=result.message)
    return ElectionOutcome(error=ErrorCode.UNKNOWN_SERVER_ERROR, message=repr(result))


def election_response(
    outcomes: dict[TopicPartition, ElectionOutcome], *, every_partition: bool
) -> ElectLeadersResponse:
    """ElectLeaders' answer. Asked for every partition, it leaves out the partitions that
    needed no election, as Kafka's broker does."""
    by_topic: dict[str, list[PartitionElectionResult]] = {}
    for tp, outcome in sorted(outcomes.items()):
        if every_partition and outcome.error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(tp.topic, []).append(
            PartitionElectionResult(
                partition_id=tp.partition, error_code=outcome.error, error_message=outcome.message
            )
        )
    return ElectLeadersResponse(
        replica_election_results=[
            ReplicaElectionResult(topic=topic, partition_result=results)
            for topic, results in by_topic.items()
        ]
    )


def failed_outcomes(
    partitions: Iterable[TopicPartition], error: WireError
) -> dict[TopicPartition, ElectionOutcome]:
    """The same error for every partition asked for (e.g. NOT_CONTROLLER)."""
    return {tp: ElectionOutcome(error=error.error_code, message=error.message) for tp in partitions}


# --- applying them ---


class LeaderElections:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        partitions: PartitionStateMachine,
        rearm_zk_trigger: Callable[[], None],
    ) -> None:
        self._context = context
        self._store = store
        self._partitions = partitions
        self._rearm_zk_trigger = rearm_zk_trigger

    async def on_zk_trigger(self) -> None:
        """`/admin/preferred_replica_election` was created (or is pending at failover):
        elect the named partitions whose leader is not their preferred replica. No node:
        nothing to delete, and the read has armed the watch again."""
        named = await self._store.preferred_replica_election()
        if named is None:
            return
        plan = plan_election(self._context, named or [], ElectionType.PREFERRED)
        for tp in plan.unknown:
            log.info("skipping preferred replica election of %s: it does not exist", tp)
        for tp in plan.deleting:
            log.info("skipping preferred replica election of %s: its topic is queued for deletion", tp)
        for tp in plan.not_needed:
            log.info("preferred replica election of %s not needed: already led by its preferred replica", tp)
        await self.elect(plan.electable, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)

    async def on_admin(
        self, election_type: ElectionType, partitions: frozenset[TopicPartition] | None
    ) -> dict[TopicPartition, ElectionOutcome]:
        """ElectLeaders: a result for every partition asked for (None: every partition)."""
        asked = self._context.all_partitions() if partitions is None else partitions
        plan = plan_election(self._context, asked, election_type)
        outcomes = {
            tp: ElectionOutcome(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=f"{tp} does not exist")
            for tp in plan.unknown
        }
        for tp in plan.deleting:
            outcomes[tp] = ElectionOutcome(
                error=ErrorCode.INVALID_TOPIC_EXCEPTION, message=f"topic {tp.topic} is being deleted"
            )
        for tp in plan.not_needed:
            outcomes[tp] = ElectionOutcome(
                error=ErrorCode.ELECTION_NOT_NEEDED, message="leader election not needed for topic partition"
            )
        results = await self.elect(plan.electable, election_type, ElectionTrigger.ADMIN_CLIENT_TRIGGERED)
        for tp in plan.electable:
            outcomes[tp] = outcome_of(results.get(tp), election_type)
        return outcomes

    async def on_auto_rebalance(self, imbalance_percentage: int) -> None:
        # rebalance_candidates, its passes over every partition in slices between which the
        # loop turns (actors/base/loop_slices.py): at 200k partitions each takes a tenth of a second.
        context = self._context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for topic, assignment in list(context.assignments.items()):
            await turn_if_held()
            group_by_preferred_replica(context, (TopicPartition(topic, p) for p in assignment), by_preferred)
        candidates: list[TopicPartition] = []
        for broker, owned in sorted(by_preferred.items()):
            await turn_if_held()
            candidates += broker_rebalance_candidates(context, broker, owned, imbalance_percentage)
        candidates.sort()
        if candidates:
            await self.elect(candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED)

    async def elect(
        self, partitions: list[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> dict[TopicPartition, PartitionResult]:
        """Kafka's onReplicaElection: elect, and for a ZooKeeper trigger always delete the
        node and re-arm its watch, whatever the outcome."""
        try:
            if not partitions:
                return {}
            log.info(
                "%s election of %d partitions by %s",
                election_type.name.lower(),
                len(partitions),
                trigger.value,
            )
            if election_type == ElectionType.PREFERRED:
                strategy, unclean = Strategy.PREFERRED, False
            else:
                # Only an admin asking for it forces unclean election.
                strategy, unclean = Strategy.OFFLINE, trigger == ElectionTrigger.ADMIN_CLIENT_TRIGGERED
            try:
                return await self._partitions.handle_state_changes(
                    partitions, PartitionState.ONLINE, strategy, allow_unclean=unclean
                )
            except ControllerMovedError:
                raise
            except Exception as e:
                # Any other error fails every partition of the call (spec §5.1).
                log.error(
                    "%s election of %d partitions failed: %r", election_type.name.lower(), len(partitions), e
                )
                return {tp: e for tp in partitions}
        finally:
            if trigger != ElectionTrigger.ADMIN_CLIENT_TRIGGERED:
                self._log_preferred_outcomes(partitions)
            if trigger == ElectionTrigger.ZK_TRIGGERED:
                await self._store.delete_preferred_replica_election(self._context.epoch_zk_version)
                self._rearm_zk_trigger()

    def _log_preferred_outcomes(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            info = self._context.leadership.get(tp)
            leader = -1 if info is None else info.leader_and_isr.leader
            preferred = next(iter(self._context.replicas(tp)), -1)
            if leader == preferred:
                log.info("%s completed preferred replica leader election: new leader is %d", tp, leader)
            else:
                log.warning(
                    "%s failed to complete preferred replica leader election to %d: leader is still %d",
                    tp,
                    preferred,
                    leader,
                )


class AutoRebalanceTask:
    """Kafka's scheduled auto-leader-rebalance task: after a delay, enqueue its event once.
    The controller reschedules it each time the event is processed, and cancels it when it
    resigns."""

    def __init__(self, clock: Clock, enqueue: Callable[[], None]) -> None:
        self._clock = clock
        self._enqueue = enqueue
        self._timer: Cancellable | None = None

    @property
    def scheduled(self) -> bool:
        return self._timer is not None

    def schedule(self, delay_s: float) -> None:
        self.cancel()
        self._timer = self._clock.call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._enqueue()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
