"""`keel dump-log`, as Kafka's kafka-dump-log.sh (DumpLogSegments): what a partition's segment
files hold, read from disk with no broker.

A `.log` file prints `Log starting offset: N`, then a line per batch in Kafka's words
(`baseOffset: ... isvalid: true`) and, with `--deep-iteration` (which `--print-data-log`
implies, as in Kafka), a `| offset: ...` line per record, compressed batches decompressed.
A `.index` file prints its entries (`offset: N position: P`), each checked against the batch
at that position of the `.log` beside it. Keel writes no `.timeindex`, `.snapshot` or
`.txnindex` files: naming one is a usage error.

Damage is printed where it is found, in the words of Kafka's tool (`Found 7 invalid bytes at
the end of 00000000000000000000.log`, `isvalid: false` on a batch that fails its CRC) and the
dump goes on where it can; the command then ends with one line saying what was found, exit 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

from node.broker.log.segment import INDEX_ENTRY
from node.command.entry import CommandError, UsageError, add_verbose_option
from node.command.options import positive_int
from wire import compression, records
from wire.errors import CorruptMessage

GROUP = "dump-log"

# What Kafka's file reader takes in before it trusts a batch: base offset, batch length,
# partition leader epoch and magic.
_UP_TO_MAGIC = struct.Struct(">qiib")
# Kafka refuses a batch length under the smallest record overhead it knows (a v0 message's),
# whatever the magic: the file cannot be read past it.
_MIN_RECORD_OVERHEAD = 14
_MAX_SEQUENCE = 2**31 - 1
_NO_SEQUENCE = -1
# Control records (Kafka's ControlRecordType and EndTransactionMarker): key version and type,
# value version and coordinator epoch.
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
_END_TXN_MARKERS = {0: "ABORT", 1: "COMMIT"}

# (position, size) -> at most `size` bytes of the file from `position`
Reader = Callable[[int, int], bytes]
Emit = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    max_bytes: int | None = None  # None: the whole file

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    # Offline: no broker options, only --verbose.
    dump = groups.add_parser(
        GROUP, help="print the batches and records of segment files on disk (Kafka's kafka-dump-log)"
    )
    dump.add_argument(
        "--files", required=True, metavar="FILE1,FILE2", help="segment .log and .index files, comma-separated"
    )
    dump.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and payload (implies --deep-iteration)",
    )
    dump.add_argument("--deep-iteration", action="store_true", help="print each record of each batch")
    dump.add_argument(
        "--max-bytes", type=positive_int, default=None, help="read at most this many bytes of each .log file"
    )
    add_verbose_option(dump)


# --- one line per batch and per record, in Kafka's words ---


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap past 2^31 - 1 to 0."""
    if sequence > _MAX_SEQUENCE - increment:
        return increment - (_MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def _sequence(header: records.BatchHeader, offset_delta: int) -> int:
    if header.base_sequence == _NO_SEQUENCE:
        return _NO_SEQUENCE
    return _increment_sequence(header.base_sequence, offset_delta)


def _timestamp_type(header: records.BatchHeader) -> str:
    return "LogAppendTime" if header.attributes & records.TIMESTAMP_TYPE_BIT else "CreateTime"


def _flag(value: int) -> str:
    return "true" if value else "false"


def batch_line(header: records.BatchHeader, position: int, valid: bool) -> str:
    """Kafka's line for a v2 batch at `position` of its file."""
    attributes = header.attributes
    codec = attributes & records.COMPRESSION_MASK
    delete_horizon = (
        f"OptionalLong[{header.base_timestamp}]"
        if attributes & records.DELETE_HORIZON_BIT
        else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count}"
        f" baseSequence: {header.base_sequence}"
        f" lastSequence: {_sequence(header, header.last_offset_delta)}"
        f" producerId: {header.producer_id} producerEpoch: {header.producer_epoch}"
        f" partitionLeaderEpoch: {header.partition_leader_epoch}"
        f" isTransactional: {_flag(attributes & records.TRANSACTIONAL_BIT)}"
        f" isControl: {_flag(attributes & records.CONTROL_BIT)} deleteHorizonMs: {delete_horizon}"
        f" position: {position} {_timestamp_type(header)}: {header.max_timestamp} size: {header.size}"
        f" magic: {header.magic} compresscodec: {compression.NAMES.get(codec, f'unknown({codec})')}"
        f" crc: {header.crc} isvalid: {_flag(valid)}"
    )


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


def _text(value: bytes) -> str:
    # Kafka's StringDecoder: the bytes as UTF-8.
    return value.decode("utf-8", "replace")


def _control(record: records.Record) -> str:
    """What Kafka's tool prints of a control record: a transaction marker, or its type."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return " controlType: UNKNOWN(-1)"
    _, kind = _CONTROL_KEY.unpack_from(record.key)
    marker = _END_TXN_MARKERS.get(kind)
    if marker is None or record.value is None or len(record.value) < _END_TXN_VALUE.size:
        return f" controlType: UNKNOWN({kind})"
    _, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value)
    return f" endTxnMarker: {marker} coordinatorEpoch: {coordinator_epoch}"


def record_line(header: records.BatchHeader, record: records.Record, *, print_data: bool) -> str:
    """Kafka's `| offset: ...` line for a record of the batch `header` heads."""
    # In a LogAppendTime batch every record's timestamp is the batch's (Kafka's DefaultRecord).
    timestamp = header.max_timestamp if header.attributes & records.TIMESTAMP_TYPE_BIT else record.timestamp
    line = (
        f"| offset: {record.offset} {_timestamp_type(header)}: {timestamp}"
        f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
        f" sequence: {_sequence(header, record.offset - header.base_offset)}"
        f" headerKeys: [{','.join(name for name, _ in record.headers)}]"
    )
    if header.attributes & records.CONTROL_BIT:
        return line + _control(record)
    if print_data:
        if record.key is not None:
            line += f" key: {_text(record.key)}"
        if record.value is not None:
            line += f" payload: {_text(record.value)}"
    return line


# --- a .log file ---


@dataclasses.dataclass
class LogDump:
    """What dumping one `.log` found: the problems (each printed where it was found) and the
    offsets that did not follow the one before (printed after the dump, as Kafka does)."""

    problems: list[str] = dataclasses.field(default_factory=list)
    non_consecutive: list[tuple[int, int]] = dataclasses.field(default_factory=list)


def dump_log(name: str, read: Reader, size: int, options: DumpOptions, emit: Emit) -> LogDump:
    """Print the batches (and with `options.deep` the records) of a `.log` file of `size`
    bytes, as Kafka's tool reads it: batch after batch from the start, to `max_bytes`."""
    found = LogDump()

    def problem(line: str) -> None:
        emit(line)
        found.problems.append(line)

    end = size if options.max_bytes is None else min(size, options.max_bytes)
    position = 0
    last_offset: int | None = None
    while position < end - _UP_TO_MAGIC.size:
        _, batch_length, _, magic = _UP_TO_MAGIC.unpack(read(position, _UP_TO_MAGIC.size))
        if batch_length < _MIN_RECORD_OVERHEAD:
            problem(
                f"Found record size {batch_length} smaller than minimum record overhead "
                f"({_MIN_RECORD_OVERHEAD}) in file {name}."
            )
            return found  # where the next batch starts is not known
        if position + records.LOG_OVERHEAD + batch_length > end:
            break  # cut short, or past --max-bytes
        data = read(position, records.LOG_OVERHEAD + batch_length)
        try:
            if magic != records.MAGIC:
                raise CorruptMessage(f"magic {magic}: Keel reads only v2 batches (magic 2)")
            header = records.read_header(data)
        except CorruptMessage as e:
            problem(f"Found an unreadable batch at position {position} in file {name}: {e.message}")
            position += len(data)
            continue
        valid = records.computed_crc(data, 0, header) == header.crc
        emit(batch_line(header, position, valid))
        if not valid:
            found.problems.append(f"the batch at position {position} fails its CRC")
        if options.deep:
            try:
                for record in records.batch_records(data, 0, header):
                    if last_offset is not None and record.offset != last_offset + 1:
                        found.non_consecutive.append((last_offset, record.offset))
                    last_offset = record.offset
                    emit(record_line(header, record, print_data=options.print_data_log))
            except CorruptMessage as e:
                problem(
                    f"Found invalid records in the batch at position {position} in file {name}: {e.message}"
                )
        position += len(data)
    trailing = end - position
    if trailing > 0 and options.max_bytes is None:
        problem(f"Found {trailing} invalid bytes at the end of {Path(name).name}")
    return found


# --- a .index file ---


def dump_index(
    name: str, raw: bytes, base_offset: int, emit: Emit, *, log: Reader | None = None, log_size: int = 0
) -> list[str]:
    """Print the entries of an offset index (`raw`, its bytes); each names the batch that
    starts at its offset, which is checked when the `.log` beside it is there (Keel indexes a
    batch's base offset, where Kafka indexes its last). Returns the problems found."""
    problems: list[str] = []
    if not raw:
        emit(f"{name} is empty.")
        return problems
    whole = len(raw) - len(raw) % INDEX_ENTRY.size
    mismatches = []
    for relative, position in INDEX_ENTRY.iter_unpack(raw[:whole]):
        offset = base_offset + relative
        emit(f"offset: {offset} position: {position}")
        if log is None:
            continue
        try:
            header = records.read_header(log(position, records.HEADER_SIZE)) if position < log_size else None
        except CorruptMessage:
            header = None
        if header is None or header.base_offset != offset:
            mismatches.append((offset, -1 if header is None else header.base_offset))
    if whole != len(raw):
        line = f"Found {len(raw) - whole} invalid bytes at the end of {Path(name).name}"
        emit(line)
        problems.append(line)
    if mismatches:
        print(f"Mismatches in :{Path(name).absolute()}", file=sys.stderr)
        for offset, found in mismatches:
            print(f"  Index offset: {offset}, log offset: {found}", file=sys.stderr)
        problems.append(f"{len(mismatches)} index entries do not match the log")
    return problems


# --- the command ---

_UNSUPPORTED = {
    ".timeindex": "Keel keeps no time index",
    ".snapshot": "Keel keeps no producer snapshots",
    ".txnindex": "Keel keeps no transaction index",
}


def _base_offset(path: Path) -> int:
    stem = path.name.split(".")[0]
    if not stem.isdigit():
        raise UsageError(
            f"--files {path}: a segment is named after its base offset (00000000000000000000{path.suffix})"
        )
    return int(stem)


def checked_files(text: str) -> list[Path]:
    """The files of `--files`, each an existing `.log` or `.index`; UsageError otherwise."""
    paths = [Path(part.strip()) for part in text.split(",") if part.strip()]
    if not paths:
        raise UsageError("--files names no file")
    for path in paths:
        if path.suffix not in (".log", ".index"):
            why = _UNSUPPORTED.get(path.suffix, "not a segment file")
            raise UsageError(f"--files {path}: {why}; keel dump-log reads .log and .index files")
        if not path.is_file():
            raise UsageError(f"--files {path}: no such file")
        _base_offset(path)
    return paths


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")


def _reader(fd: int) -> Reader:
    return lambda position, size: os.pread(fd, size, position)


def _dump_file(path: Path, options: DumpOptions) -> list[str]:
    _emit(f"Dumping {path}")
    base_offset = _base_offset(path)
    with path.open("rb") as f:
        if path.suffix == ".index":
            raw = f.read()
            log_path = path.with_suffix(".log")
            if not log_path.is_file():
                return dump_index(str(path), raw, base_offset, _emit)
            with log_path.open("rb") as log:
                size = os.fstat(log.fileno()).st_size
                return dump_index(
                    str(path), raw, base_offset, _emit, log=_reader(log.fileno()), log_size=size
                )
        _emit(f"Log starting offset: {base_offset}")
        size = os.fstat(f.fileno()).st_size
        found = dump_log(str(path), _reader(f.fileno()), size, options, _emit)
    sys.stdout.flush()
    if found.non_consecutive:
        print(f"Non-consecutive offsets in {path.absolute()}", file=sys.stderr)
        for first, second in found.non_consecutive:
            print(f"  {first} is followed by {second}", file=sys.stderr)
    return found.problems


def run(args: argparse.Namespace) -> int:
    paths = checked_files(args.files)
    options = DumpOptions(
        print_data_log=args.print_data_log, deep_iteration=args.deep_iteration, max_bytes=args.max_bytes
    )
    damaged = {path: problems for path in paths if (problems := _dump_file(path, options))}
    sys.stdout.flush()
    if damaged:
        said = "; ".join(
            f"{path}: {len(problems)} problem(s), the first: {problems[0]}"
            for path, problems in damaged.items()
        )
        raise CommandError(f"damage found in {len(damaged)} of {len(paths)} file(s): {said}")
    return 0
