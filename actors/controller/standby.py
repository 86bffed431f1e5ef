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

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from actors.base.ports import LeadershipInfo, TopicPartition


class PartitionChange(NamedTuple):
    tp: TopicPartition
    # The state znode's version before the write; -1 where the write created it, or deleted
    # it (a topic's deletion removes its znodes at whatever version).
    before: int
    # The state as written, its partition epoch the znode's version after the write; None
    # where the write deleted it.
    after: LeadershipInfo | None


class ChangeRecord(NamedTuple):
    controller_epoch: int
    changes: tuple[PartitionChange, ...]


class StandbyView:
    def __init__(self) -> None:
        self.leadership: dict[TopicPartition, LeadershipInfo] = {}
        # The sequence of the last record applied; None until the view is loaded.
        self.applied: int | None = None
        # Changes whose version before did not match the version the view held: records
        # missed (or applied out of order), each superseded by the change that found it.
        self.chain_breaks = 0

    @property
    def loaded(self) -> bool:
        return self.applied is not None

    def load(self, leadership: Mapping[TopicPartition, LeadershipInfo], applied: int) -> None:
        """Start from a full read of the states, taken once every record up to `applied`
        (and none after it) was written."""
        self.leadership = dict(leadership)
        self.applied = applied
        self.chain_breaks = 0

    def apply(self, sequence: int, record: ChangeRecord) -> bool:
        """Apply one record; False (and nothing changed) for one already applied."""
        if self.applied is not None and sequence <= self.applied:
            return False
        leadership = self.leadership
        for tp, before, after in record.changes:
            if after is None:
                leadership.pop(tp, None)
                continue
            held = leadership.get(tp)
            if (-1 if held is None else held.leader_and_isr.partition_epoch) != before:
                self.chain_breaks += 1
            leadership[tp] = after
        self.applied = sequence
        return True

    def missed(self, listed: Sequence[int]) -> bool:
        """Whether records this view has not applied may have been deleted unread, given the
        sequences of the records listed now (ascending). Records are deleted oldest first,
        so while the last one applied is still listed, nothing after it was."""
        if self.applied is None:
            return True
        if not listed or listed[-1] <= self.applied:
            return False  # nothing newer than what it applied
        # Sequences have gaps (a deletion moves the parent's counter too): only the last
        # record applied, still listed, proves that none after it went.
        return self.applied not in listed

    def unapplied(self, listed: Iterable[int]) -> list[int]:
        """The listed sequences after the last one applied, in order."""
        applied = -1 if self.applied is None else self.applied
        return sorted(s for s in listed if s > applied)
