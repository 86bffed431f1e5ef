"""The warm standby's view of the partitions' states (docs/STANDBY.md): what every broker
keeps from the controller's change records, so that once elected it need not read every
state from ZooKeeper.

A change record is what one fenced multi-op of a controller changed: per partition, the
state's znode version before the write (-1: it was created) and the whole state after it
(None: it was deleted). ZooKeeper numbers the records (sequential znodes) in the order it
committed the writes, and the view applies them in that order. A state is written whole, so
a record's state supersedes whatever came before it for that partition: a record missed for
a partition that changes again later does no harm. What the view cannot see is a missed
record that was a partition's last change; the records' sequence tells it (`missed`), and
the partitions whose version chain broke are counted, as a check on the stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from actors.base.ports import (
    AcknowledgedChanges,
    ChangeRecord,
    ChangeRecordWatcher,
    ControllerEpoch,
    LeadershipInfo,
    SessionWatcher,
    TopicAssignment,
    TopicPartition,
)
from actors.base.service import Service

log = logging.getLogger(__name__)

# What the view remembers of the records it applied (which partitions and topics each
# changed), so that a new controller can resend only what changed since the last mark of
# what brokers acknowledged: about this many partitions, the oldest records forgotten first.
RECENT_PARTITIONS_KEPT = 200_000


class Changed(NamedTuple):
    """What records changed: partitions' states, and topics' assignments."""

    partitions: set[TopicPartition]
    topics: set[str]


class StandbySource(Protocol):
    """What the follower reads: the records, and the states for a full load."""

    async def change_record_names(self, *, watch: bool = False) -> list[str]: ...

    async def change_records_named(self, names: list[str]) -> list[ChangeRecord | None]:
        """These records, in the order named; None for one gone or unreadable."""
        ...

    def watch_change_records(self, watcher: ChangeRecordWatcher) -> None: ...

    def watch_session(self, watcher: SessionWatcher) -> None: ...

    async def topics(self, *, watch: bool = False) -> set[str]: ...

    async def controller_epoch(self) -> ControllerEpoch | None: ...

    async def change_records_epoch(self) -> int | None:
        """The epoch of the last controller that started recording (None: none did)."""
        ...

    async def change_records_generation(self) -> int | None:
        """Which records' parent is there (None: none); a new one numbers from 0 again."""
        ...

    async def topic_assignments(
        self, topics: set[str], *, watch: bool = False
    ) -> dict[str, TopicAssignment]: ...

    async def partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeadershipInfo]: ...


class StandbyView:
    def __init__(self) -> None:
        self.leadership: dict[TopicPartition, LeadershipInfo] = {}
        # The same partitions' ids by topic: a takeover compares them with the assignments
        # a topic at a time, at C speed, rather than a partition at a time.
        self.partitions: dict[str, set[int]] = {}
        # The sequence of the last record applied; None until the view is loaded.
        self.applied: int | None = None
        # Changes whose version before did not match the version the view held: records
        # missed (or applied out of order), each superseded by the change that found it.
        self.chain_breaks = 0
        # The controller epoch when the view was loaded, whether that controller recorded
        # its changes, and the epochs since whose controllers said they do.
        self.load_epoch = 0
        self.load_epoch_recorded = False
        self.epochs_started: set[int] = set()
        # The records' parent the view follows (a new parent numbers from 0 again).
        self.generation: int | None = None
        # What each record applied since `recent_after` changed, by sequence, oldest first.
        self.recent: dict[int, tuple[tuple[TopicPartition, ...], tuple[str, ...]]] = {}
        self.recent_after: int | None = None
        self._recent_partitions = 0

    @property
    def loaded(self) -> bool:
        return self.applied is not None

    def load(
        self,
        leadership: Mapping[TopicPartition, LeadershipInfo],
        applied: int,
        *,
        controller_epoch: int = 0,
        recorded: bool = False,
        generation: int | None = None,
    ) -> None:
        """Start from a full read of the states, taken once every record up to `applied`
        was written, under the controller of `controller_epoch` (`recorded`: one that
        records its changes)."""
        self.leadership = dict(leadership)
        self.partitions = {}
        for tp in self.leadership:
            self.partitions.setdefault(tp.topic, set()).add(tp.partition)
        self.applied = applied
        self.chain_breaks = 0
        self.load_epoch, self.load_epoch_recorded = controller_epoch, recorded
        self.epochs_started = set()
        self.generation = generation
        self.recent = {}
        self.recent_after = applied
        self._recent_partitions = 0

    def covers(self, epoch: int) -> bool:
        """Whether every controller before the one of `epoch`, since the view was loaded,
        recorded its changes: the view then misses nothing they wrote (given `missed`)."""
        if not self.loaded:
            return False
        # A controller that records says so before it writes anything else, so one whose
        # saying so the view applied after its load (elected as it loaded) recorded too.
        started = self.epochs_started
        if self.load_epoch > 0 and not self.load_epoch_recorded and self.load_epoch not in started:
            return False
        return all(e in started for e in range(self.load_epoch + 1, epoch))

    def apply(self, sequence: int, record: ChangeRecord) -> bool:
        """Apply one record; False (and nothing changed) for one already applied."""
        if self.applied is not None and sequence <= self.applied:
            return False
        if record.starts_epoch:
            self.epochs_started.add(record.controller_epoch)
        leadership, partitions = self.leadership, self.partitions
        for tp, before, after in record.changes:
            if after is None:
                if leadership.pop(tp, None) is not None:
                    ids = partitions[tp.topic]
                    ids.discard(tp.partition)
                    if not ids:
                        del partitions[tp.topic]
                continue
            held = leadership.get(tp)
            if held is None:
                partitions.setdefault(tp.topic, set()).add(tp.partition)
            if (-1 if held is None else held.leader_and_isr.partition_epoch) != before:
                self.chain_breaks += 1
            leadership[tp] = after
        self.applied = sequence
        self._remember(sequence, record)
        return True

    def _remember(self, sequence: int, record: ChangeRecord) -> None:
        self.recent[sequence] = (tuple(c.tp for c in record.changes), record.topics)
        self._recent_partitions += len(record.changes)
        while self._recent_partitions > RECENT_PARTITIONS_KEPT and len(self.recent) > 1:
            oldest = next(iter(self.recent))
            self._recent_partitions -= len(self.recent.pop(oldest)[0])
            self.recent_after = oldest

    def changed_after(self, mark: AcknowledgedChanges) -> Changed | None:
        """What the records after the mark changed, all applied; None where the view
        cannot tell (it was loaded after the mark, forgot records since, or follows
        another parent)."""
        after = self.recent_after
        if after is None or mark.generation != self.generation or mark.sequence < after:
            return None
        changed = Changed(set(), set())
        for sequence, (partitions, topics) in self.recent.items():
            if sequence > mark.sequence:
                changed.partitions.update(partitions)
                changed.topics.update(topics)
        return changed

    def missed(self, listed: Sequence[int], generation: int | None) -> bool:
        """Whether records this view has not applied may have been deleted unread, given the
        sequences of the records listed now (ascending) under the parent of `generation`.
        Records are deleted oldest first and the newest is always kept, so while the last
        one applied is still listed, nothing after it went."""
        applied = self.applied
        if applied is None or generation != self.generation:
            return True
        if not listed:
            return applied != -1
        if listed[-1] == applied:
            return False
        if listed[-1] < applied:
            return True  # numbered from 0 again
        if applied == -1:
            return listed[0] != 0  # the first records went unread
        # Sequences have gaps (a deletion moves the parent's counter too): only the last
        # record applied, still listed, proves that none after it went.
        return applied not in listed

    def unapplied(self, listed: Iterable[int]) -> list[int]:
        """The listed sequences after the last one applied, in order."""
        applied = -1 if self.applied is None else self.applied
        return sorted(s for s in listed if s > applied)


def record_sequence(name: str) -> int | None:
    """A record's sequence from its znode name; None for a name that is not a record's."""
    digits = name.rpartition("-")[2]
    return int(digits) if digits.isdigit() else None


class StandbyFollower(Service):
    """Keeps a broker's `StandbyView` current: a full load first (every state, as a new
    controller reads them today, but in the background), then each record as its watch
    reports it; a load again whenever records went unread (deleted before this broker read
    them, or unreadable), and after a takeover refused the view. Errors are retried after
    `retry_s`. One lock keeps the follower's catching up and a takeover apart."""

    def __init__(self, source: StandbySource, *, retry_s: float = 1.0) -> None:
        super().__init__("standby-follower")
        self.view = StandbyView()
        self.loads = 0
        self._source = source
        self._retry_s = retry_s
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._reload = False
        source.watch_change_records(self)
        source.watch_session(self)

    def change_records_changed(self) -> None:
        self._wake.set()

    # --- SessionWatcher: a new session has no watch armed; the next look arms it again ---

    async def before_new_session(self) -> None:
        return None

    def after_new_session(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                async with self._lock:
                    await self._catch_up()
            except Exception as e:
                log.warning("the standby view could not catch up (%s); trying again", e)
                await asyncio.sleep(self._retry_s)
                self._wake.set()
            await self._wake.wait()

    async def _listed(self) -> tuple[dict[int, str], int | None]:
        """The records listed now (sequence -> name), and their parent's generation, read
        after the listing: a parent made again since shows as a new generation."""
        names = await self._source.change_record_names(watch=True)
        generation = await self._source.change_records_generation()
        return {seq: name for name in names if (seq := record_sequence(name)) is not None}, generation

    async def _catch_up(self) -> None:
        listed, generation = await self._listed()
        if self._reload or self.view.missed(sorted(listed), generation):
            await self._load(max(listed, default=-1), generation)
            return
        if not await self._apply(listed):  # one deleted since it was listed, or unreadable
            await self._load(max(listed), generation)

    async def _apply(self, listed: dict[int, str]) -> bool:
        """The listed records the view has not applied, read a thousand at a time and
        applied in order; False at one gone or unreadable (those before it applied)."""
        unapplied = self.view.unapplied(listed)
        for start in range(0, len(unapplied), 1000):
            sequences = unapplied[start : start + 1000]
            records = await self._source.change_records_named([listed[s] for s in sequences])
            for sequence, record in zip(sequences, records, strict=True):
                if record is None:
                    return False
                self.view.apply(sequence, record)
        return True

    async def _load(self, applied: int, generation: int | None) -> None:
        """Every state, read after the records up to `applied` were listed: applying the
        later ones over it gives ZooKeeper's states (each record carries whole states)."""
        self._reload = False
        epoch = await self._source.controller_epoch()
        recording = await self._source.change_records_epoch()
        # The assignments give the partitions to read, and a store that keeps what it decoded
        # has them at hand for the takeover.
        assignments = await self._source.topic_assignments(await self._source.topics())
        partitions = [
            TopicPartition(topic, p) for topic, a in sorted(assignments.items()) for p in sorted(a.partitions)
        ]
        states = await self._source.partition_states(partitions)
        value = 0 if epoch is None else epoch.epoch
        self.view.load(
            states, applied, controller_epoch=value, recorded=recording == value, generation=generation
        )
        self.loads += 1
        self._wake.set()  # the records written meanwhile

    async def takeover(
        self, epoch: int, partitions: Mapping[str, Collection[int]]
    ) -> dict[TopicPartition, LeadershipInfo] | None:
        """For the controller of `epoch`, just elected: the states of `partitions` (ids by
        topic; a set or a dict's keys each, for the quick comparison) from the view, brought
        current with every record listed now (every earlier controller's write is among
        them, or fenced for good), and those it holds none for read from ZooKeeper. None
        where the view cannot be trusted (never loaded, records gone unread or unreadable,
        an earlier controller that did not record): the caller reads every state, and the
        follower loads the view again for the next time."""
        async with self._lock:
            found = await self._take_over(epoch, partitions)
        if found is None:
            self._reload = True
            self._wake.set()
        return found

    async def _take_over(
        self, epoch: int, partitions: Mapping[str, Collection[int]]
    ) -> dict[TopicPartition, LeadershipInfo] | None:
        view = self.view
        if not view.loaded:
            return None
        listed, generation = await self._listed()
        if view.missed(sorted(listed), generation):
            return None
        if not await self._apply(listed) or not view.covers(epoch):
            return None
        held = view.leadership
        if view.partitions.keys() == partitions.keys() and all(
            view.partitions[topic] == ids for topic, ids in partitions.items()
        ):
            return dict(held)  # the usual case: a copy at C speed
        wanted = [TopicPartition(topic, p) for topic, ids in partitions.items() for p in ids]
        found = {tp: held[tp] for tp in wanted if tp in held}
        missing = [tp for tp in wanted if tp not in held]
        if missing:
            found.update(await self._source.partition_states(missing))
        return found

    async def changed_after(self, mark: AcknowledgedChanges) -> Changed | None:
        """After a takeover: what the records after `mark` changed (StandbyView.changed_after)."""
        async with self._lock:
            return self.view.changed_after(mark)
