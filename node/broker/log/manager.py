"""LogManager: every partition log under `log.dirs`, and their checkpoints.

On start it opens (and so recovers) every partition directory it finds; a directory written
before Keel's batches carried Kafka's CRC-32C is converted once, before its logs open
(`crc_format`). New logs go to the directory holding the fewest. Each directory has three
checkpoints, written periodically and on shutdown: `replication-offset-checkpoint` with the
high watermark of each partition in it, `recovery-point-offset-checkpoint` with each log's
recovery point (what recovery after a crash may skip), and `log-start-offset-checkpoint` with
each log's start (where DeleteRecords moved it). A clean shutdown leaves
`.kafka_cleanshutdown` in each directory; loading a directory that holds it skips recovery, and
removes it, so that a later crash is seen as one.

A directory where an I/O error happened is offline (Kafka's handleLogDirFailure): its logs stay
known, so that their partitions answer KAFKA_STORAGE_ERROR rather than being created afresh
elsewhere, but nothing touches its files again and new logs go to the other directories.
Bringing it back takes a restart of the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.base.loop_slices import each
from actors.base.ports import TopicPartition
from node.broker.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from node.broker.log.config import LogConfig
from node.broker.log.crc_format import ensure_crc32c
from node.broker.log.failure_channel import LogDirFailureChannel
from node.broker.log.log import OUT_OF_DESCRIPTORS, Log, directory_name
from wire.errors import KafkaStorageError

log = logging.getLogger(__name__)

HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
# Each log's start where DeleteRecords moved it inside a segment (Kafka's file).
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
# Kafka's: each compacted log's first offset not cleaned yet (node/broker/log/cleaner.py).
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def _parse_directory(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    def __init__(self, log_dirs: list[Path], defaults: LogConfig) -> None:
        self.log_dirs = log_dirs
        self.defaults = defaults
        self.failures = LogDirFailureChannel()
        self._logs: dict[TopicPartition, Log] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        # Whether the high-watermark checkpoint on disk may differ from `_high_watermarks`
        # over the logs there are: a log came or went, or a write did not go through.
        self._high_watermarks_unwritten = True
        # Logs per directory, so that placing a new log does not count them all.
        self._per_dir: dict[Path, int] = {}
        # Logs that failed to load, by the directory (offline since) that holds them: never
        # created afresh elsewhere, where an empty log would pass for this replica's data.
        self._unloadable: dict[TopicPartition, Path] = {}
        # The checkpoint writes in flight, by file name.
        self._writes: dict[str, asyncio.Future[list[tuple[Path, OSError]]]] = {}
        # Logs that want flushing (a segment rolled, or their flush settings say so), by
        # identity; one task fsyncs them on a thread (Kafka's scheduled flush-log), never the
        # event loop: a topic with flush.messages=1 would otherwise hold it for an fsync per
        # append.
        self._to_flush: dict[int, Log] = {}
        self._flusher: asyncio.Task[None] | None = None
        # Whether any log was ever compacted here: only then is the cleaner's checkpoint kept.
        self.compacted = False

    def load(self) -> None:
        started = time.monotonic()
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
            try:
                ensure_crc32c(directory)
            except OSError as e:
                for child in directory.iterdir():
                    if (tp := _parse_directory(child.name)) is not None:
                        self._unloadable[tp] = directory
                self.failures.maybe_add_offline_log_dir(directory, f"cannot convert its logs to CRC-32C: {e}")
                continue
            self._high_watermarks.update(_read_offsets(directory / HIGH_WATERMARK_FILE, "high-watermark"))
            recovery_points = _read_offsets(directory / RECOVERY_POINT_FILE, "recovery-point")
            start_offsets = _read_offsets(directory / LOG_START_OFFSET_FILE, "log-start-offset")
            clean_offsets = _read_offsets(directory / CLEANER_OFFSET_FILE, "cleaner-offset")
            marker = directory / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            for child in sorted(directory.iterdir()):
                tp = _parse_directory(child.name)
                if tp is None or not child.is_dir():
                    continue
                try:
                    self._logs[tp] = Log(
                        child,
                        tp,
                        self.defaults,
                        recovery_point=recovery_points.get(tp, 0),
                        log_start_offset=start_offsets.get(tp, 0),
                        clean_shutdown=clean,
                        failures=self.failures,
                        flusher=self._flush_wanted,
                    )
                except Exception as e:  # whatever it is, the broker starts without this directory
                    log.exception("cannot load the log of %s from %s", tp, child)
                    self._unloadable[tp] = directory
                    self.failures.maybe_add_offline_log_dir(directory, f"cannot load the log of {tp}: {e}")
                    continue
                self._logs[tp].clean_offset = clean_offsets.get(tp, 0)
                self.compacted = self.compacted or tp in clean_offsets
                self._per_dir[directory] = self._per_dir.get(directory, 0) + 1
            if not clean:
                log.info(
                    "%s was not shut down cleanly: its logs were recovered from their recovery points",
                    directory,
                )
            marker.unlink(missing_ok=True)
        log.info("loaded %d logs in %.0f ms", len(self._logs), (time.monotonic() - started) * 1000)

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return self._logs

    def get(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create(self, tp: TopicPartition, topic_configs: Mapping[str, str]) -> Log:
        config = self.defaults.with_topic_configs(topic_configs)
        existing = self._logs.get(tp)
        if existing is not None:
            existing.config = config
            return existing
        if tp in self._unloadable:
            raise KafkaStorageError(f"the log of {tp} in {self._unloadable[tp]} could not be loaded")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"cannot create the log of {tp}: every log directory is offline")
        directory = min(online, key=lambda d: self._per_dir.get(d, 0))
        created = Log(
            directory / directory_name(tp), tp, config, failures=self.failures, flusher=self._flush_wanted
        )
        self._logs[tp] = created
        self._per_dir[directory] = self._per_dir.get(directory, 0) + 1
        self._high_watermarks_unwritten = True
        return created

    def delete(self, tp: TopicPartition) -> None:
        """Remove the partition's log from disk. On OSError the log stays known, so that
        deleting it again retries."""
        removed = self._logs.pop(tp, None)
        if removed is None:
            self._high_watermarks.pop(tp, None)
            return
        try:
            removed.delete()
        except OSError:
            self._logs[tp] = removed
            raise
        self._high_watermarks.pop(tp, None)
        self._per_dir[removed.directory.parent] -= 1
        self._high_watermarks_unwritten = True

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    def handle_log_dir_failure(self, directory: Path) -> list[TopicPartition]:
        """Take `directory` offline: close its logs (they fail every operation from now on);
        the partitions whose logs are in it."""
        offline = []
        for tp, partition_log in self._logs.items():
            if partition_log.directory.parent == directory:
                partition_log.offline = True
                partition_log.close()
                offline.append(tp)
        offline += [tp for tp, held_in in self._unloadable.items() if held_in == directory]
        return sorted(offline)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self._high_watermarks.get(tp, 0)

    async def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """The checkpoint written again only when a high watermark moved or a log came or
        went: at 1M logs a file of every line every 5 s is a second of work for nothing."""
        if not high_watermarks and not self._high_watermarks_unwritten:
            return
        self._high_watermarks.update(high_watermarks)
        self._high_watermarks_unwritten = False
        written = await self._write_offsets(
            HIGH_WATERMARK_FILE, lambda tp, _: self._high_watermarks.get(tp, 0)
        )
        if not written:
            self._high_watermarks_unwritten = True

    async def checkpoint_recovery_points(self) -> None:
        """The recovery points, and beside them each log's start (where DeleteRecords moved
        it) and where each log's compaction got to."""
        await self._write_offsets(RECOVERY_POINT_FILE, _recovery_point)
        await self._write_offsets(LOG_START_OFFSET_FILE, _log_start_offset)
        if self.compacted:
            await self._write_offsets(CLEANER_OFFSET_FILE, _clean_offset)

    async def _write_offsets(self, name: str, offset_of: Callable[[TopicPartition, Log], int]) -> bool:
        """One checkpoint per online log directory: `topic partition offset` for each log in
        it. A directory the write fails in goes offline; the others are still written (the
        answer: whether every one was). The lines are built in slices (at 200k logs, about
        150 ms of the loop in one step), and written and synced on a thread of their own, as
        Kafka's scheduler does."""
        entries: dict[Path, list[str]] = {directory: [] for directory in self.online_dirs}
        # Over a copy of the keys: a copy of the items would be 200k new pairs, each tracked
        # by the garbage collector (node/broker/gc_tuning.py).
        async for tp in each(list(self._logs)):
            partition_log = self._logs.get(tp)
            if partition_log is None:
                continue
            lines = entries.get(partition_log.directory.parent)
            if lines is not None:
                lines.append(f"{tp.topic} {tp.partition} {offset_of(tp, partition_log)}")
        # A write of the same checkpoint by a caller that was cancelled still runs on its
        # thread: this one goes after it.
        previous = self._writes.get(name)
        if previous is not None:
            await asyncio.wait([previous])
        write = asyncio.ensure_future(asyncio.to_thread(_write_checkpoints, name, entries))
        self._writes[name] = write
        errors = await asyncio.shield(write)
        for directory, error in errors:
            if error.errno in OUT_OF_DESCRIPTORS:  # not the disk: the next checkpoint retries
                log.warning("cannot write %s now, no file descriptor free: %s", directory / name, error)
                continue
            self.failures.maybe_add_offline_log_dir(
                directory, f"error while writing {directory / name}: {error}"
            )
        return not errors

    async def cleanup(self, now_ms: int) -> None:
        """Retention for every online log, below its checkpointed high watermark."""
        async for tp in each(list(self._logs)):
            partition_log = self._logs.get(tp)
            if partition_log is not None and not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.delete_old_segments(now_ms, self._high_watermarks.get(tp, 0))

    async def flush_due(self) -> None:
        async for partition_log in each(list(self._logs.values())):
            if not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.maybe_flush()

    def _flush_wanted(self, partition_log: Log) -> None:
        self._to_flush[id(partition_log)] = partition_log
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush(), name="log-flusher")

    async def _flush(self) -> None:
        """Flush the logs that want it, all of them in one job on a thread, then move each
        one's recovery point; again while more came meanwhile."""
        while self._to_flush:
            wanted = [partition_log for partition_log in self._to_flush.values() if not partition_log.offline]
            self._to_flush.clear()
            work = [(partition_log, *partition_log.files_to_flush()) for partition_log in wanted]
            errors = await asyncio.to_thread(_fsync_files, [paths for *_, paths in work])
            for (partition_log, upto, truncations, _), error in zip(work, errors, strict=True):
                if partition_log.offline:
                    continue
                if error is None:
                    partition_log.flushed(upto, truncations)
                else:
                    partition_log.flush_failed(error)

    async def flushed(self) -> None:
        """Once every flush wanted so far is done (for tests and shutdown)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher])

    async def close(self) -> None:
        """Kafka's clean shutdown: flush every log, checkpoint the recovery points (now each
        log's end), then leave the marker that lets the next start skip recovery."""
        await self.flushed()
        for partition_log in self._logs.values():
            if not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.flush()
            partition_log.close()
        await self.checkpoint_recovery_points()
        for directory in self.online_dirs:
            try:
                (directory / CLEAN_SHUTDOWN_FILE).touch()
            except OSError as e:
                log.error("cannot mark %s shut down cleanly: %s", directory, e)


def _write_checkpoints(name: str, entries: dict[Path, list[str]]) -> list[tuple[Path, OSError]]:
    """On a thread of its own (the fsync waits for the disk: once 0.4-0.5 s at 200k logs):
    each directory's checkpoint; the directories it failed in."""
    failed = []
    for directory, lines in entries.items():
        try:
            write_checkpoint(directory / name, lines)
        except OSError as e:
            failed.append((directory, e))
    return failed


def _fsync_files(groups: list[list[Path]]) -> list[OSError | None]:
    """On a thread: fsync each group's files (through a descriptor of its own: the log may
    close its own meanwhile); per group, the first error. A file removed since (retention,
    a truncation) has nothing left to flush."""
    errors: list[OSError | None] = []
    for paths in groups:
        error = None
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError as e:
                error = e
                break
            try:
                os.fsync(fd)
            except OSError as e:
                error = e
                break
            finally:
                os.close(fd)
        errors.append(error)
    return errors


def _recovery_point(_: TopicPartition, partition_log: Log) -> int:
    return partition_log.recovery_point


def _log_start_offset(_: TopicPartition, partition_log: Log) -> int:
    return partition_log.log_start_offset


def _clean_offset(_: TopicPartition, partition_log: Log) -> int:
    return partition_log.clean_offset


def _read_offsets(path: Path, kind: str) -> dict[TopicPartition, int]:
    """A `topic partition offset` checkpoint; a damaged one counts as none."""
    try:
        return {
            TopicPartition(topic, int(partition)): int(offset)
            for topic, partition, offset in read_checkpoint(path)
        }
    except (CheckpointError, ValueError) as e:
        log.warning("ignoring a damaged %s checkpoint: %s", kind, e)
        return {}
