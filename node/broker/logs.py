"""A broker's own logs, split as Kafka's `config/log4j.properties` splits them, in the first of
`log.dirs`:

- `server.log`: every record of the process (what stderr shows too);
- `controller.log`: the controller's events, elections and epochs, Kafka's `kafka.controller`
  logger: here `actors.controller` and the controller's channel manager; they reach
  server.log as well (Kafka's additivity is off there; a Keel broker's controller lines are
  few and server.log stays the one file with everything in order);
- `state-change.log`: Kafka's `state.change.logger` (actors/base/state_change_log.py), every
  partition and replica state change with the controller epoch, and only there: a failover
  of 100k partitions writes as many lines, which would drown server.log (Kafka's additivity
  is off for it too).

Each file rotates by size (`log.file.max.bytes`, `log.file.backup.count`: `server.log.1` is
the newest backup). `log.format=json` writes one JSON object per line, in the files and on
stderr. The log manager and every tool that walks a log directory look only at
`<topic>-<partition>` directories, so these files sit beside the partitions untouched.
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TextIO

import orjson

from actors.base.state_change_log import STATE_CHANGE_LOGGER
from node.broker.config import BrokerConfig
from node.config.properties import ConfigError

SERVER_LOG = "server.log"
CONTROLLER_LOG = "controller.log"
STATE_CHANGE_LOG = "state-change.log"

# Kafka's kafka.controller package: the controller and its ControllerChannelManager.
CONTROLLER_LOGGERS = ("actors.controller", "node.broker.channel_manager")


@dataclasses.dataclass(frozen=True)
class LogSettings:
    directory: Path
    broker_id: int
    format: str = "text"
    max_bytes: int = 104_857_600
    backup_count: int = 10

    @classmethod
    def of(cls, config: BrokerConfig) -> LogSettings:
        return cls(
            config.log_dirs[0],
            config.broker_id,
            str(config.get_str("log.format")),
            config.get_int("log.file.max.bytes"),
            config.get_int("log.file.backup.count"),
        )


class TextFormatter(logging.Formatter):
    """`<time> <LEVEL> [broker N] <logger>: <message>`; a message of several lines (a batch
    of state changes) is as many lines, each with the same head, so that grep finds each."""

    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self._broker = f"[broker {broker_id}]"

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        head = f"{self.formatTime(record)} {record.levelname} {self._broker} {record.name}: "
        text = head + record.message.replace("\n", "\n" + head)
        trace = _trace(self, record)
        return f"{text}\n{trace}" if trace else text


class JsonFormatter(logging.Formatter):
    """One object per line: time (UTC, ISO 8601), level, logger, message, broker_id, and the
    traceback, if any, as `exception` on the record's last line."""

    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self._broker_id = broker_id

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        time = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        objects = [
            {
                "time": time,
                "level": record.levelname,
                "logger": record.name,
                "message": line,
                "broker_id": self._broker_id,
            }
            for line in record.message.split("\n")
        ]
        trace = _trace(self, record)
        if trace:
            objects[-1]["exception"] = trace
        return "\n".join(orjson.dumps(o).decode() for o in objects)


def _trace(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    parts = [record.exc_text or "", formatter.formatStack(record.stack_info) if record.stack_info else ""]
    return "\n".join(p for p in parts if p)


def formatter(settings: LogSettings) -> logging.Formatter:
    if settings.format == "json":
        return JsonFormatter(settings.broker_id)
    return TextFormatter(settings.broker_id)


@dataclasses.dataclass
class BrokerLogs:
    """The handlers installed, so that a test (or a second start in one process) can take
    them off again."""

    handlers: dict[str, list[logging.Handler]]

    def close(self) -> None:
        for name, handlers in self.handlers.items():
            logger = logging.getLogger(name or None)
            for handler in handlers:
                logger.removeHandler(handler)
                handler.close()
        logging.getLogger(STATE_CHANGE_LOGGER).propagate = True


def configure_logging(settings: LogSettings, *, stream: TextIO | None = None) -> BrokerLogs:
    """Route the process's records: stderr and server.log get every logger's, controller.log
    the controller's, state-change.log the state changes (off stderr and server.log).
    A file that cannot be opened is a configuration error naming it."""
    shown = formatter(settings)

    def rotating(name: str) -> logging.Handler:
        path = settings.directory / name
        try:
            handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=settings.max_bytes, backupCount=settings.backup_count, encoding="utf-8"
            )
        except OSError as e:
            raise ConfigError("log.dirs", f"cannot write {path}: {e.strerror or e}") from None
        handler.setFormatter(shown)
        return handler

    console = logging.StreamHandler(stream or sys.stderr)
    console.setFormatter(shown)
    installed: dict[str, list[logging.Handler]] = {
        "": [console, rotating(SERVER_LOG)],
        STATE_CHANGE_LOGGER: [rotating(STATE_CHANGE_LOG)],
    }
    controller = rotating(CONTROLLER_LOG)
    for name in CONTROLLER_LOGGERS:
        installed[name] = [controller]
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for name, handlers in installed.items():
        for handler in handlers:
            logging.getLogger(name or None).addHandler(handler)
    state_change = logging.getLogger(STATE_CHANGE_LOGGER)
    state_change.propagate = False
    state_change.setLevel(logging.INFO)
    # aiozk logs every reconnect attempt with a traceback; its warnings are enough.
    logging.getLogger("aiozk").setLevel(logging.WARNING)
    return BrokerLogs(installed)


def log_files(directory: Path, name: str) -> list[Path]:
    """A log's files, oldest first: its backups (`name.N` ... `name.1`), then `name`."""
    current = directory / name
    return [*_backups(directory, name), *([current] if current.exists() else [])]


def _backups(directory: Path, name: str) -> list[Path]:
    return sorted(
        (p for p in directory.glob(f"{name}.*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )


def read_log(directory: Path, name: str) -> str:
    """A log's whole text across its rotations, oldest first (empty when there is none)."""
    return "".join(p.read_text(errors="replace") for p in log_files(directory, name))


def follow_log(
    directory: Path,
    name: str,
    out: TextIO,
    *,
    interval: float = 0.2,
    until: Callable[[], bool] = lambda: False,
) -> None:
    """Write a log to `out` as `tail -F` would: its backups and current file, then whatever is
    appended, until interrupted (or `until()`). When the file rotates, the rest of the file
    being read is written, then the backups made since, then the new file."""
    path = directory / name
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    current = path.open("rb")
    _write_backups(out, directory, name, -1, os.fstat(current.fileno()).st_ino)
    try:
        while not until():
            chunk = current.read(1 << 16)
            if chunk:
                out.write(decoder.decode(chunk))
                out.flush()
                continue
            reading = os.fstat(current.fileno()).st_ino
            try:
                rotated = path.stat().st_ino != reading
            except FileNotFoundError:
                rotated = False  # between the rename and the new file: look again
            if not rotated:
                time.sleep(interval)
                continue
            # Written to before it was renamed, and not since: what came after the last read.
            out.write(decoder.decode(current.read()))
            current.close()
            # The new file is opened before the backups are listed: one more rotation
            # meanwhile makes it a backup too, and those between the two are the ones missed.
            current = path.open("rb")
            _write_backups(out, directory, name, reading, os.fstat(current.fileno()).st_ino)
            out.flush()
    finally:
        current.close()


def _write_backups(out: TextIO, directory: Path, name: str, after: int, before: int) -> None:
    for backup in _open_rotated_between(directory, name, after, before):
        with backup:
            out.write(backup.read().decode("utf-8", errors="replace"))


def _open_rotated_between(directory: Path, name: str, after: int, before: int) -> list[BinaryIO]:
    """The backups newer than the file of inode `after` and older than that of `before`
    (from the oldest backup, or to the newest, where either is gone), oldest first, opened,
    each checked to be the file listed: a rotation renames them meanwhile. Listed again when
    one moved (a few times at most; then none)."""
    for _ in range(5):
        handles: list[BinaryIO] = []
        try:
            listed = [(p, _inode(p)) for p in _backups(directory, name)]
            inodes = [inode for _, inode in listed]
            start = inodes.index(after) + 1 if after in inodes else 0
            end = inodes.index(before) if before in inodes else len(listed)
            for path, inode in listed[start:end]:
                handles.append(path.open("rb"))
                if os.fstat(handles[-1].fileno()).st_ino != inode:
                    raise FileNotFoundError(path)  # another file by now
            return handles
        except FileNotFoundError:
            for handle in handles:
                handle.close()
    return []


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:  # rotated away meanwhile
        return None
