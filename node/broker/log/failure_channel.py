"""Kafka's LogDirFailureChannel: where an I/O error on a log directory is reported, once.

Whatever meets an OSError while touching a log (an append, a roll, a flush, a checkpoint)
reports the directory here and fails its own operation with KAFKA_STORAGE_ERROR. The broker's
log-directory failure handler takes each directory off the channel, once, and takes it
offline: its partitions stop, the controller is told through ZooKeeper (spec §7.11).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: set[Path] = set()
        self._queue: asyncio.Queue[Path] = asyncio.Queue()

    def is_offline(self, directory: Path) -> bool:
        return directory in self._offline

    @property
    def offline(self) -> frozenset[Path]:
        return frozenset(self._offline)

    def maybe_add_offline_log_dir(self, directory: Path, message: str) -> None:
        """The first report of a directory queues it for the failure handler; later ones
        are only logged at debug level (one failure tends to bring many)."""
        if directory in self._offline:
            log.debug("%s (the directory is offline already)", message)
            return
        log.error("%s: the log directory %s goes offline", message, directory)
        self._offline.add(directory)
        self._queue.put_nowait(directory)

    async def take_next_offline_log_dir(self) -> Path:
        return await self._queue.get()
