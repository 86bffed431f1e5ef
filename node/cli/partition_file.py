"""The JSON partition lists the commands read, Kafka's shape:
`{"partitions": [{"topic": "t", "partition": 0, ...}, ...]}` (keel reassign adds "replicas"
and "version"; keel leader-election reads only topic and partition). One strict reading for
both: a topic is a non-empty string, a partition a non-negative integer (not 1.9, not "1"),
no partition twice. A bad file is one line on stderr and exit 2, before anything connects.
"""

from __future__ import annotations

from pathlib import Path

import orjson

Partition = tuple[str, int]

# The exit status of a command given a file it cannot use (a usage error).
EXIT_BAD_FILE = 2


class PartitionFileError(ValueError):
    """The file cannot be used; the message says why, in one line."""


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise PartitionFileError(f"cannot read it: {e}") from None


def parse_partition_entries(
    text: str, *, version: int | None = None
) -> list[tuple[Partition, dict[str, object]]]:
    """Each entry of the "partitions" list with its (topic, partition), in file order, for
    the caller to read its other fields; given `version`, the document's "version" (default
    that) must be it. Raises PartitionFileError."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise PartitionFileError(f"not JSON: {e}") from None
    if not isinstance(document, dict):
        raise PartitionFileError("not a JSON object with a partitions list")
    if version is not None and (found_version := document.get("version", version)) != version:
        raise PartitionFileError(f"version {found_version!r} is not {version}")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        raise PartitionFileError('"partitions" is missing or not a list')
    if not entries:
        raise PartitionFileError('"partitions" is empty')
    seen: set[Partition] = set()
    found: list[tuple[Partition, dict[str, object]]] = []
    for number, entry in enumerate(entries, 1):
        where = f"partitions entry {number}"
        if not isinstance(entry, dict):
            raise PartitionFileError(f"{where} is not an object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not topic:
            raise PartitionFileError(f'{where}: "topic" is missing or not a non-empty string')
        if type(partition) is not int or partition < 0:
            raise PartitionFileError(f'{where}: "partition" is missing or not a non-negative integer')
        if (topic, partition) in seen:
            raise PartitionFileError(f"{topic}-{partition} is listed twice")
        seen.add((topic, partition))
        found.append(((topic, partition), entry))
    return found


def parse_partition_list(text: str) -> list[Partition]:
    """The partitions a file lists (keel leader-election)."""
    return [tp for tp, _ in parse_partition_entries(text)]
