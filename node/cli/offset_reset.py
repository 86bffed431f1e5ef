"""What `keel consumer-groups --reset-offsets` would commit, as Kafka's ConsumerGroupCommand
computes it: pure functions of the partitions in scope, the group's committed offsets and the
partitions' earliest, latest and by-time offsets.

    --to-earliest      each partition's log-start offset
    --to-latest        its log-end offset
    --to-offset N      N, held between the two (Kafka's checkOffsetsRange)
    --shift-by N       the committed offset plus N, held likewise; a partition without a
                       committed offset cannot be shifted
    --to-datetime T    the first offset of a record at or after T; the log-end offset where
                       there is none (Kafka's "Falling back to latest known offset")
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping, Sequence

TopicPartition = tuple[str, int]


class ResetTo(enum.Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    SHIFT = "shift-by"
    DATETIME = "to-datetime"


@dataclasses.dataclass(frozen=True)
class ResetSpec:
    to: ResetTo
    # The offset (OFFSET), the shift (SHIFT) or the time in ms since the epoch (DATETIME).
    value: int = 0


class ResetError(ValueError):
    """A reset that cannot be planned; the message is Kafka's."""


@dataclasses.dataclass(frozen=True)
class LogOffsets:
    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]
    # By --to-datetime's time: -1 where no record is that recent.
    at_time: Mapping[TopicPartition, int] = dataclasses.field(default_factory=dict)


def plan_reset(
    spec: ResetSpec,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    logs: LogOffsets,
) -> dict[TopicPartition, int]:
    """The new offset of each partition in scope, in (topic, partition) order."""
    plan = {}
    for tp in sorted(set(partitions)):
        match spec.to:
            case ResetTo.EARLIEST:
                plan[tp] = logs.earliest[tp]
            case ResetTo.LATEST:
                plan[tp] = logs.latest[tp]
            case ResetTo.OFFSET:
                plan[tp] = _within_log(spec.value, tp, logs)
            case ResetTo.SHIFT:
                if tp not in committed:
                    raise ResetError(
                        f"Cannot shift offset for partition {tp[0]}-{tp[1]} "
                        "since there is no current committed offset"
                    )
                plan[tp] = _within_log(committed[tp] + spec.value, tp, logs)
            case ResetTo.DATETIME:
                found = logs.at_time.get(tp, -1)
                plan[tp] = found if found >= 0 else logs.latest[tp]
    return plan


def _within_log(offset: int, tp: TopicPartition, logs: LogOffsets) -> int:
    return max(logs.earliest[tp], min(offset, logs.latest[tp]))


def parse_datetime(text: str) -> int:
    """Kafka's `--to-datetime` ('YYYY-MM-DDTHH:mm:SS.sss', with an optional zone such as
    `Z` or `+02:00`; without one, local time) as ms since the epoch."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ResetError(
            f"--to-datetime {text!r} is not like 2024-05-01T12:00:00.000 (optionally with Z or +hh:mm)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's Utils.getDateTime
    return int(moment.timestamp() * 1000)


def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    """`--topic T` (every partition: None) or `--topic T:0,2`."""
    topic, sep, rest = text.partition(":")
    if not topic or (sep and not rest):
        raise ResetError(f"Invalid topic arg '{text}', expected topic name and partitions")
    if not sep:
        return topic, None
    try:
        partitions = [int(p) for p in rest.split(",")]
    except ValueError:
        raise ResetError(f"Invalid partition in topic arg '{text}': partitions are whole numbers") from None
    if any(p < 0 for p in partitions):
        raise ResetError(f"Invalid partition in topic arg '{text}': partitions are not negative")
    return topic, partitions
