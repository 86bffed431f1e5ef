"""The leader-epoch cache of one partition (Kafka's LeaderEpochFileCache): for each leader
epoch, the first offset written in it. It answers OffsetsForLeaderEpoch, "where does epoch E
end in this log", which is where a follower's log stops agreeing with the leader's.

Persisted as `leader-epoch-checkpoint` in the partition's directory after every change.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from node.broker.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, directory: Path | None) -> None:
        """With `directory` None the cache lives in memory only (tests)."""
        self._path = None if directory is None else directory / FILE_NAME
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # An entry assigned without saving (see assign).
        self._unsaved = False
        if self._path is not None:
            try:
                for epoch, offset in read_checkpoint(self._path):
                    self._epochs.append(int(epoch))
                    self._offsets.append(int(offset))
            except (CheckpointError, ValueError) as e:
                log.warning("ignoring a damaged leader-epoch checkpoint: %s", e)
                self._epochs, self._offsets = [], []

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def unsaved(self) -> bool:
        """An entry is in memory only (assigned with `save=False`)."""
        return self._unsaved

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, *, save: bool = True) -> None:
        """Record that `epoch` starts at `start_offset`, if that is news. Entries for a newer
        epoch or a later offset cannot be right any more and are dropped.

        With `save` False the entry is kept in memory until the next change that saves, or
        the first append in the epoch (which assigns it again): a leader's epoch assigned as
        it takes over costs no fsync per partition on a failover of thousands, and an entry
        with nothing written in its epoch is not needed after a restart."""
        if epoch < 0:
            return
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            if save and self._unsaved:
                self._save()
            return
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        if save:
            self._save()
        else:
            self._unsaved = True

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's endOffsetFor: the largest epoch ≤ `requested` this
        log knows and the start offset of the epoch after it, or the log end offset when
        `requested` is the latest epoch."""
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self._epochs[-1]:
            return requested, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return requested, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        if changed:
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch covering it starts there."""
        keep = bisect.bisect_right(self._offsets, start_offset) - 1
        if keep <= 0 and (not self._offsets or self._offsets[0] >= start_offset):
            return
        self._epochs = self._epochs[keep:]
        self._offsets = [start_offset, *self._offsets[keep + 1 :]]
        self._save()

    def clear(self) -> None:
        self._epochs, self._offsets = [], []
        self._save()

    def _save(self) -> None:
        self._unsaved = False
        if self._path is not None:
            write_checkpoint(
                self._path, [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
            )
