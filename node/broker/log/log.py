"""One partition's log (Kafka's UnifiedLog): segments in offset order, the leader-epoch cache,
appends as leader or follower, reads, truncation, recovery, retention and flushing.

Offsets: `log_start_offset` is the first offset still held, `log_end_offset` (LEO) the next
offset to be written, `recovery_point` the offset below which everything was fsynced. Appends
validate every batch (magic, framing, CRC) before writing any, so a bad batch appends nothing.

Recovery (Kafka's LogLoader): after a crash only what lies below the recovery point is known
to be on disk whole, so every segment from the one holding it to the end is checked batch by
batch, CRC included; the log ends before the first bad batch and later segments are deleted.
After a clean shutdown (the log directory's `.kafka_cleanshutdown` marker) nothing is checked,
unless the log's recovery point lies below its end: a batch found corrupt while the broker ran
holds the recovery point below it, so that the next start cuts the log there.

Compaction (node/broker/log/cleaner.py) rewrites closed segments off the event loop into
`.cleaned` files and swaps them in here, in one step on the loop (`replace_segments`): the
cleaned files are renamed `.swap` (from then on the clean counts as done), the segments they
replace deleted, and the `.swap` files renamed over the first one's names. Loading finishes a
swap a crash interrupted and deletes `.cleaned` files (a clean that never finished).

Reads check the CRC of every batch they return: a batch damaged on disk is never served
(LogCorruption). An OSError in any operation reports the log's directory to the failure
channel and fails the operation with KAFKA_STORAGE_ERROR; so does every later operation.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from actors.base.ports import LogCorruption, TopicPartition
from node.broker.log import compaction
from node.broker.log.config import LogConfig
from node.broker.log.epoch_cache import LeaderEpochCache
from node.broker.log.failure_channel import LogDirFailureChannel
from node.broker.log.producer_state import ProducerState
from node.broker.log.segment import MAX_RELATIVE_OFFSET, LogSegment, segment_name
from node.broker.log.validator import MAX_DECOMPRESSED_BYTES, Batches, validate_as_leader, validate_batches
from wire import compression, records
from wire.errors import CorruptMessage, ErrorCode, KafkaStorageError, OffsetOutOfRange

log = logging.getLogger(__name__)

# Kafka's producer-state snapshot files, and how many a log keeps.
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_name(cleaned: Path) -> Path:
    return cleaned.with_name(cleaned.name.removesuffix(compaction.CLEANED_SUFFIX) + compaction.SWAP_SUFFIX)


def directory_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# The process is out of file descriptors (its own limit, or the system's): not a disk failure.
OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


class Log:
    def __init__(
        self,
        directory: Path,
        tp: TopicPartition,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        failures: LogDirFailureChannel | None = None,
        flusher: Callable[[Log], None] | None = None,
        log_start_offset: int = 0,
    ) -> None:
        """`recovery_point` from the directory's checkpoint (0, everything, when it has none);
        `clean_shutdown` when the directory holds the clean-shutdown marker; `failures`
        hears of an I/O error (none: the error is only raised). `flusher` is told when the
        log wants flushing (a segment rolled, or the flush settings say so) and fsyncs it
        off the event loop (`LogManager`); without one, the log flushes there and then."""
        self.directory = directory
        self.tp = tp
        self.config = config
        self._failures = failures
        # Set once the log's directory is offline: every operation fails from then on.
        self.offline = False
        # Where the next scrub starts, and the first offset found corrupt, if any.
        self._scrub_offset = 0
        self._corrupt_at: int | None = None
        with self._io("opening"):
            directory.mkdir(parents=True, exist_ok=True)
        self.epochs = LeaderEpochCache(directory)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._unflushed = 0
        self._last_flush = time.monotonic()
        self.recovery_point = 0
        self._flusher = flusher
        # The offset the log wants flushed up to (exclusive), for the flusher; and how many
        # times it was truncated, so that a flush finished after a truncation moves nothing.
        self.flush_wanted = 0
        self._truncations = 0
        # Idempotent producers' state (producer_state.py); None until first needed, and again
        # after a truncation, when it is read anew from the batch headers.
        self._producers: ProducerState | None = None
        # Compaction: the first offset not cleaned yet (Kafka's cleaner checkpoint), and the
        # earliest delete horizon of a batch the cleaner left tombstones in (None: none known).
        self.clean_offset = 0
        self.next_delete_horizon_ms: int | None = None
        # Produces whose append set off a flush (flush.messages), waiting for it: (offset the
        # flush must reach, the future their answer waits on).
        self._flush_waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = []
        # Where the log starts for its readers when DeleteRecords moved it inside the first
        # segment (Kafka's logStartOffset); the first segment's base when below it.
        self._start_offset = 0
        with self._io("loading"):
            self._load(recovery_point, clean_shutdown)
        self._start_offset = min(log_start_offset, self.log_end_offset)
        # A snapshot past what recovery kept describes batches the log no longer has.
        with self._io("loading"):
            self._delete_snapshots_after(self.log_end_offset)

    @contextlib.contextmanager
    def _io(self, doing: str) -> Iterator[None]:
        """Kafka's maybeHandleIOException: an OSError takes the directory offline, but for a
        process out of file descriptors (EMFILE, ENFILE), which says nothing about the disk:
        that operation fails (KAFKA_STORAGE_ERROR, which clients retry) and the log stays."""
        if self.offline:
            raise KafkaStorageError(f"{self.tp}: the log directory {self.directory.parent} is offline")
        try:
            yield
        except OSError as e:
            if e.errno in OUT_OF_DESCRIPTORS:
                log.warning("%s the log of %s failed, no file descriptor free: %s", doing, self.tp, e)
                raise KafkaStorageError(f"error while {doing} the log of {self.tp}: {e}") from e
            self.offline = True
            message = f"error while {doing} the log of {self.tp} in {self.directory.parent}: {e}"
            if self._failures is not None:
                self._failures.maybe_add_offline_log_dir(self.directory.parent, message)
            raise KafkaStorageError(message) from e

    # --- loading and recovery ---

    def _load(self, recovery_point: int, clean_shutdown: bool) -> None:
        self._finish_compaction()
        bases = sorted(int(p.stem) for p in self.directory.glob("*.log") if p.stem.isdigit())
        for base in bases:
            self._segments.append(LogSegment(self.directory, base, self.config.index_interval_bytes))
        self._bases = bases
        if not self._segments:
            self._roll(0)
            return
        if clean_shutdown:
            for segment in self._segments:
                segment.load_index()
            if recovery_point < self.log_end_offset:
                self._recover(recovery_point)  # a batch was found corrupt below the log end
            else:
                self.recovery_point = self.log_end_offset
        else:
            self._recover(recovery_point)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)

    def _finish_compaction(self) -> None:
        """What a crash left of a clean: `.cleaned` files go (the segments they were cleaned
        from are all still here); a `.swap` segment was whole before it was renamed, so it
        replaces every segment whose base lies within its offsets, as the swap would have."""
        for leftover in self.directory.glob(f"*{compaction.CLEANED_SUFFIX}"):
            log.info("%s: deleting %s, left by a clean that did not finish", self.tp, leftover.name)
            leftover.unlink()
        for swap in sorted(self.directory.glob(f"*.log{compaction.SWAP_SUFFIX}")):
            base = int(swap.name.split(".")[0])
            last = base
            data = swap.read_bytes()
            for _, header in records.batches(data, check_crc=False):
                last = header.last_offset
            for segment in self.directory.glob("*.log"):
                if segment.stem.isdigit() and base <= int(segment.stem) <= last:
                    segment.unlink()
                    segment.with_suffix(".index").unlink(missing_ok=True)
            index_swap = self.directory / (segment_name(base, ".index") + compaction.SWAP_SUFFIX)
            if index_swap.exists():
                index_swap.replace(self.directory / segment_name(base, ".index"))
            swap.replace(self.directory / segment_name(base, ".log"))
            log.info("%s: finished swapping in the cleaned segment at offset %d", self.tp, base)
        for stray in self.directory.glob(f"*.index{compaction.SWAP_SUFFIX}"):
            stray.unlink()  # its log was never renamed: the old segments stand

    def _recover(self, recovery_point: int) -> None:
        """Check every segment from the one holding `recovery_point` on; the first bad batch
        ends the log there, and the segments after it go."""
        first = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for segment in self._segments[:first]:
            segment.load_index()
        for slot in range(first, len(self._segments)):
            cut = self._segments[slot].recover()
            if cut:
                dropped = self._segments[slot + 1 :]
                for later in dropped:
                    later.delete()
                del self._segments[slot + 1 :], self._bases[slot + 1 :]
                log.warning(
                    "%s: recovered to offset %d, %d torn bytes dropped in segment %d and %d later "
                    "segment(s) deleted",
                    self.tp,
                    self.log_end_offset,
                    cut,
                    self._bases[slot],
                    len(dropped),
                )
                break
        self.recovery_point = min(recovery_point, self.log_end_offset)

    # --- offsets ---

    @property
    def log_start_offset(self) -> int:
        return max(self._segments[0].base_offset, self._start_offset)

    def advance_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords (or, on a follower, its leader's log start): the records below
        `offset` are gone for readers, and the segments wholly below it deleted. Never moves
        the start back or past the log end; whether it moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        self._start_offset = offset
        with self._io("deleting records of"):
            deleted = 0
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                self._segments.pop(0).delete()
                self._bases.pop(0)
                deleted += 1
        self.epochs.truncate_from_start(offset)
        self.recovery_point = max(self.recovery_point, offset)
        log.info("%s: the log starts at %d (records deleted; %d segment(s) gone)", self.tp, offset, deleted)
        return True

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    @property
    def min_insync_replicas(self) -> int:
        return self.config.min_insync_replicas

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        # In memory: the first append in the epoch saves it (LeaderEpochCache.assign).
        self.epochs.assign(epoch, start_offset, save=False)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def size_from(self, offset: int) -> int:
        """Bytes from the batch holding `offset` to the log end: what a replica whose log
        ends at `offset` still has to fetch (the whole log below the log start)."""
        if offset >= self.log_end_offset:
            return 0
        if offset <= self.log_start_offset:
            return self.size
        slot = bisect.bisect_right(self._bases, offset) - 1
        segment = self._segments[slot]
        position = segment.position_of(offset)
        within = 0 if position is None else segment.size - position
        return within + sum(s.size for s in self._segments[slot + 1 :])

    # --- appends ---

    def append_as_leader(self, data: bytes, leader_epoch: int) -> tuple[int, int]:
        """Check the batches as a client sent them (node/broker/log/validator.py), stamp
        offsets and `leader_epoch` on every batch, append, and return the first and last
        offsets given."""
        buffer = bytearray(data)
        headers = validate_as_leader(buffer, self.config.max_message_bytes, compacted=self.config.compact)
        if any(header.producer_id >= 0 for _, header in headers):
            retried = self.producer_state().retried(headers)
            if retried is not None:
                log.info(
                    "%s: a retried batch of producer %d answered with the offsets it was given, %d to %d",
                    self.tp,
                    headers[0][1].producer_id,
                    *retried,
                )
                return retried
        if self.config.compression_type != "producer":
            buffer, headers = self._recompressed(buffer, headers)
        offset = self.log_end_offset
        first = offset
        for position, header in headers:
            records.stamp(buffer, position, offset, leader_epoch)
            offset += header.last_offset_delta + 1
        with self._io("appending to"):
            if self.epochs.latest_epoch != leader_epoch or self.epochs.unsaved:
                self.epochs.assign(leader_epoch, first)
            stamped = [records.read_header(buffer, position) for position, _ in headers]
            self._write(buffer, stamped)
        if self._producers is not None:
            self._producers.appended(stamped)
        return first, offset - 1

    def _recompressed(self, buffer: bytearray, headers: Batches) -> tuple[bytearray, Batches]:
        """The batches in the topic's `compression.type`: those in another codec decompressed
        and compressed again (Kafka's LogValidator does the same), the others as they are."""
        codec = compression.CODECS.get(self.config.compression_type, compression.NONE)
        if all(header.attributes & records.COMPRESSION_MASK == codec for _, header in headers):
            return buffer, headers
        out = bytearray()
        for position, header in headers:
            if header.attributes & records.COMPRESSION_MASK == codec:
                out += buffer[position : position + header.size]
            else:
                section = records.record_bytes(buffer, position, header, MAX_DECOMPRESSED_BYTES)
                out += records.recompressed(header, section, codec)
        # Kafka holds the batch as stored to max.message.bytes.
        return out, validate_batches(out, self.config.max_message_bytes)

    def producer_state(self) -> ProducerState:
        """The idempotent producers' state: the first time, the newest snapshot's and the
        batch headers after it (every header when there is no snapshot)."""
        if self._producers is None:
            state, since = self._newest_producer_snapshot()
            for segment in self._segments:
                if segment.next_offset <= since:
                    continue
                state.appended(header for _, header in segment.headers() if header.base_offset >= since)
            self._producers = state
        return self._producers

    # --- producer-state snapshots (Kafka's `<offset>.snapshot`) ---

    def _snapshots(self) -> list[tuple[int, Path]]:
        """(offset, file) of each snapshot in the log's directory, oldest first."""
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            with contextlib.suppress(ValueError):
                found.append((int(path.name[: -len(SNAPSHOT_SUFFIX)]), path))
        return sorted(found)

    def _newest_producer_snapshot(self) -> tuple[ProducerState, int]:
        """The state of the newest readable snapshot not past the log end, and its offset;
        an empty state from offset 0 when there is none."""
        for offset, path in reversed(self._snapshots()):
            if offset > self.log_end_offset or offset < self.log_start_offset:
                # Below the start, batches between it and the start are gone (retention,
                # DeleteRecords) and the state would miss what they held.
                continue
            try:
                return ProducerState.from_snapshot(path.read_bytes()), offset
            except (OSError, CorruptMessage) as e:
                log.warning(
                    "%s: producer snapshot %s is unreadable (%s): the log is read instead",
                    self.tp,
                    path.name,
                    e,
                )
        return ProducerState(), 0

    def take_producer_snapshot(self) -> None:
        """The producers' state at the log end, written beside the log (when it was read at
        all), the older snapshots but one deleted."""
        if self._producers is None:
            return
        offset = self.log_end_offset
        path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
        temporary = path.with_suffix(".snapshot.tmp")
        with self._io("writing a producer snapshot of"):
            with temporary.open("wb") as out:
                out.write(self._producers.to_snapshot())
                out.flush()
                os.fsync(out.fileno())
            temporary.replace(path)
            for _, older in self._snapshots()[:-SNAPSHOTS_KEPT]:
                older.unlink(missing_ok=True)

    def _delete_snapshots_after(self, offset: int) -> None:
        """A truncation below a snapshot makes it a state of batches no longer there."""
        for snapshot_offset, path in self._snapshots():
            if snapshot_offset > offset:
                path.unlink(missing_ok=True)

    def append_as_follower(self, data: bytes | memoryview) -> int:
        """Append batches copied from the leader, offsets and epochs as the leader gave them.
        Returns the number of batches appended. A compacted leader's batches may leave gaps
        between them, never overlap."""
        headers = validate_batches(data, self.config.max_message_bytes)
        expected = self.log_end_offset
        for _, header in headers:
            if header.base_offset < expected:
                raise CorruptMessage(
                    f"{self.tp}: batch at offset {header.base_offset} does not follow the log end {expected}"
                )
            expected = header.next_offset
        with self._io("appending to"):
            for _, header in headers:
                if header.partition_leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            self._write(data, [header for _, header in headers])
        if self._producers is not None:
            self._producers.appended(header for _, header in headers)
        return len(headers)

    def _write(self, data: bytes | bytearray | memoryview, headers: list[records.BatchHeader]) -> None:
        first, last = headers[0], headers[-1]
        active = self._segments[-1]
        if active.size and (
            active.size + len(data) > self.config.roll_bytes
            or last.last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            self._roll(self.log_end_offset)
            active = self._segments[-1]
        active.append(data, first, last, max(header.max_timestamp for header in headers))
        self._unflushed += last.next_offset - first.base_offset
        if self._unflushed >= self.config.flush_messages:
            self._unflushed = 0
            self._want_flush(self.log_end_offset)

    def _roll(self, base_offset: int) -> None:
        if self._segments:
            log.debug("%s: rolling a new segment at offset %d", self.tp, base_offset)
            if base_offset == self.log_end_offset:
                self.take_producer_snapshot()  # as Kafka does on roll
            # Kafka flushes on roll: the rolled segments are fsynced and the recovery point
            # moves to the new one, so that an unclean restart recovers the active segment
            # only, not all that was written since the last clean shutdown.
            self._want_flush(base_offset)
        segment = LogSegment(self.directory, base_offset, self.config.index_interval_bytes)
        segment.next_offset = base_offset
        self._segments.append(segment)
        self._bases.append(base_offset)

    # --- reads ---

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes` (the first batch is
        returned whole even when larger, so a big batch cannot stall a reader) and only
        batches that end before `max_offset` (the high watermark, for consumers)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"{self.tp}: offset {offset} is outside {self.log_start_offset}..{self.log_end_offset}"
            )
        limit = self.log_end_offset if max_offset is None else max_offset
        if offset >= limit:
            return b""
        with self._io("reading"):
            return self._read(offset, max_bytes, limit)

    def _read(self, offset: int, max_bytes: int, limit: int) -> bytes:
        slot = bisect.bisect_right(self._bases, offset) - 1
        out = bytearray()
        while slot < len(self._segments) and len(out) < max_bytes:
            segment = self._segments[slot]
            try:
                position = segment.position_of(offset)
                chunk = b""
                if position is not None:
                    chunk = self._read_batches(segment, position, max_bytes - len(out), limit, first=not out)
            except CorruptMessage as e:
                # A header that makes no sense, met while scanning from the index entry
                # before `offset`: the log is known whole only below that entry.
                raise self._corruption(segment.indexed_offset_before(offset), e.message) from e
            out += chunk
            if position is not None and position + len(chunk) < segment.size:
                break
            slot += 1
            if slot < len(self._segments):
                offset = self._segments[slot].base_offset
        return bytes(out)

    def _read_batches(
        self, segment: LogSegment, position: int, budget: int, limit: int, *, first: bool
    ) -> bytes:
        end = position
        taken = []
        for at, header in segment.headers(position):
            if header.last_offset >= limit:
                break
            if at + header.size - position > budget and not (first and at == position):
                break
            end = at + header.size
            taken.append((at - position, header))
        if end == position:
            return b""
        chunk = segment.read(position, end - position)
        for at, header in taken:
            try:
                records.validate(chunk, at)
            except CorruptMessage as e:
                raise self._corruption(header.base_offset, e.message) from e
        return chunk

    def _corruption(self, offset: int, reason: str) -> LogCorruption:
        """A damaged batch at `offset`: remembered, so that the recovery point stays below it
        and the next start cuts the log there."""
        self._corrupt_at = offset if self._corrupt_at is None else min(self._corrupt_at, offset)
        self.recovery_point = min(self.recovery_point, offset)
        log.error(
            "%s: the batch at offset %d on disk is damaged (%s); it is not served", self.tp, offset, reason
        )
        return LogCorruption(f"{self.tp}: the batch at offset {offset} on disk is damaged: {reason}", offset)

    def scrub(self, max_bytes: int) -> int:
        """Check the CRC of about `max_bytes` of batches from where the last scrub stopped,
        going back to the log start after the end; the bytes checked. Raises LogCorruption."""
        if not self.log_start_offset <= self._scrub_offset < self.log_end_offset:
            self._scrub_offset = self.log_start_offset
        if self._scrub_offset >= self.log_end_offset:
            return 0
        data = self.read(self._scrub_offset, max_bytes)
        if data:
            *_, (_, last) = records.batches(data, check_crc=False)
            self._scrub_offset = last.next_offset
        return len(data)

    @property
    def scrubbed_to_end(self) -> bool:
        """Whether the last scrub reached the log end (the next one starts over)."""
        return self._scrub_offset >= self.log_end_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record stamped at or after
        `timestamp` (ListOffsets by time, as Kafka answers it), or None."""
        for segment in self._segments:
            if segment.max_timestamp != records.NO_TIMESTAMP and segment.max_timestamp < timestamp:
                continue
            for _, header in segment.headers():
                found = self._record_in(header, timestamp)
                if found is not None:
                    return found
        return None

    def offset_for_max_timestamp(self) -> tuple[int, int, int] | None:
        """ListOffsets' MAX_TIMESTAMP (-3, KIP-734): the first record with the largest
        timestamp in the log, or None for an empty log."""
        best: tuple[int, records.BatchHeader] | None = None
        for segment in self._segments:
            for _, header in segment.headers():
                if header.last_offset >= self.log_start_offset and (
                    best is None or header.max_timestamp > best[0]
                ):
                    best = header.max_timestamp, header
        return None if best is None else self._record_in(best[1], best[0])

    def _record_in(self, header: records.BatchHeader, timestamp: int) -> tuple[int, int, int] | None:
        if header.max_timestamp < timestamp or header.last_offset < self.log_start_offset:
            return None
        batch = self.read(max(header.base_offset, self.log_start_offset), 1)
        found = records.record_at_or_after(batch, header, timestamp, first_offset=self.log_start_offset)
        return None if found is None else (*found, header.partition_leader_epoch)

    # --- truncation ---

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after `offset` (a follower whose log diverged)."""
        if offset >= self.log_end_offset:
            # Nothing to drop but, as in Kafka's truncateTo, an epoch that starts at the log
            # end: this broker led in it and wrote nothing, and a leader since then may not
            # have had it. Dropping it rewrites the checkpoint, an I/O like any other.
            entries = self.epochs.entries
            if entries and entries[-1][1] >= self.log_end_offset:
                with self._io("truncating"):
                    self.epochs.truncate_from_end(self.log_end_offset)
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset if offset >= 0 else self.log_start_offset)
            return
        log.info("%s: truncating from %d to %d", self.tp, self.log_end_offset, offset)
        with self._io("truncating"):
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
                self._bases.pop()
            self._segments[-1].truncate_to(offset)
            self.epochs.truncate_from_end(self.log_end_offset)
            self._delete_snapshots_after(self.log_end_offset)
        self._forget_corruption_from(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._truncations += 1
        self._producers = None
        self.flush_wanted = min(self.flush_wanted, self.log_end_offset)
        self._answer_flush_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # what they waited for is gone

    def _forget_corruption_from(self, end: int) -> None:
        if self._corrupt_at is not None and self._corrupt_at >= end:
            self._corrupt_at = None

    def truncate_fully_and_start_at(self, offset: int) -> None:
        log.info("%s: emptying the log to start at offset %d", self.tp, offset)
        self._start_offset = offset
        with self._io("emptying"):
            for segment in self._segments:
                segment.delete()
            self._segments, self._bases = [], []
            self._producers = None
            self._delete_snapshots_after(-1)
            self._roll(offset)
            self.epochs.clear()
        self._corrupt_at = None
        self.recovery_point = offset
        self._truncations += 1
        self._producers = None
        self.flush_wanted = offset
        self._answer_flush_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # --- retention and flushing ---

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Delete closed segments past `retention.ms` or beyond `retention.bytes`, never
        one that holds an offset at or after the high watermark. Returns how many went."""
        with self._io("deleting old segments of"):
            return self._delete_old_segments(now_ms, high_watermark)

    def _delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        if not self.config.delete:
            return 0  # cleanup.policy=compact alone: nothing goes by age or size
        deleted = 0
        size = self.size
        while len(self._segments) > 1:
            segment, following = self._segments[0], self._segments[1]
            if following.base_offset > high_watermark:
                break
            expired = (
                self.config.retention_ms >= 0
                and segment.max_timestamp != records.NO_TIMESTAMP
                and now_ms - segment.max_timestamp > self.config.retention_ms
            )
            oversized = (
                self.config.retention_bytes >= 0 and size - segment.size >= self.config.retention_bytes
            )
            # A closed segment compaction emptied has no timestamp to expire by, and nothing
            # to lose: it would hold back the retention of those after it.
            expired = expired or segment.size == 0
            if not (expired or oversized):
                break
            size -= segment.size
            self._segments.pop(0).delete()
            self._bases.pop(0)
            deleted += 1
        if deleted:
            self.epochs.truncate_from_start(self.log_start_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            log.info(
                "%s: retention deleted %d segment(s); the log starts at %d",
                self.tp,
                deleted,
                self.log_start_offset,
            )
        return deleted

    # --- compaction (node/broker/log/cleaner.py) ---

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    def cleanable_segments(self, high_watermark: int, now_ms: int) -> list[LogSegment]:
        """The segments the cleaner may rewrite (Kafka's firstUncleanableOffset): the closed
        ones, from the log start, whose offsets all lie below `high_watermark`, up to the first
        with a batch newer than min.compaction.lag.ms. Never the active segment."""
        lag = self.config.min_compaction_lag_ms
        cleanable = []
        for segment, following in zip(self._segments, self._segments[1:], strict=False):
            if following.base_offset > high_watermark:
                break
            if lag > 0 and now_ms - segment.max_timestamp < lag:
                break
            cleanable.append(segment)
        return cleanable

    def replace_segments(self, cleaned: compaction.CleanedGroup) -> bool:
        """Swap the segments `cleaned` was written from for it, unless they changed since
        (deleted by retention, truncated, or the log went offline): then False, and the
        cleaned files are removed."""
        slot = next((i for i, s in enumerate(self._segments) if s.path == cleaned.sources[0].path), None)
        current = [] if slot is None else self._segments[slot : slot + len(cleaned.sources)]
        unchanged = (
            not self.offline
            and slot is not None
            and slot + len(cleaned.sources) < len(self._segments)  # the active segment stays
            and [(s.path, s.base_offset, s.size) for s in current]
            == [(s.path, s.base_offset, s.size) for s in cleaned.sources]
        )
        if not unchanged:
            compaction.discard(compaction.CleanResult([cleaned]))
            return False
        assert slot is not None
        with self._io("swapping cleaned segments into"):
            swapped_index = _swap_name(cleaned.index_path)
            swapped_log = _swap_name(cleaned.log_path)
            cleaned.index_path.replace(swapped_index)
            cleaned.log_path.replace(swapped_log)  # the clean is done from here on
            for segment in current:
                segment.delete()
            swapped_index.replace(current[0].index_path)
            swapped_log.replace(current[0].path)
            segment = LogSegment(self.directory, cleaned.base_offset, self.config.index_interval_bytes)
            segment.load_index()
            self._segments[slot : slot + len(current)] = [segment]
            self._bases[slot : slot + len(current)] = [cleaned.base_offset]
            _fsync_directory(self.directory)
        return True

    def maybe_flush(self) -> None:
        if self._unflushed and (time.monotonic() - self._last_flush) * 1000 >= self.config.flush_ms:
            self._unflushed = 0
            self._want_flush(self.log_end_offset)

    def _want_flush(self, upto: int) -> None:
        if self._flusher is None:
            self.flush()
            return
        self._last_flush = time.monotonic()
        if upto > self.flush_wanted:
            self.flush_wanted = upto
            self._flusher(self)

    def flush_waiter(self, offset: int) -> asyncio.Future[ErrorCode] | None:
        """A future done once the log is on disk up to `offset`, if a flush reaching it is
        wanted and not done (the append that set off `flush.messages`); None otherwise. As in
        Kafka, whose append flushes there and then: that produce is answered after its fsync,
        the others do not wait for one."""
        if self._flusher is None or self.recovery_point >= offset or self.flush_wanted < offset:
            return None
        waiter: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((offset, waiter))
        return waiter

    def _answer_flush_waiters(self, code: ErrorCode | None = None) -> None:
        """Those whose offset is on disk now, NONE; with `code`, all of them, that code."""
        if not self._flush_waiters:
            return
        waiting = []
        for offset, waiter in self._flush_waiters:
            if waiter.done():
                continue
            if code is not None:
                waiter.set_result(code)
            elif offset <= self.recovery_point:
                waiter.set_result(ErrorCode.NONE)
            else:
                waiting.append((offset, waiter))
        self._flush_waiters = waiting

    def files_to_flush(self) -> tuple[int, int, list[Path]]:
        """(flush wanted up to, truncations, the files holding offsets from the recovery point
        to there): what the flusher fsyncs, on its thread, before it calls `flushed`."""
        upto = min(self.flush_wanted, self.log_end_offset)
        first = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        last = bisect.bisect_left(self._bases, upto)
        paths = [
            path for segment in self._segments[first:last] for path in (segment.path, segment.index_path)
        ]
        # The directory too (Kafka's flushDirIfExists): a rolled segment's entry in it.
        return upto, self._truncations, [*paths, self.directory]

    def flushed(self, upto: int, truncations: int) -> None:
        """The files `files_to_flush` named are on disk: the recovery point moves up to
        `upto`, unless the log was truncated since (what was flushed may be gone)."""
        if truncations != self._truncations:
            return
        end = upto if self._corrupt_at is None else min(upto, self._corrupt_at)
        self.recovery_point = max(self.recovery_point, min(end, self.log_end_offset))
        self._answer_flush_waiters()

    def flush_failed(self, error: OSError) -> None:
        """The flusher's fsync failed: as any I/O error of this log."""
        with contextlib.suppress(KafkaStorageError), self._io("flushing"):
            raise error
        self._answer_flush_waiters(ErrorCode.KAFKA_STORAGE_ERROR)

    def flush(self) -> None:
        """Fsync every segment holding offsets at or after the recovery point (a rolled one
        may not have been yet), then move the recovery point to the log end, or only up to
        a batch found damaged."""
        first = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        with self._io("flushing"):
            for segment in self._segments[first:]:
                segment.flush()
        end = self.log_end_offset
        self.recovery_point = end if self._corrupt_at is None else min(end, self._corrupt_at)
        self._unflushed = 0
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Close the files; a log whose directory failed closes what it can."""
        self._answer_flush_waiters(ErrorCode.KAFKA_STORAGE_ERROR)
        if not self.offline:
            with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                self.take_producer_snapshot()
        for segment in self._segments:
            try:
                segment.close()
            except OSError as e:
                log.debug("closing %s: %s", segment.path, e)

    def delete(self) -> None:
        """Close and remove the log's directory; raises OSError if it cannot be removed."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)
