"""The controller's mark of what every live broker has been told and answered
(docs/STANDBY.md, "Sending only what changed").

A new controller in Kafka resends every partition's state to every broker, because the one
before may have died between writing a state and sending it. With change records on, the
controller marks now and then, in a fenced write, the newest record whose changes every live
broker has answered for: a moment when nothing it sent is still unanswered, so everything it
wrote before has reached them. Its successor resends only what the records after the mark
changed, and everything to a broker that was not live at the mark (or was, at another
epoch)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from actors.base.clock import Cancellable, Clock
from actors.base.ports import AcknowledgedChanges, BrokerChannel, ClusterStore, TopicPartition
from actors.controller.context import ControllerContext, PartitionReplica
from actors.controller.standby import Changed, record_sequence

log = logging.getLogger(__name__)

# How long after a change the mark is looked at again: marks stay a few writes a second at
# most, and a failover right after a change resends a little more.
MARK_DELAY_S = 0.5


class AcknowledgedMarker:
    """Keeps `/keel/acknowledged_changes` current while this broker is controller: `poke`
    after each event schedules a look (the `due` callback queues it as an event) when the
    records written, the live brokers or the offline log directories moved since the last
    mark; `mark` on the event queue writes it once nothing sent is unanswered and no answer
    waits on the queue, or clears it while replicas sit on failed log directories; `clear`
    clears it at once, as the controller starts learning of such replicas."""

    def __init__(
        self,
        context: ControllerContext,
        store: ClusterStore,
        channel: BrokerChannel,
        clock: Clock,
        *,
        due: Callable[[], None],
        queued_events: Callable[[], int] = lambda: 0,
    ) -> None:
        self._context = context
        self._store = store
        self._channel = channel
        self._clock = clock
        self._due = due
        # Events waiting on the controller's queue: a broker's answer is handed over as one
        # (a LeaderAndIsr's storage errors among them), so none may wait behind a mark.
        self._queued_events = queued_events
        self._timer: Cancellable | None = None
        # What the last mark written covered; None: none written by this controller.
        self._marked: tuple[int, dict[int, int], bool] | None = None

    def reset(self) -> None:
        """On resignation: the next term marks afresh."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._marked = None

    def poke(self) -> None:
        if self._timer is None and self._covered() != self._marked:
            self._timer = self._clock.call_later(MARK_DELAY_S, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._due()

    def _covered(self) -> tuple[int, dict[int, int], bool]:
        context = self._context
        brokers = {b: r.broker_epoch for b, r in context.live_brokers.items()}
        return self._store.records_written, brokers, bool(context.replicas_on_offline_dirs)

    async def clear(self) -> None:
        """No mark, at once: this controller is learning which replicas sit on failed log
        directories, which only the brokers' answers to a full LeaderAndIsr tell a new
        controller (a log-dir event notification, storage errors in an answer)."""
        await self._store.mark_acknowledged(None, self._context.epoch_zk_version)
        self._marked = None
        log.info("the mark of acknowledged changes is cleared: log directories failed")

    async def mark(self) -> None:
        covered = self._covered()
        if covered == self._marked:
            return
        written, brokers, offline_dirs = covered
        if offline_dirs:
            # Which replicas are on failed directories only the brokers' answers to a full
            # LeaderAndIsr tell a new controller: while there are any, no mark.
            await self._store.mark_acknowledged(None, self._context.epoch_zk_version)
            self._marked = covered
            return
        if self._channel.total_queue_size or self._queued_events():
            self.poke()  # still unanswered, or an answer not yet handled: look again later
            return
        mark = None
        names = await self._store.change_record_names()
        generation = await self._store.change_records_generation()
        sequences = [s for name in names if (s := record_sequence(name)) is not None]
        if sequences and generation is not None:
            mark = AcknowledgedChanges(self._context.epoch, generation, max(sequences), brokers)
        await self._store.mark_acknowledged(mark, self._context.epoch_zk_version)
        self._marked = covered
        log.debug("acknowledged changes marked: %s (%d records written)", mark, written)


class Resend(NamedTuple):
    """What a new controller that took over from its standby view tells brokers again."""

    # Every live broker hears these partitions' states again (UpdateMetadata, and
    # LeaderAndIsr to their replicas).
    partitions: set[TopicPartition]
    # These brokers hear everything: not live at the mark, or live then at another epoch.
    brokers: set[int]

    def covers(self, replica: PartitionReplica) -> bool:
        return replica.replica in self.brokers or replica.tp in self.partitions


async def resend_after(context: ControllerContext, mark: AcknowledgedChanges, changed: Changed) -> Resend:
    """Given the mark a new controller found and what the records after it changed: the
    partitions those records changed (states, or the assignments of their topics), those
    with a replica on a broker that came, went or bounced since the mark (the brokers'
    view of which replicas are offline), and those of topics being deleted or partitions
    being reassigned (cheap to resend, and in the middle of something)."""
    live = {b: r.broker_epoch for b, r in context.live_brokers.items()}
    brokers = {b for b, epoch in live.items() if mark.brokers.get(b) != epoch}
    gone = set(mark.brokers) - set(live)
    partitions = {tp for tp in changed.partitions if tp.partition in context.assignments.get(tp.topic, ())}
    for topic in changed.topics | context.topics_to_be_deleted:
        partitions.update(context.partitions_for_topic(topic))
    partitions |= context.partitions_being_reassigned
    if brokers or gone:
        partitions.update(r.tp for r in await context.replicas_on_brokers(brokers | gone))
    return Resend(partitions, brokers)
