"""Output for the command-line tools: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from node.command.entry import UsageError


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def print_json(value: object) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


class OutputFile:
    """A file a command writes at its end, opened at its start: a path that cannot be written
    is a usage error before anything is sent. The file is not truncated until `write`, so a
    command that fails earlier leaves a file from a previous run as it was, and removes one
    it created.

        with OutputFile(args.output, "--output") as out:
            ...                        # act
            out.write(data)            # OSError here is the caller's to report
    """

    def __init__(self, path: Path, option: str) -> None:
        self.path = path
        if path.is_dir():
            raise UsageError(f"{option} {path} is a directory; name a file")
        existed = path.exists()
        try:
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise UsageError(f"cannot write {option} {path}: {e.strerror}; name a writable file") from None
        self._created = not existed

    def write(self, data: bytes) -> None:
        fd, self._fd = self._fd, None
        assert fd is not None, f"{self.path} is written once"
        try:
            if os.fstat(fd).st_size:
                os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def discard(self) -> None:
        """Close without writing; remove the file if this command created it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        os.close(fd)
        if self._created:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()
