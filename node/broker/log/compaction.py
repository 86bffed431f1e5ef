"""Kafka's log compaction, the rewrite itself (its LogCleaner's Cleaner.doClean): pure work over
segment files, run on a worker thread by the cleaner task (node/broker/log/cleaner.py), which
swaps the result in.

One clean takes the closed segments a log allows (`CleanPlan.groups`) and the offset where
the dirty part starts, the part written since the last clean. It reads the dirty part once to
map each key to its latest offset (Kafka's OffsetMap), then rewrites every segment of the plan,
groups of small neighbours merged into one file, keeping of each batch:

- a record whose key has no later offset in the dirty part (the latest value of its key);
- a tombstone (a record with no value) until its batch's delete horizon has passed: the first
  clean that keeps it sets the horizon to now + delete.retention.ms, in the batch's base
  timestamp, flagged in its attributes (KIP-534), and a later clean drops it;
- no record without a key (a compacted topic refuses them; these predate the policy).

A batch keeps its base offset, last offset delta, leader epoch and producer fields, so offsets
never move (a compacted log has gaps) and the producer state read from the headers stays right.
A batch whose every record goes is dropped, unless it is the last batch of its producer
(Kafka's lastRecordsOfActiveProducers): that one stays as an empty batch. A batch that loses
nothing is copied as it is; otherwise its kept records are copied (their own bytes, unless the
horizon moves their timestamp base), recompressed with the batch's codec, and the batch gets a
new CRC-32C. Every batch read is CRC-checked: a damaged one fails the clean (the cleaner marks
the partition uncleanable).

Each group is written to `<base>.log.cleaned` with its offset index `<base>.index.cleaned`,
both fsynced; nothing else is touched here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from node.broker.log.segment import INDEX_ENTRY, MAX_RELATIVE_OFFSET, segment_name
from node.broker.log.validator import MAX_DECOMPRESSED_BYTES
from wire import compression, records
from wire.errors import CorruptMessage

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


@dataclasses.dataclass(frozen=True)
class SourceSegment:
    path: Path
    base_offset: int
    size: int  # the bytes it held when the clean was planned (closed: it does not grow)


@dataclasses.dataclass(frozen=True)
class CleanPlan:
    directory: Path
    # Consecutive segments, each group to become one segment named after its first.
    groups: tuple[tuple[SourceSegment, ...], ...]
    # The dirty part: from the first offset not cleaned before to the end of the plan.
    dirty_from: int
    dirty_to: int
    now_ms: int
    delete_retention_ms: int
    # The last offset of each producer's last batch: those batches are never dropped.
    producer_last_offsets: frozenset[int]
    index_interval_bytes: int


@dataclasses.dataclass
class CleanedGroup:
    base_offset: int
    sources: tuple[SourceSegment, ...]
    log_path: Path
    index_path: Path
    size: int


@dataclasses.dataclass
class CleanResult:
    groups: list[CleanedGroup]
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    # The earliest delete horizon of a batch written with tombstones still in it: the log is
    # worth cleaning again once it passes, dirty or not.
    next_horizon_ms: int | None = None


def group_segments(segments: list[SourceSegment], max_bytes: int) -> tuple[tuple[SourceSegment, ...], ...]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to at most
    `max_bytes` (and whose offsets fit one segment's index) become one."""
    groups: list[list[SourceSegment]] = []
    total = 0
    for segment in segments:
        if (
            groups
            and total + segment.size <= max_bytes
            and (segment.base_offset - groups[-1][0].base_offset <= MAX_RELATIVE_OFFSET // 2)
        ):
            groups[-1].append(segment)
            total += segment.size
        else:
            groups.append([segment])
            total = segment.size
    return tuple(tuple(group) for group in groups)


def clean(plan: CleanPlan) -> CleanResult:
    """Write the cleaned groups of `plan` (on a worker thread). Raises CorruptMessage for a
    damaged batch, OSError for the files; what it wrote is removed then."""
    result = CleanResult([])
    try:
        offset_map = build_offset_map(plan, result)
        for group in plan.groups:
            result.groups.append(_clean_group(plan, group, offset_map, result))
    except BaseException:
        discard(result)
        raise
    return result


def discard(result: CleanResult) -> None:
    for group in result.groups:
        group.log_path.unlink(missing_ok=True)
        group.index_path.unlink(missing_ok=True)


def build_offset_map(plan: CleanPlan, result: CleanResult) -> dict[bytes, int]:
    """Each key of the dirty part and its latest offset there."""
    latest: dict[bytes, int] = {}
    for group in plan.groups:
        for segment in group:
            for header, batch in read_batches(segment):
                if header.last_offset < plan.dirty_from or header.base_offset >= plan.dirty_to:
                    continue
                if header.attributes & records.CONTROL_BIT or not header.records_count:
                    continue
                body = records.record_bytes(batch, 0, header, MAX_DECOMPRESSED_BYTES)
                for span in records.record_spans(body, header.records_count):
                    if span.key is not None:
                        offset = header.base_offset + span.offset_delta
                        if plan.dirty_from <= offset < plan.dirty_to:
                            latest[span.key] = offset
    return latest


def read_batches(segment: SourceSegment) -> Iterator[tuple[records.BatchHeader, bytes]]:
    """Each whole, CRC-checked batch of the segment's first `size` bytes."""
    with segment.path.open("rb", buffering=1 << 20) as f:
        position = 0
        while position < segment.size:
            head = f.read(records.HEADER_SIZE)
            header = records.read_header(head)
            rest = f.read(header.size - records.HEADER_SIZE)
            batch = head + rest
            if len(batch) != header.size:
                raise CorruptMessage(f"{segment.path}: the batch at position {position} is cut short")
            records.validate(batch)
            position += header.size
            yield header, batch


def _clean_group(
    plan: CleanPlan, group: tuple[SourceSegment, ...], offset_map: dict[bytes, int], result: CleanResult
) -> CleanedGroup:
    base = group[0].base_offset
    log_path = plan.directory / (segment_name(base, ".log") + CLEANED_SUFFIX)
    index_path = plan.directory / (segment_name(base, ".index") + CLEANED_SUFFIX)
    index = bytearray()
    position = 0
    since_index = 0
    with log_path.open("wb", buffering=1 << 20) as out:
        for segment in group:
            result.bytes_read += segment.size
            for header, batch in read_batches(segment):
                kept = filter_batch(header, batch, offset_map, plan, result)
                if kept is None:
                    continue
                if not index or since_index >= plan.index_interval_bytes:
                    index += INDEX_ENTRY.pack(header.base_offset - base, position)
                    since_index = 0
                out.write(kept)
                position += len(kept)
                since_index += len(kept)
        out.flush()
        os.fsync(out.fileno())
    with index_path.open("wb") as f:
        f.write(index)
        f.flush()
        os.fsync(f.fileno())
    result.bytes_written += position
    return CleanedGroup(base, group, log_path, index_path, position)


def filter_batch(
    header: records.BatchHeader,
    batch: bytes,
    offset_map: dict[bytes, int],
    plan: CleanPlan,
    result: CleanResult,
) -> bytes | None:
    """The batch as compaction leaves it: itself, rewritten, empty, or None (dropped)."""
    if header.attributes & records.CONTROL_BIT or not header.records_count:
        return batch  # Keel writes no control batch; an empty batch is a producer's last
    body = records.record_bytes(batch, 0, header, MAX_DECOMPRESSED_BYTES)
    horizon = header.base_timestamp if header.attributes & records.DELETE_HORIZON_BIT else None
    kept = []
    tombstones = False
    for span in records.record_spans(body, header.records_count):
        if span.key is None:
            continue
        offset = header.base_offset + span.offset_delta
        if offset < offset_map.get(span.key, offset):
            continue  # a later value of its key is in the dirty part
        if not span.has_value:
            if horizon is not None and plan.now_ms >= horizon:
                continue  # a tombstone past its delete horizon
            tombstones = True
        kept.append(span)
    result.records_kept += len(kept)
    result.records_removed += header.records_count - len(kept)
    if tombstones:
        if horizon is None:
            horizon = plan.now_ms + plan.delete_retention_ms
        if result.next_horizon_ms is None or horizon < result.next_horizon_ms:
            result.next_horizon_ms = horizon
    if len(kept) == header.records_count and (
        horizon is None or header.attributes & records.DELETE_HORIZON_BIT
    ):
        return batch
    if not kept:
        if header.producer_id >= 0 and header.last_offset in plan.producer_last_offsets:
            return _empty_batch(header)
        return None
    return _rewritten(header, body, kept, horizon)


def _rewritten(
    header: records.BatchHeader, body: bytes, kept: list[records.RecordSpan], horizon: int | None
) -> bytes:
    timestamps = [header.base_timestamp + span.timestamp_delta for span in kept]
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    if horizon is not None and not attributes & records.DELETE_HORIZON_BIT:
        # The base timestamp becomes the horizon: each record's delta moves to keep its time.
        attributes |= records.DELETE_HORIZON_BIT
        base_timestamp = horizon
        section = b"".join(
            records.rebased_record(body, span, timestamp - horizon)
            for span, timestamp in zip(kept, timestamps, strict=True)
        )
    else:
        section = b"".join(body[span.start : span.end] for span in kept)
    codec = attributes & records.COMPRESSION_MASK
    if codec:
        section = compression.compress(codec, section)
    # With log-append time, the batch's max timestamp is that time, whatever its records say.
    log_append_time = attributes & records.TIMESTAMP_TYPE_BIT
    return records.build_raw_batch(
        header,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp if log_append_time else max(timestamps),
        records_count=len(kept),
        section=section,
    )


def _empty_batch(header: records.BatchHeader) -> bytes:
    """Kafka's writeEmptyHeader: no records, no codec, the batch's offsets, producer fields
    and max timestamp kept."""
    return records.build_raw_batch(
        header,
        attributes=header.attributes & ~(records.COMPRESSION_MASK | records.DELETE_HORIZON_BIT),
        base_timestamp=records.NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        records_count=0,
        section=b"",
    )
