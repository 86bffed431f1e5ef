"""LogManager: every partition log under `log.dirs`, and their checkpoints.

On start it opens (and so recovers) every partition directory it finds. New logs go to the
directory holding the fewest. Each directory has two checkpoints, written periodically and on
shutdown: `replication-offset-checkpoint` with the high watermark of each partition in it, and
`recovery-point-offset-checkpoint` with each log's recovery point (what recovery after a crash
may skip). A clean shutdown leaves `.kafka_cleanshutdown` in each directory; loading a
directory that holds it skips recovery, and removes it, so that a later crash is seen as one.

A directory where an I/O error happened is offline (Kafka's handleLogDirFailure): its logs stay
known, so that their partitions answer KAFKA_STORAGE_ERROR rather than being created afresh
elsewhere, but nothing touches its files again and new logs go to the other directories.
Bringing it back takes a restart of the broker.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.ports import TopicPartition
from node.broker.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from node.broker.log.config import LogConfig
from node.broker.log.failure_channel import LogDirFailureChannel
from node.broker.log.log import Log, directory_name
from wire.errors import KafkaStorageError

log = logging.getLogger(__name__)

HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
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
        # Logs per directory, so that placing a new log does not count them all.
        self._per_dir: dict[Path, int] = {}

    def load(self) -> None:
        started = time.monotonic()
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
            self._high_watermarks.update(_read_offsets(directory / HIGH_WATERMARK_FILE, "high-watermark"))
            recovery_points = _read_offsets(directory / RECOVERY_POINT_FILE, "recovery-point")
            marker = directory / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            for child in sorted(directory.iterdir()):
                tp = _parse_directory(child.name)
                if tp is not None and child.is_dir():
                    self._logs[tp] = Log(
                        child,
                        tp,
                        self.defaults,
                        recovery_point=recovery_points.get(tp, 0),
                        clean_shutdown=clean,
                    )
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
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"cannot create the log of {tp}: every log directory is offline")
        directory = min(online, key=lambda d: self._per_dir.get(d, 0))
        created = Log(directory / directory_name(tp), tp, config, failures=self.failures)
        self._logs[tp] = created
        self._per_dir[directory] = self._per_dir.get(directory, 0) + 1
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
        return sorted(offline)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self._high_watermarks.get(tp, 0)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self._high_watermarks.update(high_watermarks)
        self._write_offsets(HIGH_WATERMARK_FILE, lambda tp, _: self._high_watermarks.get(tp, 0))

    def checkpoint_recovery_points(self) -> None:
        self._write_offsets(RECOVERY_POINT_FILE, lambda _, partition_log: partition_log.recovery_point)

    def _write_offsets(self, name: str, offset_of: Callable[[TopicPartition, Log], int]) -> None:
        """One checkpoint per online log directory: `topic partition offset` for each log in
        it. A directory the write fails in goes offline; the others are still written."""
        entries: dict[Path, list[str]] = {directory: [] for directory in self.online_dirs}
        for tp, partition_log in sorted(self._logs.items()):
            lines = entries.get(partition_log.directory.parent)
            if lines is not None:
                lines.append(f"{tp.topic} {tp.partition} {offset_of(tp, partition_log)}")
        for directory, lines in entries.items():
            try:
                write_checkpoint(directory / name, lines)
            except OSError as e:
                self.failures.maybe_add_offline_log_dir(
                    directory, f"error while writing {directory / name}: {e}"
                )

    def cleanup(self, now_ms: int) -> None:
        """Retention for every online log, below its checkpointed high watermark."""
        for tp, partition_log in list(self._logs.items()):
            if not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.delete_old_segments(now_ms, self._high_watermarks.get(tp, 0))

    def flush_due(self) -> None:
        for partition_log in self._logs.values():
            if not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.maybe_flush()

    def close(self) -> None:
        """Kafka's clean shutdown: flush every log, checkpoint the recovery points (now each
        log's end), then leave the marker that lets the next start skip recovery."""
        for partition_log in self._logs.values():
            if not partition_log.offline:
                with contextlib.suppress(KafkaStorageError):  # reported to the failure channel
                    partition_log.flush()
            partition_log.close()
        self.checkpoint_recovery_points()
        for directory in self.online_dirs:
            try:
                (directory / CLEAN_SHUTDOWN_FILE).touch()
            except OSError as e:
                log.error("cannot mark %s shut down cleanly: %s", directory, e)


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
