"""Storage faults on real broker processes: a bit flipped in a live follower's and a live
leader's segment, one in an older segment of a follower killed with -9 (found by the recovery at
start-up), and a log directory that fills up (spec §7.11)."""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from node.clients.producer import KeelProducer
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import bootstrap, consume_all, data_dir
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.integration.test_replicated_log import leader_of
from tests.support import eventually
from wire import records
from wire.errors import CorruptMessage

# Scrub every 200 ms, the whole log each time: a flipped bit is found at once.
SCRUBBING = {"log.scrub.interval.ms": "200", "log.scrub.bytes": str(1 << 30)}


async def produce(
    brokers: Brokers, topic: str, count: int, *, partition: int = 0, prefix: str = "v"
) -> list[bytes]:
    values = [f"{prefix}{i}".encode() for i in range(count)]
    async with KeelProducer(bootstrap(brokers), acks=-1, request_timeout=5, delivery_timeout=30) as producer:
        for start in range(0, count, 10):
            await producer.send_many(
                topic, [(None, v) for v in values[start : start + 10]], partition=partition
            )
    return values


def flip_byte_in_batch(broker: BrokerProcess, topic: str, batch: int) -> None:
    """Flip a byte inside the records of the `batch`-th batch of the partition's first segment,
    in place, under the running broker (the page cache it reads is the file's)."""
    segment = sorted(data_dir(broker, topic, 0).glob("*.log"))[0]
    data = segment.read_bytes()
    position, header = list(records.batches(data))[batch]
    at = position + header.size - 3
    with segment.open("r+b") as f:
        f.seek(at)
        f.write(bytes([data[at] ^ 0xFF]))


def whole_log(broker: BrokerProcess, topic: str) -> list[records.Record] | None:
    """The partition's records on the broker's disk, or None while a batch fails its CRC or
    a segment listed goes before it is read (the broker cutting its log meanwhile)."""
    out = []
    try:
        for segment in sorted(data_dir(broker, topic, 0).glob("*.log")):
            out.extend(records.records(segment.read_bytes()))
    except (CorruptMessage, FileNotFoundError):
        return None
    return out


async def test_a_bit_flipped_on_a_live_follower_is_cut_off_and_fetched_again(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.settings.update(SCRUBBING)
    brokers.start(1, 2, 3)
    await create_topic(
        brokers.by_id(await controller_of(brokers)),
        "ledger",
        assignment={0: [1, 2, 3]},
        min_insync_replicas="2",
    )
    await settled_to(brokers, kazoo, "ledger", lambda s: len(s[0][2]) == 3, "topic never agreed")
    acknowledged = await produce(brokers, "ledger", 100)
    leader, _ = await leader_of(brokers, kazoo, "ledger")
    follower = brokers.by_id(next(b for b in (1, 2, 3) if b != leader))
    expected = whole_log(brokers.by_id(leader), "ledger")
    assert expected is not None and len(expected) == 100
    flip_byte_in_batch(follower, "ledger", batch=3)

    async def repaired() -> bool:
        return "before a damaged batch" in follower.log() and whole_log(follower, "ledger") == expected

    await eventually(repaired, timeout=30, message="the follower did not fetch the damaged batch again")
    state = await settled_to(
        brokers, kazoo, "ledger", lambda s: len(s[0][2]) == 3, "the ISR did not stay full"
    )
    assert state[0][0] == leader, "a follower's damage does not move leadership"
    got = (await consume_all(brokers, "ledger", [0], expected=100))[0]
    assert [r.value for r in got] == acknowledged


async def test_a_bit_flipped_on_a_live_leader_is_never_served_and_leadership_moves(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)  # no scrub: the consumer's read finds the damage
    await create_topic(
        brokers.by_id(await controller_of(brokers)),
        "ledger",
        assignment={0: [1, 2, 3]},
        min_insync_replicas="2",
    )
    await settled_to(brokers, kazoo, "ledger", lambda s: len(s[0][2]) == 3, "topic never agreed")
    acknowledged = await produce(brokers, "ledger", 100)
    leader, epoch = await leader_of(brokers, kazoo, "ledger")
    flip_byte_in_batch(brokers.by_id(leader), "ledger", batch=3)
    # Reading from the beginning meets the damaged batch: KAFKA_STORAGE_ERROR, never the batch
    # (the consumer checks every CRC), then a new leader serves every acknowledged record.
    got = (await consume_all(brokers, "ledger", [0], expected=100))[0]
    assert [r.value for r in got] == acknowledged
    state = await settled_to(
        brokers, kazoo, "ledger", lambda s: s[0][0] not in (-1, leader), "leadership did not move"
    )
    assert leader not in state[0][2], "the damaged replica left the ISR"
    assert state[0][1] > epoch
    assert "is damaged" in brokers.by_id(leader).log()
    assert kazoo.get_children("/log_dir_event_notification") == [], "the notification was handled"
    more = await produce(brokers, "ledger", 20, prefix="after")
    got = (await consume_all(brokers, "ledger", [0], expected=120))[0]
    assert [r.value for r in got] == acknowledged + more


async def test_after_a_crash_a_damaged_older_segment_is_cut_and_fetched_again(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    # No scrub while it runs: only the recovery at start-up can find the damage.
    brokers.settings.update(
        {
            "log.scrub.interval.ms": str(3_600_000),
            # A few batches per segment: the log has older segments.
            "log.internal.segment.bytes": "2048",
        }
    )
    brokers.start(1, 2, 3)
    await create_topic(
        brokers.by_id(await controller_of(brokers)),
        "ledger",
        assignment={0: [1, 2, 3]},
        min_insync_replicas="2",
    )
    await settled_to(brokers, kazoo, "ledger", lambda s: len(s[0][2]) == 3, "topic never agreed")
    acknowledged = await produce(brokers, "ledger", 300)
    leader, _ = await leader_of(brokers, kazoo, "ledger")
    follower = brokers.by_id(next(b for b in (1, 2, 3) if b != leader))
    expected = whole_log(brokers.by_id(leader), "ledger")
    assert expected is not None and len(expected) == 300
    segments = sorted(data_dir(follower, "ledger", 0).glob("*.log"))
    assert len(segments) >= 3, "the test needs a damaged segment that is not the active one"
    follower.kill()
    follower.wait(10)
    flip_byte_in_batch(follower, "ledger", batch=1)  # in the first segment, long rolled
    assert whole_log(follower, "ledger") is None
    follower.start()

    async def repaired() -> bool:
        return whole_log(follower, "ledger") == expected

    await eventually(
        repaired, timeout=30, message="the restarted follower did not fetch the cut records again"
    )
    assert "recovered to offset" in follower.log()
    await settled_to(brokers, kazoo, "ledger", lambda s: len(s[0][2]) == 3, "the ISR did not fill again")
    got = (await consume_all(brokers, "ledger", [0], expected=300))[0]
    assert [r.value for r in got] == acknowledged


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A small tmpfs at `path` (root only): a log directory that can really fill up."""
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False, capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    """Write until the file system is full."""
    with (directory / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


async def test_a_full_log_directory_goes_offline_and_the_broker_serves_its_other_one(
    brokers: Brokers, kazoo: KazooClient, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "small", "4m") as small:
        big = tmp_path / "big"
        brokers.new(1, {"log.dirs": f"{big},{small}"}).start()
        brokers.start(2, 3)
        await create_topic(
            brokers.by_id(await controller_of(brokers)),
            "ledger",
            assignment={0: [1, 2, 3], 1: [1, 3, 2]},
            min_insync_replicas="2",
        )
        await settled_to(
            brokers,
            kazoo,
            "ledger",
            lambda s: len(s) == 2 and all(len(v[2]) == 3 for v in s.values()),
            "topic never agreed",
        )
        before = {p: await produce(brokers, "ledger", 50, partition=p, prefix=f"p{p}-") for p in (0, 1)}
        on_small = 0 if (small / "ledger-0").is_dir() else 1
        on_big = 1 - on_small
        assert (big / f"ledger-{on_big}").is_dir(), "one partition in each directory"
        fill(small)
        after = await produce(brokers, "ledger", 50, partition=on_small, prefix="later-")

        def moved(s: dict[int, tuple[int, int, list[int]]]) -> bool:
            return s[on_small][0] in (2, 3) and 1 not in s[on_small][2] and s[on_big][0] == 1

        state = await settled_to(
            brokers, kazoo, "ledger", moved, "leadership did not leave the full directory"
        )
        assert 1 in state[on_big][2]
        broker_log = brokers.by_id(1).log()
        assert "goes offline" in broker_log and "No space left on device" in broker_log
        assert kazoo.get_children("/log_dir_event_notification") == [], "the notification was handled"
        more = await produce(brokers, "ledger", 50, partition=on_big, prefix="still-")
        got = await consume_all(brokers, "ledger", [0, 1], expected=200)
        assert [r.value for r in got[on_small]] == before[on_small] + after
        assert [r.value for r in got[on_big]] == before[on_big] + more, (
            "broker 1 still leads its other directory"
        )
        for broker in brokers.all:
            broker.kill()


def checkpointed_recovery_point(broker: BrokerProcess, topic: str) -> int:
    """The partition's entry in the recovery-point checkpoint on the broker's disk (0: none)."""
    path = broker.home / "data" / "recovery-point-offset-checkpoint"
    if not path.exists():
        return 0
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if (name, partition) == (topic, "0"):
            return int(offset)
    return 0


async def test_the_recovery_point_follows_the_rolls_so_a_crash_recovers_the_active_segment_only(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    """As Kafka's flush on roll: each roll flushes the segments before it and moves the
    recovery point to the new one, which the periodic checkpoint writes; after a kill -9 the
    broker recovers from there. Before, the recovery point moved only at a clean shutdown, and
    every unclean restart read every segment written since."""
    brokers.settings.update(
        {"log.internal.segment.bytes": "2048", "log.flush.offset.checkpoint.interval.ms": "200"}
    )
    (broker,) = brokers.start(1)
    await controller_of(brokers)
    await create_topic(broker, "ledger", assignment={0: [1]})
    await settled_to(brokers, kazoo, "ledger", lambda s: s[0][0] == 1, "topic never agreed")
    acknowledged = await produce(brokers, "ledger", 300)
    segments = sorted(data_dir(broker, "ledger", 0).glob("*.log"))
    assert len(segments) >= 3, "the test needs rolled segments"
    active_base = int(segments[-1].stem)

    async def checkpointed_at_the_last_roll() -> bool:
        return checkpointed_recovery_point(broker, "ledger") == active_base

    await eventually(
        checkpointed_at_the_last_roll, timeout=20, message="the recovery point never followed the rolls"
    )
    broker.kill()
    broker.wait(10)
    broker.start()
    await settled_to(brokers, kazoo, "ledger", lambda s: s[0][0] == 1, "broker 1 never led again")
    got = (await consume_all(brokers, "ledger", [0], expected=300))[0]
    assert [r.value for r in got] == acknowledged
    assert "was not shut down cleanly" in broker.log()
