"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

Written to a temporary file, fsynced and renamed over the old one, so a crash leaves either
the old checkpoint or the new one, never half of each.
"""

from __future__ import annotations

import os
from pathlib import Path

VERSION = 0


class CheckpointError(Exception):
    pass


def write_checkpoint(path: Path, entries: list[str]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        out.write(f"{VERSION}\n{len(entries)}\n")
        for entry in entries:
            out.write(entry + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def read_checkpoint(path: Path) -> list[list[str]]:
    """The entries, each split on whitespace; an absent file has none."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: not a version {VERSION} checkpoint")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: {len(entries)} entries, the header says {count}")
    return entries
