"""`keel consumer-groups` as a person runs it, against real brokers whose groups and offsets
are made by Kafka's own client (kafka-python on the Kafka listeners): listing, lag against
what was produced and committed, resetting an inactive group and refusing an active one,
deleting."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kazoo.client import KazooClient

from tests.integration.conftest import Brokers
from tests.integration.test_consumer_groups import GROUP_SETTINGS, _collect_kafka_python_sockets
from tests.integration.test_kafka_listener import start_with_kafka_listeners
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually_sync, keel

pytestmark = pytest.mark.plain_pass_only("its Kafka listeners are PLAINTEXT, which the secured pass refuses")

__all__ = ["_collect_kafka_python_sockets"]  # the autouse fixture, used here too

PARTITIONS = 4
RECORDS = 120


async def _produced(brokers: Brokers, kazoo: KazooClient, kafka_bootstrap: str, topic: str) -> Counter[int]:
    """A topic of 4 partitions with 120 keyed records; how many landed in each partition."""
    await create_topic(brokers.by_id(await controller_of(brokers)), topic, partitions=PARTITIONS, rf=3)
    await settled_to(
        brokers,
        kazoo,
        topic,
        lambda s: len(s) == PARTITIONS and all(len(p[2]) == 3 for p in s.values()),
        "no ISR",
    )

    def produce() -> Counter[int]:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        try:
            sent = [producer.send(topic, key=str(i % 11).encode(), value=b"%d" % i) for i in range(RECORDS)]
            producer.flush(timeout=30)
            return Counter(f.get(timeout=30).partition for f in sent)
        finally:
            producer.close(timeout=10)

    counts = await asyncio.to_thread(produce)
    assert sum(counts.values()) == RECORDS
    return counts


def _commit(kafka_bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
    finally:
        consumer.close()


def groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return keel("consumer-groups", "--bootstrap-server", bootstrap, *args)


def described(bootstrap: str, group: str) -> dict[int, dict[str, object]]:
    result = groups(bootstrap, "--describe", "--group", group, "--format", "json")
    assert result.returncode == 0, result.stderr
    return {int(row["PARTITION"]): row for row in orjson.loads(result.stdout)}


async def test_list_describe_reset_and_delete_an_inactive_group(brokers: Brokers, kazoo: KazooClient) -> None:
    kafka_bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    counts = await _produced(brokers, kazoo, kafka_bootstrap, "events")
    bootstrap = ",".join(f"127.0.0.1:{brokers.by_id(b).port}" for b in (1, 2, 3))
    committed = {p: counts[p] // 3 for p in range(PARTITIONS - 1)}  # none for the last partition
    await asyncio.to_thread(
        _commit, kafka_bootstrap, "billing", {TopicPartition("events", p): o for p, o in committed.items()}
    )

    listed = groups(bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr
    assert "billing" in listed.stdout.splitlines()
    with_state = groups(bootstrap, "--list", "--state")
    assert with_state.stdout.splitlines()[0].split() == ["GROUP", "STATE"]
    assert ["billing", "Empty"] in [line.split() for line in with_state.stdout.splitlines()]
    assert "billing" not in groups(bootstrap, "--list", "--state", "stable").stdout

    rows = described(bootstrap, "billing")
    assert sorted(rows) == sorted(committed), "a row per partition with a committed offset"
    for p, offset in committed.items():
        assert rows[p]["CURRENT-OFFSET"] == offset
        assert rows[p]["LOG-END-OFFSET"] == counts[p]
        assert rows[p]["LAG"] == counts[p] - offset
        assert rows[p]["CONSUMER-ID"] is None
    table = groups(bootstrap, "--describe", "--group", "billing")
    assert table.returncode == 0 and "Consumer group 'billing' has no active members." in table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[0].split() == [
        "billing",
        "events",
        "0",
        str(committed[0]),
        str(counts[0]),
        str(counts[0] - committed[0]),
        "-",
        "-",
        "-",
    ]

    dry = groups(bootstrap, "--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    assert [line.split() for line in dry.stdout.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        *[["billing", "events", str(p), "0"] for p in sorted(committed)],
    ]
    assert {p: r["CURRENT-OFFSET"] for p, r in described(bootstrap, "billing").items()} == committed, (
        "a dry run changes nothing"
    )

    executed = groups(
        bootstrap, "--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest", "--execute"
    )
    assert executed.returncode == 0, executed.stderr
    after = described(bootstrap, "billing")
    assert {p: (r["CURRENT-OFFSET"], r["LAG"]) for p, r in after.items()} == {
        p: (0, counts[p]) for p in committed
    }

    shifted = groups(
        bootstrap,
        "--reset-offsets",
        "--group",
        "billing",
        "--topic",
        "events:1",
        "--shift-by",
        "5",
        "--execute",
        "--format",
        "json",
    )
    assert orjson.loads(shifted.stdout) == [
        {"GROUP": "billing", "TOPIC": "events", "PARTITION": 1, "NEW-OFFSET": 5}
    ]
    assert described(bootstrap, "billing")[1]["CURRENT-OFFSET"] == 5

    no_shift = groups(
        bootstrap, "--reset-offsets", "--group", "billing", "--topic", "events:3", "--shift-by", "1"
    )
    assert no_shift.returncode == 1
    assert "Cannot shift offset for partition events-3 since there is no current committed offset" in (
        no_shift.stderr
    )

    deleted_offsets = groups(bootstrap, "--delete-offsets", "--group", "billing", "--topic", "events:0")
    assert deleted_offsets.returncode == 0, deleted_offsets.stderr
    assert 0 not in described(bootstrap, "billing")

    deleted = groups(bootstrap, "--delete", "--group", "billing")
    assert deleted.returncode == 0, deleted.stderr
    assert "Deletion of requested consumer groups ('billing') was successful." in deleted.stdout
    gone = groups(bootstrap, "--describe", "--group", "billing")
    assert gone.returncode == 1 and gone.stderr.strip() == "Consumer group 'billing' does not exist."
    again = groups(bootstrap, "--delete", "--group", "billing")
    assert again.returncode == 1
    assert again.stderr.strip() == (
        "Group 'billing' could not be deleted: the group does not exist (GROUP_ID_NOT_FOUND)"
    )


async def test_an_active_group_is_described_with_its_members_and_not_reset_or_deleted(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    kafka_bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    counts = await _produced(brokers, kazoo, kafka_bootstrap, "jobs")
    bootstrap = f"127.0.0.1:{brokers.by_id(2).port}"
    consumer = KafkaConsumer(
        "jobs",
        bootstrap_servers=kafka_bootstrap,
        group_id="workers",
        client_id="worker-1",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:

        def read_all() -> bool:
            consumer.poll(timeout_ms=200)
            return len(consumer.assignment()) == PARTITIONS and all(
                consumer.position(tp) == counts[tp.partition] for tp in consumer.assignment()
            )

        await asyncio.to_thread(eventually_sync, read_all, timeout=60, message="never read every record")
        await asyncio.to_thread(consumer.commit)

        state = groups(bootstrap, "--describe", "--group", "workers", "--state")
        assert state.returncode == 0, state.stderr
        header, row = state.stdout.splitlines()
        assert header.split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert row.split()[0] == "workers" and row.split()[-2:] == ["Stable", "1"]

        members = groups(bootstrap, "--describe", "--group", "workers", "--members", "--verbose")
        assert members.returncode == 0, members.stderr
        (member,) = members.stdout.splitlines()[1:]
        assert member.split()[3:] == ["worker-1", str(PARTITIONS), "jobs(0,1,2,3)"]

        rows = described(bootstrap, "workers")
        assert sorted(rows) == list(range(PARTITIONS))
        assert all(r["LAG"] == 0 and r["CLIENT-ID"] == "worker-1" for r in rows.values())
        assert {r["CONSUMER-ID"] for r in rows.values()} == {member.split()[1]}

        refused = groups(
            bootstrap,
            "--reset-offsets",
            "--group",
            "workers",
            "--topic",
            "jobs",
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            "Assignments can only be reset if the group 'workers' is inactive, "
            "but the current state is Stable."
        )
        assert all(r["CURRENT-OFFSET"] == counts[p] for p, r in described(bootstrap, "workers").items())

        not_empty = groups(bootstrap, "--delete", "--group", "workers")
        assert not_empty.returncode == 1
        assert not_empty.stderr.strip() == (
            "Group 'workers' could not be deleted: the group is not empty (it has active members) "
            "(NON_EMPTY_GROUP)"
        )
    finally:
        await asyncio.to_thread(consumer.close)

    def empty() -> bool:
        listed = groups(bootstrap, "--list", "--state", "empty")
        return "workers" in listed.stdout.split()

    await asyncio.to_thread(eventually_sync, empty, timeout=30, message="the group never became Empty")
    reset = groups(
        bootstrap, "--reset-offsets", "--group", "workers", "--topic", "jobs", "--to-offset", "2", "--execute"
    )
    assert reset.returncode == 0, reset.stderr
    assert {p: r["CURRENT-OFFSET"] for p, r in described(bootstrap, "workers").items()} == {
        p: min(2, counts[p]) for p in range(PARTITIONS)
    }


def test_bad_arguments_are_one_line_and_send_nothing() -> None:
    from node.cluster.zookeeper import free_ports

    nowhere = f"127.0.0.1:{free_ports(1)[0]}"
    for args, wanted in [
        (["--describe"], "--describe takes --group G or --all-groups"),
        (["--reset-offsets", "--group", "g", "--all-topics"], "--reset-offsets takes one of --to-earliest"),
        (["--reset-offsets", "--group", "g", "--to-latest"], "--reset-offsets takes --topic T"),
        (["--list", "--state", "sleeping"], "Invalid state list 'sleeping'. Valid states are:"),
        (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"], "Invalid partition"),
        (["--list", "--describe"], "not allowed with argument"),
    ]:
        result = groups(nowhere, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert wanted in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
