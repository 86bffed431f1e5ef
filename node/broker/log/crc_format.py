"""Which checksum a log directory's batches carry, and the one-time change to Kafka's.

Keel's batches carry Kafka's CRC-32C, so that Kafka's clients, which check it, read them as
they are. Logs written before carry zlib's CRC-32 in the same place. A directory says it holds
CRC-32C batches with a `log-format` file; one without it is converted before its logs load:
every whole batch of every segment whose CRC is zlib's gets its CRC-32C, written over the 4
bytes in place (nothing else in the batch moves), each file synced, and only then the marker
written. A start that dies halfway converts the rest the next time; a batch already converted
is left alone, and so is one whose CRC is neither (the log's own recovery and reads find it).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from wire import records
from wire.errors import CorruptMessage

log = logging.getLogger(__name__)

FORMAT_FILE = "log-format"
CRC32C_FORMAT = "crc32c"
_CRC_FIELD = slice(17, 21)


def ensure_crc32c(directory: Path) -> int:
    """Convert `directory`'s logs to CRC-32C unless its marker says they are; the batches
    converted. Raises OSError when a file cannot be read or written."""
    marker = directory / FORMAT_FILE
    if marker.exists():
        return 0
    converted = 0
    for segment in sorted(directory.glob("*/*.log")):
        converted += _convert_segment(segment)
    _write_marker(marker)
    if converted:
        log.info("%s: %d batches given Kafka's CRC-32C in place of CRC-32", directory, converted)
    return converted


def _convert_segment(path: Path) -> int:
    data = bytearray(path.read_bytes())
    changed = []
    position = 0
    while position < len(data):
        try:
            header = records.read_header(data, position)
        except CorruptMessage:
            break
        if position + header.size > len(data):
            break
        if records.convert_legacy_crc(data, position):
            changed.append(position)
        position += header.size
    if changed:
        with path.open("r+b") as f:
            for at in changed:
                f.seek(at + _CRC_FIELD.start)
                f.write(data[at + _CRC_FIELD.start : at + _CRC_FIELD.stop])
            f.flush()
            os.fsync(f.fileno())
    return len(changed)


def _write_marker(marker: Path) -> None:
    staged = marker.with_suffix(".tmp")
    with staged.open("w") as f:
        f.write(CRC32C_FORMAT + "\n")
        f.flush()
        os.fsync(f.fileno())
    staged.replace(marker)
    directory = os.open(marker.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
