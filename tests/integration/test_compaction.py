"""Log compaction on real broker processes: a topic with cleanup.policy=compact is cleaned by
the leader's log cleaner, consumers read only the latest value of each key in its cleaned
part, and a follower that lost its copy fetches the compacted log, gaps and all."""

from __future__ import annotations

import shutil

from kazoo.client import KazooClient

from node.clients.producer import KeelProducer
from tests.integration.conftest import Brokers
from tests.integration.replication import consume_all, data_dir, log_records
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, eventually_sync

TOPIC = "prices"
KEYS = 12
UPDATES = 1_200


def cleaned_offset(broker_home_data: str) -> int:
    """The leader's cleaner checkpoint for the topic's partition 0 (0 until written)."""
    try:
        with open(broker_home_data) as f:
            lines = f.read().splitlines()[2:]  # version, count
    except FileNotFoundError:
        return 0
    return next((int(line.split()[2]) for line in lines if line.split()[:2] == [TOPIC, "0"]), 0)


async def test_a_compacted_topic_keeps_the_latest_value_per_key_and_a_follower_fetches_it(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.settings.update(
        {
            # segment.bytes cannot go below 1 MiB (KIP-1030): the broker's internal setting
            # rolls every few batches instead, so that the log has closed segments to clean.
            "log.internal.segment.bytes": "4096",
            "log.cleaner.backoff.ms": "200",
            "replica.high.watermark.checkpoint.interval.ms": "200",
            "log.flush.offset.checkpoint.interval.ms": "200",
        }
    )
    leader, follower = brokers.start(1, 2)
    await controller_of(brokers)
    await create_topic(
        leader, TOPIC, assignment={0: [1, 2]}, cleanup_policy="compact", segment_bytes=str(1 << 20)
    )
    await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][0] == 1 and len(s[0][2]) == 2, "not agreed")

    # The follower goes; the controller takes it out of the ISR, so the high watermark (below
    # which alone the leader cleans) follows the leader's log alone.
    follower.kill()
    await settled_to(brokers, kazoo, TOPIC, lambda s: s[0][2] == [1], "the ISR never shrank to the leader")
    latest: dict[bytes, bytes] = {}
    async with KeelProducer(f"127.0.0.1:{leader.port}", acks=-1) as producer:
        for start in range(0, UPDATES, 100):
            # The second half updates half the keys: the others' latest values lie early in
            # the log, where the cleaner will have been.
            keys = KEYS if start < UPDATES // 2 else KEYS // 2
            batch = [(f"key-{n % keys}".encode(), f"value-{n}".encode()) for n in range(start, start + 100)]
            await producer.send_many(TOPIC, batch)
            latest.update(batch)
    checkpoint = str(leader.home / "data" / "cleaner-offset-checkpoint")

    async def cleaned_to_the_active_segment() -> int:
        """The cleaner's checkpoint once it reaches the active segment: every closed segment
        cleaned, and nothing more to clean, as nothing more is produced."""
        active = max(int(p.stem) for p in data_dir(leader, TOPIC, 0).glob("*.log"))
        offset = cleaned_offset(checkpoint)
        return offset if offset == active else 0

    boundary = await eventually(
        cleaned_to_the_active_segment,
        timeout=60,
        interval=0.2,
        message="the leader's cleaner never cleaned up to the active segment",
    )
    assert "prices-0: cleaned offsets" in leader.broker_log()

    got = (await consume_all(brokers, TOPIC, [0], expected=KEYS))[0]
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets)), "offsets only increase"
    assert len(got) < UPDATES, "compaction removed records"
    assert offsets[-1] == UPDATES - 1, "the last offset is kept"
    cleaned = [r for r in got if r.offset < boundary]
    keys = [r.key for r in cleaned]
    assert len(keys) == len(set(keys)), "one record per key in the cleaned part"
    assert {f"key-{k}".encode() for k in range(KEYS // 2, KEYS)} <= set(keys), "keys last written early"
    final = {r.key: r.value for r in got}
    assert final == latest, "every key's latest value is there"

    # The follower, stopped before the first record (logs are created on first use, so it has
    # none; any copy it had goes), fetches the compacted log from offset 0, with its gaps.
    shutil.rmtree(data_dir(follower, TOPIC, 0), ignore_errors=True)
    follower.start()
    await settled_to(brokers, kazoo, TOPIC, lambda s: len(s[0][2]) == 2, "no ISR rejoin")
    eventually_sync(
        lambda: log_records(follower, TOPIC, 0) == log_records(leader, TOPIC, 0),
        timeout=30,
        interval=0.2,
        message="the follower's log is the leader's",
    )
    assert [r.offset for r in log_records(follower, TOPIC, 0)][-1] == UPDATES - 1
