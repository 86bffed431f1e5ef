"""`keel configs` (kafka-configs) against real brokers, and `keel dump-log` (kafka-dump-log) on
the segment a real broker wrote: each through the `keel` command a person runs."""

from __future__ import annotations

import re

from node.clients.producer import KeelProducer
from tests.integration.conftest import Brokers
from tests.integration.replication import bootstrap
from tests.integration.test_partition_leadership import controller_of, create_topic
from tests.support import keel

LEADER_REPLICAS = "leader.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"


def configs(brokers: Brokers, *args: str) -> tuple[int, str, str]:
    done = keel("configs", "--bootstrap-server", bootstrap(brokers), *args)
    return done.returncode, done.stdout, done.stderr


def line(key: str, value: str, *synonyms: tuple[str, str]) -> str:
    said = ", ".join(f"{source}:{key}={v}" for source, v in synonyms)
    return f"  {key}={value} sensitive=false synonyms={{{said}}}"


async def test_topic_configs_altered_then_described_as_kafka_configs_does(brokers: Brokers) -> None:
    one, _ = brokers.start(1, 2)
    await controller_of(brokers)
    await create_topic(one, "conf", partitions=2, rf=2)
    topic = ("--entity-type", "topics", "--entity-name", "conf")

    status, out, err = configs(
        brokers, "--alter", *topic, "--add-config", f"retention.ms=60000,{LEADER_REPLICAS}=[0:1,1:2]"
    )
    assert (status, out) == (0, "Completed updating config for topic conf.\n"), err
    status, out, err = configs(brokers, "--describe", *topic)
    assert status == 0, err
    assert out.splitlines() == [
        "Dynamic configs for topic conf are:",
        line(LEADER_REPLICAS, "0:1,1:2", ("DYNAMIC_TOPIC_CONFIG", "0:1,1:2")),
        line("retention.ms", "60000", ("DYNAMIC_TOPIC_CONFIG", "60000")),
    ]

    status, out, err = configs(brokers, "--alter", *topic, "--delete-config", "retention.ms")
    assert status == 0, err
    status, out, err = configs(brokers, "--describe", *topic, "--all")
    assert status == 0, err
    shown = out.splitlines()
    assert shown[0] == "All configs for topic conf are:"
    assert line(LEADER_REPLICAS, "0:1,1:2", ("DYNAMIC_TOPIC_CONFIG", "0:1,1:2")) in shown
    retention = [s for s in shown if s.startswith("  retention.ms=")]
    assert retention == [line("retention.ms", "604800000", ("DEFAULT_CONFIG", "604800000"))]

    # Refusals: one line, exit 1, nothing changed.
    for args, phrase in (
        (("--alter", *topic, "--add-config", "no.such.config=1"), "INVALID_CONFIG"),
        (("--alter", *topic, "--add-config", "retention.ms=soon"), "INVALID_CONFIG"),
        (("--alter", *topic, "--delete-config", "retention.ms"), "Invalid config(s): retention.ms"),
        (("--describe", "--entity-type", "topics", "--entity-name", "absent"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (
            (
                "--alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "absent",
                "--add-config",
                "retention.ms=1",
            ),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
    ):
        status, out, err = configs(brokers, *args)
        assert (status, out) == (1, ""), (args, out, err)
        assert phrase in err and len(err.splitlines()) == 1, (args, err)
    status, out, err = configs(brokers, "--describe", *topic)
    assert out.splitlines()[1:] == [line(LEADER_REPLICAS, "0:1,1:2", ("DYNAMIC_TOPIC_CONFIG", "0:1,1:2"))]
    # A bad --add-config is a usage error, before any broker is asked.
    status, _, err = configs(brokers, "--alter", *topic, "--add-config", "a=b=c")
    assert status == 2 and 'must be in the format "key=val"' in err


async def test_broker_configs_altered_then_described_with_the_default_they_override(brokers: Brokers) -> None:
    brokers.start(1, 2)
    await controller_of(brokers)

    status, out, err = configs(
        brokers,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        f"{LEADER_RATE}=1000000",
    )
    assert (status, out) == (0, "Completed updating default config for brokers in the cluster.\n"), err
    broker_one = ("--entity-type", "brokers", "--entity-name", "1")
    status, out, err = configs(brokers, "--alter", *broker_one, "--add-config", f"{LEADER_RATE}=2000")
    assert (status, out) == (0, "Completed updating config for broker 1.\n"), err

    status, out, err = configs(brokers, "--describe", *broker_one)
    assert status == 0, err
    overridden = line(
        LEADER_RATE, "2000", ("DYNAMIC_BROKER_CONFIG", "2000"), ("DYNAMIC_DEFAULT_BROKER_CONFIG", "1000000")
    )
    assert out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        overridden,
    ]
    # Every broker and the default, as Kafka's tool lists them without --entity-name.
    status, out, err = configs(brokers, "--describe", "--entity-type", "brokers")
    assert status == 0, err
    assert out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        overridden,
        "Dynamic configs for broker 2 are:",
        "Default configs for brokers in the cluster are:",
        line(LEADER_RATE, "1000000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "1000000")),
    ]
    # --all asks broker 2 itself, the one that knows its server.properties.
    status, out, err = configs(
        brokers, "--describe", "--entity-type", "brokers", "--entity-name", "2", "--all"
    )
    assert status == 0, err
    assert line("broker.id", "2", ("STATIC_BROKER_CONFIG", "2")) in out.splitlines()
    assert line(LEADER_RATE, "1000000", ("DYNAMIC_DEFAULT_BROKER_CONFIG", "1000000")) in out.splitlines()

    status, out, err = configs(brokers, "--alter", *broker_one, "--add-config", "log.retention.ms=1")
    assert (status, out) == (1, "") and "INVALID_CONFIG" in err and len(err.splitlines()) == 1
    status, _, err = configs(brokers, "--describe", "--entity-type", "brokers", "--entity-name", "one")
    assert status == 2 and "must be a valid integer broker id" in err


async def test_dump_log_prints_the_records_a_broker_wrote(brokers: Brokers) -> None:
    (one,) = brokers.start(1)
    await controller_of(brokers)
    await create_topic(one, "dumped", assignment={0: [1]})
    async with KeelProducer(bootstrap(brokers), acks=-1, delivery_timeout=30) as producer:
        await producer.send_many(
            "dumped", [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)], partition=0
        )
    async with KeelProducer(
        bootstrap(brokers), acks=-1, delivery_timeout=30, compression_type="gzip"
    ) as zipped:
        await zipped.send_many("dumped", [(None, b"zipped-%d" % i) for i in range(2)], partition=0)
    segment = one.log_dir / "dumped-0" / "00000000000000000000.log"

    done = keel("dump-log", "--files", str(segment), "--print-data-log")
    assert done.returncode == 0, done.stderr
    shown = done.stdout.splitlines()
    assert shown[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = [s for s in shown if s.startswith("baseOffset: ")]
    assert [re.search(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+)", b).groups() for b in batches] == [  # type: ignore[union-attr]
        ("0", "2", "3"),
        ("3", "4", "2"),
    ]
    assert "compresscodec: none" in batches[0] and "compresscodec: gzip" in batches[1]
    assert all(b.endswith("isvalid: true") and "partitionLeaderEpoch: 0 " in b for b in batches)
    records = [
        re.fullmatch(
            r"\| offset: (\d+) CreateTime: \d+ keySize: (-?\d+) valueSize: \d+ "
            r"sequence: -1 headerKeys: \[\](?: key: (\S+))? payload: (\S+)",
            s,
        )
        for s in shown
        if s.startswith("| ")
    ]
    assert [m.groups() if m else None for m in records] == [
        ("0", "2", "k0", "v0"),
        ("1", "2", "k1", "v1"),
        ("2", "2", "k2", "v2"),
        ("3", "-1", None, "zipped-0"),
        ("4", "-1", None, "zipped-1"),
    ]

    # The same file torn: Kafka's line at the end, and exit 1.
    torn = segment.parent.parent / "torn" / segment.name
    torn.parent.mkdir()
    torn.write_bytes(segment.read_bytes()[:-5])
    done = keel("dump-log", "--files", str(torn))
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("Found ") and "invalid bytes at the end of" in done.stdout
    done = keel("dump-log", "--files", str(torn.with_name("00000000000000000099.log")))
    assert done.returncode == 2 and done.stderr.strip().endswith("no such file")
