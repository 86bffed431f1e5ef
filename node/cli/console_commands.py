"""`keel produce` and `keel consume`: Kafka's console producer and consumer.

    keel produce --topic T [--acks all|1|0] [--key-separator SEP]   < lines
    keel consume --topic T [--from-beginning] [--partition P] [--max-messages N]
                 [--timeout-ms MS] [--print-key] [--format table|json]

The producer sends each stdin line as a record (split into key and value at the first
`--key-separator` when given), in batches of up to 500 lines. Both print a progress line to
stderr every 5 seconds on long runs and a summary at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson

from node.clients.consumer import KeelConsumer
from node.clients.producer import KeelProducer

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
BATCH_LINES = 500
PROGRESS_EVERY_S = 5.0


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    produce = groups.add_parser("produce", parents=[common], help="send stdin lines as records")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--acks", choices=sorted(ACKS), default="all")
    produce.add_argument("--key-separator", default=None, help="split each line into key and value")
    produce.add_argument("--partition", type=int, default=None, help="send every record to this partition")
    consume = groups.add_parser("consume", parents=[common], help="print records")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--partition", type=int, action="append", default=None)
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--timeout-ms", type=int, default=None, help="exit after this long without a record")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--key-separator", default="\t")


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


async def _lines() -> asyncio.Queue[list[bytes] | None]:
    """Stdin read on a thread in chunks, handed over as lists of lines; None at the end."""
    queue: asyncio.Queue[list[bytes] | None] = asyncio.Queue(maxsize=16)
    loop = asyncio.get_running_loop()

    def pump() -> None:
        rest = b""
        stdin = sys.stdin.buffer
        while chunk := stdin.read1(1 << 16):  # type: ignore[union-attr]
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for i in range(0, len(lines), BATCH_LINES):
                asyncio.run_coroutine_threadsafe(queue.put(lines[i : i + BATCH_LINES]), loop).result()
        if rest:
            asyncio.run_coroutine_threadsafe(queue.put([rest]), loop).result()
        asyncio.run_coroutine_threadsafe(queue.put(None), loop).result()

    loop.run_in_executor(None, pump)
    return queue


async def produce(bootstrap: str, args: argparse.Namespace) -> int:
    separator = None if args.key_separator is None else args.key_separator.encode()
    progress = _Progress("sent")
    async with KeelProducer(bootstrap, acks=ACKS[args.acks], request_timeout=args.timeout) as producer:
        queue = await _lines()
        while (lines := await queue.get()) is not None:
            items: list[tuple[bytes | None, bytes | None]] = []
            for raw in lines:
                line = raw.rstrip(b"\r")
                if separator is not None and separator in line:
                    key, _, value = line.partition(separator)
                    items.append((key, value))
                else:
                    items.append((None, line))
            if items:
                await producer.send_many(args.topic, items, partition=args.partition)
                progress.add(len(items))
    progress.done()
    return 0


async def consume(bootstrap: str, args: argparse.Namespace) -> int:
    progress = _Progress("consumed")
    limit = args.max_messages
    idle_limit = None if args.timeout_ms is None else args.timeout_ms / 1000
    last_record = time.monotonic()
    out = sys.stdout.buffer
    async with KeelConsumer(
        bootstrap,
        args.topic,
        partitions=args.partition,
        from_beginning=args.from_beginning,
        timeout=args.timeout,
    ) as consumer:
        while limit is None or progress.count < limit:
            batch = await consumer.poll()
            if limit is not None:
                batch = batch[: limit - progress.count]
            if batch:
                last_record = time.monotonic()
            elif idle_limit is not None and time.monotonic() - last_record > idle_limit:
                break
            for record in batch:
                if args.format == "json":
                    out.write(
                        orjson.dumps(
                            {
                                "partition": record.partition,
                                "offset": record.offset,
                                "timestamp": record.timestamp,
                                "key": None if record.key is None else record.key.decode("utf-8", "replace"),
                                "value": None
                                if record.value is None
                                else record.value.decode("utf-8", "replace"),
                            }
                        )
                        + b"\n"
                    )
                else:
                    if args.print_key:
                        out.write((record.key or b"null") + args.key_separator.encode())
                    out.write((record.value or b"") + b"\n")
            out.flush()
            progress.add(len(batch))
    progress.done()
    return 0


COMMANDS = {"produce": produce, "consume": consume}
