"""`keel produce` and `keel consume`: Kafka's console producer and consumer.

    keel produce --topic T [--acks all|1|0] [--key-separator SEP] [--partition P]
                 [--compression-codec none|gzip|snappy|lz4|zstd]
                 [--max-request-size BYTES]   < lines
    keel consume --topic T [--from-beginning] [--partition P] [--max-messages N]
                 [--timeout-ms MS] [--print-key] [--format table|json]

The producer sends each stdin line as a record (split into key and value at the first
`--key-separator` when given), in batches of up to 500 lines and `--max-request-size` bytes.
Both print a progress line to stderr every 5 seconds on long runs and a summary at the end.

Facts end a command with one line: a topic or partition that does not exist (exit 1),
a line too long for one record (exit 2 when nothing was sent yet, else 3, saying how many
records were). `--timeout` bounds each batch's delivery, metadata waits and retries included.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import io
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Protocol, cast

import orjson

from node.clients.consumer import ConsumedRecord, KeelConsumer
from node.clients.metadata import UnknownPartitionError, UnknownTopicError
from node.clients.producer import KeelProducer, ProduceFailed
from node.command.entry import CommandError, PartialError, UsageError
from node.command.options import non_negative_int, positive_int
from wire import records
from wire.compression import CODECS

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
BATCH_LINES = 500
# Kafka's max.request.size: the largest record batch the producer sends. The broker's own
# limit, max.message.bytes, is 12 bytes more by default, so what passes here passes there.
MAX_REQUEST_SIZE = 1048576
READ_SIZE = 1 << 16
PROGRESS_EVERY_S = 5.0

Item = tuple[bytes | None, bytes | None]


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    produce = groups.add_parser("produce", parents=[common], help="send stdin lines as records")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--acks", choices=sorted(ACKS), default="all")
    produce.add_argument("--key-separator", default=None, help="split each line into key and value")
    produce.add_argument(
        "--compression-codec",
        choices=sorted(CODECS),
        default="none",
        help="compress each batch's records (kafka-console-producer's option)",
    )
    produce.add_argument(
        "--partition", type=non_negative_int, default=None, help="send every record to this partition"
    )
    produce.add_argument(
        "--max-request-size",
        type=positive_int,
        default=MAX_REQUEST_SIZE,
        metavar="BYTES",
        help=f"the largest record batch to send (Kafka's max.request.size, default {MAX_REQUEST_SIZE})",
    )
    consume = groups.add_parser("consume", parents=[common], help="print records")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--partition", type=non_negative_int, action="append", default=None)
    consume.add_argument("--max-messages", type=positive_int, default=None)
    consume.add_argument(
        "--timeout-ms", type=positive_int, default=None, help="exit after this long without a record"
    )
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--key-separator", default="\t")


@contextlib.contextmanager
def _facts_are_errors() -> Iterator[None]:
    """What the clients learn from the cluster, as the one-line errors of a failed action."""
    try:
        yield
    except (UnknownTopicError, UnknownPartitionError, ProduceFailed) as e:
        raise CommandError(str(e)) from e


# --- stdin to records ---


class RecordTooLarge(Exception):
    """A stdin line that cannot be sent as one record within --max-request-size."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(f"line {line} of stdin {what} (--max-request-size)")


class _Readable(Protocol):
    def read1(self, size: int = ..., /) -> bytes: ...


def read_lines(stream: _Readable, *, max_line: int, read_size: int = READ_SIZE) -> Iterator[list[bytes]]:
    """The lines of `stream` without their newlines, a list per read. Linear in the input: each
    read is searched once, and an unfinished line is kept in the pieces it came in, joined once
    when its newline comes. A line that grows past `max_line` raises RecordTooLarge when it
    does, without reading the rest of it."""
    pieces: list[bytes] = []
    held = 0
    done = 0  # lines handed out so far
    while chunk := stream.read1(read_size):
        *lines, tail = chunk.split(b"\n")
        if lines:
            lines[0] = b"".join([*pieces, lines[0]])
            pieces, held = [], 0
            done += len(lines)
            yield lines
        if tail:
            pieces.append(tail)
            held += len(tail)
            if held > max_line:
                raise RecordTooLarge(done + 1, f"is longer than the {max_line}-byte record limit")
    if pieces:
        yield [b"".join(pieces)]


def to_batches(
    lines: Iterable[list[bytes]], *, separator: bytes | None, max_request_size: int
) -> Iterator[list[Item]]:
    """Records from lines (key and value split at `separator`), in lists of at most BATCH_LINES
    whose record batch stays within `max_request_size`; any part of such a list sent to one
    partition does too. A line too large for a batch of its own raises RecordTooLarge, once
    the lines before it are handed out."""
    batch: list[Item] = []
    size = records.HEADER_SIZE
    number = 0
    try:
        for chunk in lines:
            for raw in chunk:
                number += 1
                line = raw.rstrip(b"\r")
                item: Item = (None, line)
                if separator is not None and separator in line:
                    key, _, value = line.partition(separator)
                    item = (key, value)
                alone = records.HEADER_SIZE + records.record_size(*item)
                if alone > max_request_size:
                    over = f"over the {max_request_size}-byte record limit"
                    raise RecordTooLarge(number, f"makes a record batch of {alone} bytes, {over}")
                grown = size + records.record_size(*item, len(batch))
                if batch and (len(batch) == BATCH_LINES or grown > max_request_size):
                    yield batch
                    batch, grown = [], alone
                batch.append(item)
                size = grown
    except RecordTooLarge:
        if batch:
            yield batch  # the lines before it go out
        raise
    if batch:
        yield batch


class _Progress:
    def __init__(self, verb: str) -> None:
        self._verb = verb
        self._started = self._last = time.monotonic()
        self.count = 0

    def add(self, n: int) -> None:
        self.count += n
        now = time.monotonic()
        if now - self._last >= PROGRESS_EVERY_S:
            self._last = now
            rate = self.count / (now - self._started)
            print(f"keel: {self._verb} {self.count} records ({rate:,.0f}/s)", file=sys.stderr, flush=True)

    def done(self) -> None:
        elapsed = time.monotonic() - self._started
        print(f"keel: {self._verb} {self.count} records in {elapsed:.1f} s", file=sys.stderr, flush=True)


Handover = list[Item] | RecordTooLarge | None


def _read_stdin(separator: bytes | None, max_request_size: int) -> asyncio.Queue[Handover]:
    """Stdin read on a thread and handed over as batches of records, then None at its end or
    the RecordTooLarge that stopped it. A daemon thread: a command that fails, or is
    interrupted, ends without waiting for stdin to end."""
    queue: asyncio.Queue[Handover] = asyncio.Queue(maxsize=16)
    loop = asyncio.get_running_loop()

    def hand_over(what: Handover) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(queue.put(what), loop).result()
        except (RuntimeError, concurrent.futures.CancelledError):
            return False  # the loop closed: the command is over
        return True

    def pump() -> None:
        # sys.stdin.buffer is typed BinaryIO; it is a BufferedReader, which has read1.
        lines = read_lines(cast(io.BufferedReader, sys.stdin.buffer), max_line=max_request_size)
        try:
            for batch in to_batches(lines, separator=separator, max_request_size=max_request_size):
                if not hand_over(batch):
                    return
        except RecordTooLarge as e:
            hand_over(e)
            return
        hand_over(None)

    threading.Thread(target=pump, name="keel-stdin", daemon=True).start()
    return queue


async def produce(bootstrap: str, args: argparse.Namespace) -> int:
    separator = None if args.key_separator is None else args.key_separator.encode()
    progress = _Progress("sent")
    # --timeout bounds each delivery as a whole (Kafka's delivery.timeout.ms), and each request.
    producer = KeelProducer(
        bootstrap,
        acks=ACKS[args.acks],
        compression_type=args.compression_codec,
        request_timeout=args.timeout,
        delivery_timeout=args.timeout,
        security=args.security,
    )
    with _facts_are_errors():
        async with producer:
            # The topic and partition are checked before the first line is read.
            await producer.check_topic(args.topic, args.partition)
            queue = _read_stdin(separator, args.max_request_size)
            while (batch := await queue.get()) is not None:
                if isinstance(batch, RecordTooLarge):
                    raise _refused(batch, progress.count)
                await producer.send_many(args.topic, batch, partition=args.partition)
                progress.add(len(batch))
    progress.done()
    return 0


def _refused(error: RecordTooLarge, sent: int) -> CommandError:
    """Bad input (exit 2) while nothing was sent; else the lines before it went out (exit 3)."""
    if sent == 0:
        return UsageError(f"{error}; nothing was sent")
    return PartialError(f"sent {sent} records, then stopped: {error}")


async def consume(bootstrap: str, args: argparse.Namespace) -> int:
    progress = _Progress("consumed")
    limit = args.max_messages
    idle_limit = None if args.timeout_ms is None else args.timeout_ms / 1000
    last_record = time.monotonic()
    out = sys.stdout.buffer
    consumer = KeelConsumer(
        bootstrap,
        args.topic,
        partitions=args.partition,
        from_beginning=args.from_beginning,
        timeout=args.timeout,
        security=args.security,
    )
    with _facts_are_errors():
        async with consumer:
            while limit is None or progress.count < limit:
                batch = await consumer.poll()
                if limit is not None:
                    batch = batch[: limit - progress.count]
                if batch:
                    last_record = time.monotonic()
                elif idle_limit is not None and time.monotonic() - last_record > idle_limit:
                    break
                for record in batch:
                    out.write(_shown(record, args))
                out.flush()
                progress.add(len(batch))
    progress.done()
    return 0


def _shown(record: ConsumedRecord, args: argparse.Namespace) -> bytes:
    """One record as `keel consume` prints it: a JSON line, or its value (after its key)."""
    if args.format == "json":
        return (
            orjson.dumps(
                {
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": None if record.key is None else record.key.decode("utf-8", "replace"),
                    "value": None if record.value is None else record.value.decode("utf-8", "replace"),
                }
            )
            + b"\n"
        )
    key = (record.key or b"null") + args.key_separator.encode() if args.print_key else b""
    return key + (record.value or b"") + b"\n"


COMMANDS = {"produce": produce, "consume": consume}
