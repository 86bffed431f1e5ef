"""What must hold after every step of a simulation, and once it has healed.

After every step:
- one active controller per controller epoch;
- every fenced ZooKeeper write comes from the session that holds the current controller
  epoch, and a partition state written carries that epoch;
- each partition's leader is in its ISR, and its leader epoch never goes back;
- no broker applies a LeaderAndIsr older than one it applied (per incarnation);
- no event is lost from a controller's queue: each one put is still queued or spent;
- a live cluster has a controller: `/controller` is never absent for longer than the session
  timeout plus one second while a broker could elect itself (alive, registered on its current
  session, reaching ZooKeeper, its controller not shut down);
- every partition of a topic gets a leader within a bounded time while a replica that could
  lead it is live (registered on its current session and reaching ZooKeeper): its state znode
  names a live leader, which leads it at that leader epoch (while the network between the
  brokers is whole: a LeaderAndIsr waits out a partition); any live assigned replica could lead
  a partition with no state yet, a live ISR member one with a state; a partition of a topic
  marked for deletion is let off;
- no unexpected error: nothing the brokers run dies of, or logs with, an exception they did
  not expect (a `log.exception`, or a task or callback whose error reached the event loop);
- an acknowledged acks=all write is on every member of the partition's ISR, at its offset
  (a write sent before an unclean election of its partition is let off: losing it is what
  that election means; writes sent after it are held to the rule again);
- with the warm standby on, every live broker's standby view that has applied the newest
  change record equals ZooKeeper's partition states;
- the active controller's offline and imbalanced partition gauges, and the partitions it
  keeps as new or offline for its elections, kept as its maps change, equal a pass over every
  partition.

Once healed (every broker up, the network whole), within a bounded simulated time: one
controller that every broker knows, every partition led by a live ISR member with a full ISR,
no reassignment or deletion left, the replica managers (leaders and followers) and every
broker's metadata agreeing with ZooKeeper, the replicas' logs equal up to the high watermark,
and every caller of the controller answered.
"""

from __future__ import annotations

import dataclasses
import logging

from actors.base.ports import LeaderAndIsr, LeadershipInfo, TopicPartition
from actors.controller.context import ControllerContext, PartitionState
from actors.controller.event_manager import QueuedEvent
from actors.controller.events import ControllerState
from actors.controller.partition_gauges import has_preferred_leader
from actors.replica.partition import Role
from node.sim.broker import SimBroker
from node.sim.log_store import MemoryLogStore
from node.sim.zookeeper import FakeClusterStore, FakeZooKeeper


class Violation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail

    def __reduce__(self) -> tuple[type[Violation], tuple[str, str]]:
        # Rebuilt from both parts (a worker process hands it over pickled).
        return Violation, (self.invariant, self.detail)


@dataclasses.dataclass(frozen=True)
class Ack:
    tp: TopicPartition
    offset: int
    value: bytes
    # How many unclean elections the partition had had when the write was sent.
    unclean_elections: int = 0


class Checker:
    def __init__(self, zk: FakeZooKeeper, logs: dict[int, MemoryLogStore]) -> None:
        self.zk = zk
        self.logs = logs
        zk.on_fenced_write = self._fenced_write
        zk.on_partition_state = self._partition_state_written
        self._found: list[Violation] = []
        self._controller_of_epoch: dict[int, int] = {}
        self._states: dict[TopicPartition, LeaderAndIsr] = {}
        # Unclean elections per partition, seen write by write (a step can hold several
        # state changes: an ISR that grows, then a leader moved to the new member, is clean).
        self._unclean: dict[TopicPartition, int] = {}
        # (broker incarnation, partition) -> the newest leader epoch it applied.
        self._applied: dict[tuple[int, TopicPartition], int] = {}
        self.acks: list[Ack] = []
        self._deleted: set[str] = set()
        # (broker, partition) -> (log generation, unclean elections, acks checked) for the logs
        # already checked.
        self._checked: dict[tuple[int, TopicPartition], tuple[int, int, int]] = {}
        self._events: dict[int, list[QueuedEvent]] = {}
        # Since when `/controller` has been absent while some broker could elect itself.
        self._absent_since: float | None = None
        # (broker, partition) -> the broker's incarnation that lost its logs' unflushed tail,
        # for every partition it is a replica of: an ISR may name it on the strength of what
        # it fetched before (it was in the ISR, or its leader proposed it and the change
        # landed after the loss, its registration not yet gone). It is held to the
        # acknowledged writes again once that registration is gone and the partition's ISR
        # does not name it (the controller removes a broker that died): from then on it may
        # join only with what its next incarnation fetched (KIP-903).
        self._tail_lost: dict[tuple[int, TopicPartition], int] = {}
        # The czxid of the registration of each broker that lost a tail, while it stands.
        self._lost_registration: dict[int, int] = {}
        # Each broker's current incarnation.
        self._incarnation: dict[int, int] = {}
        # Since when each partition has not been led while a replica that could lead it was live.
        self._leaderless_since: dict[TopicPartition, float] = {}

    # --- observers ---

    def _fenced_write(self, store: FakeClusterStore, controller_epoch: int | None) -> None:
        assert self.zk.epoch is not None
        if store is not self.zk.epoch_owner:
            self._found.append(
                Violation("fenced writes", f"session {store.session} wrote without holding the epoch")
            )
        elif controller_epoch is not None and controller_epoch != self.zk.epoch[0]:
            self._found.append(
                Violation(
                    "fenced writes",
                    f"a state stamped with controller epoch {controller_epoch} at epoch {self.zk.epoch[0]}",
                )
            )

    def _partition_state_written(
        self, tp: TopicPartition, before: LeaderAndIsr | None, after: LeaderAndIsr
    ) -> None:
        """A leader taken from outside the ISR it replaces is an unclean election; so is one
        back from a power loss that an ISR still named from before it (see
        `_lead_after_a_lost_tail`)."""
        if before is not None and after.leader not in (-1, before.leader) and after.leader not in before.isr:
            self._unclean[tp] = self._unclean.get(tp, 0) + 1
        elif after.leader != -1:
            lost_in = self._tail_lost.get((after.leader, tp))
            if lost_in is not None and self._incarnation.get(after.leader, lost_in) > lost_in:
                self._lead_after_a_lost_tail(after.leader, tp)

    def unclean_elections(self, tp: TopicPartition) -> int:
        """How many unclean elections `tp` has had so far: a producer notes it as it sends."""
        return self._unclean.get(tp, 0)

    def watch_events(self, broker: SimBroker, incarnation: int) -> None:
        """Keep every event put into this controller's queue (an observer's wrapper: what
        goes through is unchanged)."""
        manager = broker.controller.event_manager
        seen = self._events.setdefault(incarnation, [])
        put, clear_and_put = manager.put, manager.clear_and_put

        def recorded_put(event: object) -> QueuedEvent:
            queued = put(event)  # type: ignore[arg-type]
            seen.append(queued)
            return queued

        def recorded_clear_and_put(event: object) -> QueuedEvent:
            queued = clear_and_put(event)  # type: ignore[arg-type]
            seen.append(queued)
            return queued

        manager.put = recorded_put  # type: ignore[method-assign]
        manager.clear_and_put = recorded_clear_and_put  # type: ignore[method-assign]

    def forget_events(self, incarnation: int) -> None:
        """A crashed incarnation's queue dies with it."""
        self._events.pop(incarnation, None)

    def controller_presence(self, now: float, electors: list[int], limit_s: float) -> None:
        """Looked at every tenth of a simulated second: `electors` are the brokers that could
        elect themselves now. The clock starts when `/controller` is first seen absent with one
        of them, and stops when it is back or none is left (an outage is not a stall)."""
        if self.zk.controller is not None or not electors:
            self._absent_since = None
            return
        if self._absent_since is None:
            self._absent_since = now
        elif now - self._absent_since > limit_s:
            self._found.append(
                Violation(
                    "a controller within session timeout + 1 s",
                    f"/controller absent for {now - self._absent_since:.1f} s while brokers {electors} "
                    "were registered and reached ZooKeeper",
                )
            )
            self._absent_since = None

    def partition_leaders(
        self,
        now: float,
        live: set[int],
        limit_s: float,
        brokers: dict[int, tuple[int, SimBroker]] | None = None,
        network_whole: bool = True,
    ) -> None:
        """Looked at every tenth of a simulated second, with `live` the brokers registered on
        their current session and reaching ZooKeeper. A partition is led when its state znode
        names a live leader and, when `brokers` are given, that broker's replica manager leads
        it at the znode's leader epoch (the controller told it). Its clock starts when it is
        first seen not led while a replica that could lead it is live, and stops when it is
        led or no such replica is left (Kafka leaves such a partition offline); a leader not
        told yet only counts while the network between the brokers is whole (a LeaderAndIsr
        waits out a partition)."""
        waiting = {}
        for topic, assignment in self.zk.topics.items():
            if topic in self.zk.deletion_markers:
                continue
            for partition, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, partition)
                found = self.zk.partition_states.get(tp)
                if found is None:
                    could_lead = set(replicas.replicas) & live
                elif found[0].leader in live:
                    if brokers is None or not network_whole or _leads(brokers, tp, found[0]):
                        continue
                    could_lead = {found[0].leader}
                else:
                    could_lead = set(found[0].isr) & live
                if could_lead:
                    waiting[tp] = could_lead
        self._leaderless_since = {tp: self._leaderless_since.get(tp, now) for tp in waiting}
        for tp, since in sorted(self._leaderless_since.items()):
            if now - since > limit_s:
                found = self.zk.partition_states.get(tp)
                state = "no state" if found is None else f"leader {found[0].leader}, ISR {found[0].isr}"
                self._found.append(
                    Violation(
                        "every partition led within a bounded time",
                        f"{tp} ({state}) has not been led for {now - since:.1f} s while brokers "
                        f"{sorted(waiting[tp])}, which could lead it, were live",
                    )
                )
                self._leaderless_since[tp] = now

    def acknowledged(self, ack: Ack) -> None:
        self.acks.append(ack)

    def unexpected_error(self, detail: str) -> None:
        """An exception the brokers' code did not expect: logged with its traceback, or
        left to the event loop by a task or a callback."""
        self._found.append(Violation("no unexpected error", detail))

    # --- after every step ---

    def check(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        if self._found:
            raise self._found[0]
        self._one_controller_per_epoch(brokers)
        self._partition_states()
        self._applied_leader_epochs(brokers)
        self._no_event_lost(brokers)
        self._vouched_for_no_more()
        self._acknowledged_writes()
        self._standby_views(brokers)
        self._controller_gauges(brokers)

    def _controller_gauges(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        for broker_id, (_, broker) in sorted(brokers.items()):
            if not (broker.alive and broker.started and broker.controller.is_active):
                continue
            context = broker.controller.context
            if not context.leadership.counted:
                continue  # a failover's count in slices is under way; a read would do it now
            kept = context.offline_partition_count(), context.preferred_replica_imbalance_count()
            counted = partition_gauges_by_a_pass(context)
            if kept != counted:
                raise Violation(
                    "partition gauges",
                    f"controller {broker_id} keeps (offline, imbalanced) {kept}; a pass counts {counted}",
                )
            unelected = unelected_by_a_pass(context)
            if sorted(context.partition_states.new_or_offline()) != unelected:
                raise Violation(
                    "partition gauges",
                    f"controller {broker_id} keeps {len(context.partition_states.new_or_offline())} "
                    f"partitions new or offline; a pass finds {len(unelected)}",
                )

    def _one_controller_per_epoch(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        for broker_id, (_, broker) in sorted(brokers.items()):
            if broker.alive and broker.started and broker.controller.is_active:
                epoch = broker.controller.context.epoch
                holder = self._controller_of_epoch.setdefault(epoch, broker_id)
                if holder != broker_id:
                    raise Violation(
                        "one controller per epoch", f"brokers {holder} and {broker_id} both active at {epoch}"
                    )

    def _partition_states(self) -> None:
        present = {}
        for tp, (state, _, _) in self.zk.partition_states.items():
            present[tp] = state
            if state.leader != -1 and state.leader not in state.isr:
                raise Violation("leader in ISR", f"{tp}: leader {state.leader} is not in ISR {state.isr}")
            before = self._states.get(tp)
            if before is None:
                continue
            if state.leader_epoch < before.leader_epoch:
                raise Violation(
                    "leader epochs rise", f"{tp}: leader epoch {before.leader_epoch} → {state.leader_epoch}"
                )
        self._states = present

    def _applied_leader_epochs(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        for broker_id, (incarnation, broker) in sorted(brokers.items()):
            if not broker.alive:
                continue
            for tp, partition in broker.replica_manager.replica_state.partitions.items():
                key = (incarnation, tp)
                applied = self._applied.get(key, -1)
                if partition.leader_epoch < applied:
                    raise Violation(
                        "no older LeaderAndIsr applied",
                        f"broker {broker_id} went from leader epoch {applied} to "
                        f"{partition.leader_epoch} of {tp}",
                    )
                self._applied[key] = partition.leader_epoch

    def _no_event_lost(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        for broker_id, (incarnation, broker) in sorted(brokers.items()):
            events = self._events.get(incarnation)
            if not events or not broker.alive:
                continue
            queued = set(map(id, broker.controller.event_manager.queued()))
            for event in events:
                if not event.spent and id(event) not in queued:
                    raise Violation(
                        "no event lost",
                        f"broker {broker_id}'s {type(event.event).__name__} left the queue unspent",
                    )
            # What is spent and answered needs no more watching.
            events[:] = [e for e in events if not e.spent or not _answered(e)]

    def another_isr_member_everywhere(self, broker_id: int) -> bool:
        """Whether every ISR in ZooKeeper that names `broker_id` names another broker too,
        one that has not itself lost a tail since."""
        return all(
            any(m != broker_id and (m, tp) not in self._tail_lost for m in state.isr)
            for tp, (state, _, _) in self.zk.partition_states.items()
            if broker_id in state.isr
        )

    def lost_tail(self, broker_id: int, incarnation: int) -> None:
        registration = self.zk.brokers.get(broker_id)
        if registration is not None:
            self._lost_registration[broker_id] = registration.czxid
        for topic, assignment in self.zk.topics.items():
            for partition, replicas in assignment.partitions.items():
                if broker_id in replicas.replicas:
                    self._tail_lost[(broker_id, TopicPartition(topic, partition))] = incarnation

    def _vouched_for_no_more(self) -> None:
        """End the let-offs of brokers whose registration from before their loss is gone,
        for the partitions whose ISR no longer names them."""
        for broker_id, czxid in list(self._lost_registration.items()):
            registration = self.zk.brokers.get(broker_id)
            if registration is None or registration.czxid != czxid:
                del self._lost_registration[broker_id]
        for broker_id, tp in list(self._tail_lost):
            if broker_id in self._lost_registration:
                continue
            found = self.zk.partition_states.get(tp)
            if found is None or broker_id not in found[0].isr:
                del self._tail_lost[(broker_id, tp)]

    def named_from_before_its_loss(self, broker_id: int) -> bool:
        """Whether some ISR still names `broker_id` from before it lost its logs' tail."""
        return any(b == broker_id for b, _ in self._tail_lost)

    def started(self, broker_id: int, incarnation: int) -> None:
        """A broker starts: one back from a power loss leads at once the partitions whose
        state still names it leader (the controller sends it that state as it registers)."""
        self._incarnation[broker_id] = incarnation
        for tp, (state, _, _) in sorted(self.zk.partition_states.items()):
            if state.leader == broker_id and (broker_id, tp) in self._tail_lost:
                self._lead_after_a_lost_tail(broker_id, tp)

    def _lead_after_a_lost_tail(self, broker_id: int, tp: TopicPartition) -> None:
        """A broker back from a power loss leads a partition whose ISR still named it from
        before: a controller that took over while it was away never saw it go, or it was the
        ISR's last name, and the controller found it live and in the ISR (ZooKeeper-mode Kafka
        cannot tell either; KRaft's KIP-966 can). What it lost is lost, as in an unclean
        election, and counted as one: the replicas that copy from it are held only to the
        writes sent after it. Seen as the state is written, not at the next step's checks:
        within one step it may lead, be copied, and hand the partition on."""
        self._unclean[tp] = self._unclean.get(tp, 0) + 1
        del self._tail_lost[(broker_id, tp)]

    def _standby_views(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        newest = max(self.zk.change_records, default=None)
        if newest is None:
            return
        current = None
        for broker_id, (_, broker) in sorted(brokers.items()):
            standby = broker.controller.standby if broker.alive and broker.started else None
            if standby is None or not standby.view.loaded:
                continue
            view = standby.view
            if view.applied != newest:
                continue
            if current is None:
                current = {
                    tp: LeadershipInfo(state._replace(partition_epoch=version), epoch)
                    for tp, (state, epoch, version) in self.zk.partition_states.items()
                }
            if view.leadership != current:
                differ = sorted(set(view.leadership.items()) ^ set(current.items()))[:2]
                raise Violation(
                    "standby views equal ZooKeeper's states",
                    f"broker {broker_id}'s view at record {newest} differs from ZooKeeper's states: {differ}",
                )

    def _acknowledged_writes(self) -> None:
        by_partition: dict[TopicPartition, list[Ack]] = {}
        for ack in self.acks:
            if ack.unclean_elections == self._unclean.get(ack.tp, 0):
                by_partition.setdefault(ack.tp, []).append(ack)
        # A topic marked for deletion loses its logs while its states are still there; the
        # simulation never reuses a topic's name, so once marked it is let off for good.
        self._deleted |= self.zk.deletion_markers
        for tp, acks in by_partition.items():
            state = self._states.get(tp)
            if state is None or tp.topic in self._deleted:
                continue
            for member in state.isr:
                if (member, tp) not in self._tail_lost:
                    self._check_replica(member, tp, acks)

    def _check_replica(self, broker_id: int, tp: TopicPartition, acks: list[Ack]) -> None:
        log = self.logs[broker_id].get(tp)
        generation = -1 if log is None else log.generation
        # The acks held to the rule change with their number, and with an unclean election.
        checked = (generation, self._unclean.get(tp, 0), len(acks))
        if self._checked.get((broker_id, tp)) == checked:
            return
        values = {} if log is None else log.values()
        for ack in acks:
            if values.get(ack.offset) != ack.value:
                raise Violation(
                    "acknowledged writes on every ISR member",
                    f"{tp} offset {ack.offset} ({ack.value!r}) is acknowledged but broker {broker_id}, "
                    f"in ISR {self._states[tp].isr}, holds {values.get(ack.offset)!r}",
                )
        self._checked[(broker_id, tp)] = checked

    # --- once healed ---

    def settled(self, brokers: dict[int, tuple[int, SimBroker]]) -> str | None:
        """None once the cluster has converged; otherwise what is still missing."""
        live = {b: broker for b, (_, broker) in brokers.items() if broker.alive and broker.started}
        if len(live) != len(brokers):
            return "a broker is not up"
        active = [b for b, broker in live.items() if broker.controller.is_active]
        if len(active) != 1:
            return f"active controllers: {active}"
        (controller,) = active
        known = {b: broker.controller.active_controller_id for b, broker in live.items()}
        if set(known.values()) != {controller}:
            return f"brokers disagree on the controller: {known}"
        busy = [
            b
            for b, broker in live.items()
            if broker.controller.event_manager.queue_size or broker.controller.state != ControllerState.IDLE
        ]
        if busy:
            return f"controller queues not empty on {busy}"
        if self.zk.deletion_markers or self.zk.reassignments:
            return "a deletion or a reassignment is left"
        for topic, assignment in self.zk.topics.items():
            for partition, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, partition)
                missing = self._partition_settled(tp, replicas.replicas, replicas.is_being_reassigned, live)
                if missing:
                    return missing
        return None

    def _partition_settled(
        self, tp: TopicPartition, replicas: tuple[int, ...], reassigning: bool, live: dict[int, SimBroker]
    ) -> str | None:
        found = self.zk.partition_states.get(tp)
        if found is None:
            return f"{tp} has no state"
        state = found[0]
        if reassigning:
            return f"{tp} is still being reassigned"
        if state.leader not in live or sorted(state.isr) != sorted(replicas):
            return f"{tp}: leader {state.leader}, ISR {state.isr} of replicas {replicas}"
        leader = live[state.leader].replica_manager.replica_state.partitions.get(tp)
        if leader is None or leader.role is not Role.LEADER or leader.leader_epoch != state.leader_epoch:
            return f"{tp}: broker {state.leader} does not lead it at epoch {state.leader_epoch}"
        for b in replicas:
            follower = live[b].replica_manager.replica_state.partitions.get(tp)
            if b != state.leader and (
                follower is None
                or follower.role is not Role.FOLLOWER
                or follower.leader_epoch != state.leader_epoch
            ):
                return f"{tp}: broker {b} does not follow {state.leader} at epoch {state.leader_epoch}"
        for b, broker in live.items():
            # What every broker answers Metadata with: the state, all replicas online.
            told = broker.replica_manager.replica_state.metadata.state(tp)
            if (
                told is None
                or (told.leader, told.leader_epoch, sorted(told.isr), tuple(told.replicas))
                != (
                    state.leader,
                    state.leader_epoch,
                    sorted(state.isr),
                    replicas,
                )
                or told.offline_replicas
            ):
                return f"{tp}: broker {b}'s metadata shows {told}, not {state} with replicas {replicas}"
        high_watermark = leader.high_watermark
        logs = {b: self.logs[b].get(tp) for b in replicas}
        committed = {
            b: {o: v for o, v in ({} if log is None else log.values()).items() if o < high_watermark}
            for b, log in logs.items()
        }
        if len({tuple(sorted(c.items())) for c in committed.values()}) > 1:
            return f"{tp}: replicas differ below the high watermark {high_watermark}"
        return None

    def final(self, brokers: dict[int, tuple[int, SimBroker]]) -> None:
        """Once settled: every event spent, and every caller of a controller answered; and
        nothing found since the last step's checks (an error logged while settling)."""
        if self._found:
            raise self._found[0]
        self._no_event_lost(brokers)
        for broker_id, (incarnation, _) in sorted(brokers.items()):
            for queued in self._events.get(incarnation, []):
                state = "unspent" if not queued.spent else "spent without an answer to its caller"
                raise Violation("no event lost", f"broker {broker_id}: {type(queued.event).__name__} {state}")


def partition_gauges_by_a_pass(context: ControllerContext) -> tuple[int, int]:
    """OfflinePartitionsCount and PreferredReplicaImbalanceCount as Kafka defines them, by a
    pass over every partition: what the controller's maps keep as they change."""
    offline = sum(
        1
        for tp, state in context.partition_states.items()
        if state == PartitionState.OFFLINE and tp.topic not in context.topics_with_deletion_started
    )
    imbalanced = 0
    for tp, info in context.leadership.items():
        assignment = context.assignment(tp)
        if assignment.replicas and tp.topic not in context.topics_to_be_deleted:
            imbalanced += not has_preferred_leader(assignment, info.leader_and_isr)
    return offline, imbalanced


def unelected_by_a_pass(context: ControllerContext) -> list[TopicPartition]:
    """The partitions in NewPartition or OfflinePartition, by a pass over every one."""
    return sorted(
        tp
        for tp, state in context.partition_states.items()
        if state in (PartitionState.NEW, PartitionState.OFFLINE)
    )


def _leads(brokers: dict[int, tuple[int, SimBroker]], tp: TopicPartition, state: LeaderAndIsr) -> bool:
    """Whether the leader the state names leads `tp` at its leader epoch (or a later one)."""
    found = brokers.get(state.leader)
    partition = None if found is None else found[1].replica_manager.replica_state.partitions.get(tp)
    return (
        partition is not None
        and partition.role is Role.LEADER
        and partition.leader_epoch >= state.leader_epoch
    )


def _answered(queued: QueuedEvent) -> bool:
    """Whether the caller waiting on the event (if any) has its answer."""
    reply = getattr(queued.event, "reply", None)
    return reply is None or reply.done()


class UnexpectedErrors(logging.Handler):
    """Takes the records logged with an exception (`log.exception`, `exc_info=`) to the
    checker: the brokers log so only what they did not expect. Kafka's own error lines
    without one (a failed state change, an invalid transition) are its normal reports."""

    def __init__(self, checker: Checker) -> None:
        super().__init__(logging.ERROR)
        self._checker = checker

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is None or record.exc_info[1] is None:
            return
        error = record.exc_info[1]
        self._checker.unexpected_error(
            f"{record.name}: {record.getMessage()}: {type(error).__name__}: {error}"
        )
