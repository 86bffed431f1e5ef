"""Helpers for the replicated-log tests: producing while recording what was acknowledged,
reading every record back, and reading a broker's log files straight off its disk."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from node.clients.consumer import KeelConsumer
from node.clients.producer import KeelProducer, ProduceFailed
from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually
from wire import records
from wire.errors import WireError


def bootstrap(brokers: Brokers) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in brokers.all)


@dataclasses.dataclass
class ProduceLog:
    acknowledged: list[bytes] = dataclasses.field(default_factory=list)
    failed: int = 0


async def produce_until(
    brokers: Brokers,
    topic: str,
    stop: asyncio.Event,
    produced: ProduceLog | None = None,
    *,
    batch: int = 20,
    prefix: str = "m",
) -> ProduceLog:
    """Send batches with acks=all until `stop` is set; record each acknowledged value in
    `produced` (which the caller may watch while it runs)."""
    produced = produced or ProduceLog()
    number = 0
    async with KeelProducer(bootstrap(brokers), acks=-1, request_timeout=5, delivery_timeout=5) as producer:
        while not stop.is_set():
            values = [f"{prefix}{number + i}".encode() for i in range(batch)]
            number += batch
            try:
                await producer.send_many(topic, [(None, v) for v in values], partition=0)
            except (ProduceFailed, WireError):
                produced.failed += 1
                await asyncio.sleep(0.05)  # a short pause before the next attempt, not a wait
                continue
            produced.acknowledged.extend(values)
    return produced


async def consume_all(
    brokers: Brokers, topic: str, partitions: list[int], expected: int, timeout: float = 30
) -> dict[int, list[records.Record]]:
    """Every record of `partitions` from the beginning, once at least `expected` arrived and
    the consumer has caught up with the high watermark."""
    got: dict[int, list[records.Record]] = {p: [] for p in partitions}
    async with KeelConsumer(
        bootstrap(brokers), topic, partitions=partitions, from_beginning=True
    ) as consumer:

        async def caught_up() -> bool:
            for record in await consumer.poll():
                got[record.partition].append(
                    records.Record(record.offset, record.timestamp, record.key, record.value)
                )
            total = sum(len(v) for v in got.values())
            return total >= expected and all(
                consumer.positions.get(p) == consumer.high_watermarks.get(p) for p in partitions
            )

        await eventually(
            caught_up, timeout=timeout, interval=0, message=f"did not consume {expected} records"
        )
    return got


def log_records(broker: BrokerProcess, topic: str, partition: int) -> list[records.Record]:
    """The records in a broker's log files for one partition, read off its disk."""
    directory = broker.home / "data" / f"{topic}-{partition}"
    out: list[records.Record] = []
    for segment in sorted(directory.glob("*.log")):
        out.extend(records.records(segment.read_bytes()))
    return out


def data_dir(broker: BrokerProcess, topic: str, partition: int) -> Path:
    return broker.home / "data" / f"{topic}-{partition}"
