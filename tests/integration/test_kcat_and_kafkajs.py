"""kcat (librdkafka's command line, from Debian) and kafkajs (Node, from npm) against real
brokers on Kafka listeners: metadata, produce with each codec, read back, a consumer group
that commits and resumes, and kafkajs's admin and idempotent producer.

bin/test installs both when it can (`apt-get install kcat`, `npm install kafkajs` into
.cache/node); a machine without them skips these tests and says which tool is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.integration.conftest import ROOT, Brokers
from tests.integration.test_kafka_listener import start_with_kafka_listeners
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to

pytestmark = pytest.mark.plain_pass_only("its Kafka listeners are PLAINTEXT, which the secured pass refuses")

KCAT = shutil.which("kcat")
KAFKAJS = Path(os.environ.get("KEEL_KAFKAJS", ROOT / ".cache" / "node" / "node_modules" / "kafkajs"))
NODE = shutil.which("node")
GROUP_SETTINGS = {"offsets.topic.num.partitions": "5", "group.initial.rebalance.delay.ms": "0"}


def kcat(*args: str, stdin: str | None = None, timeout: float = 60) -> str:
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"kcat {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
async def test_kcat_lists_produces_with_every_codec_and_reads_back(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await create_topic(brokers.by_id(await controller_of(brokers)), "kcat", partitions=2, rf=3)
    await settled_to(brokers, kazoo, "kcat", lambda s: len(s) == 2, "topic never agreed")
    listing = json.loads(await asyncio.to_thread(kcat, "-b", bootstrap, "-L", "-J"))
    assert {b["id"] for b in listing["brokers"]} == {1, 2, 3}
    assert any(t["topic"] == "kcat" and len(t["partitions"]) == 2 for t in listing["topics"])
    sent = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        lines = [f"{codec}-{i}" for i in range(50)]
        sent += lines
        await asyncio.to_thread(
            kcat,
            "-b",
            bootstrap,
            "-P",
            "-t",
            "kcat",
            "-z",
            codec,
            "-X",
            "acks=all",
            stdin="\n".join(lines) + "\n",
        )
    read = await asyncio.to_thread(kcat, "-b", bootstrap, "-C", "-t", "kcat", "-o", "beginning", "-e", "-q")
    assert sorted(read.split()) == sorted(sent), "every record of every codec, once"

    def group_read(count: int) -> list[tuple[int, int, str]]:
        """kcat's balanced consumer (-G) reading `count` records of the group, committing as
        it goes (librdkafka's auto-commit); (partition, offset, value) of each."""
        assert KCAT is not None
        proc = subprocess.Popen(
            [
                KCAT,
                "-b",
                bootstrap,
                "-G",
                "kcat-group",
                "-X",
                "auto.commit.interval.ms=100",
                "-X",
                "auto.offset.reset=earliest",
                "-q",
                "-c",
                str(count),
                "-f",
                "%p %o %s\\n",
                "kcat",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        return [(int(p), int(o), v) for p, o, v in (line.split() for line in out.splitlines())]

    def committed() -> dict[int, int]:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            return {
                tp.partition: meta.offset
                for tp, meta in admin.list_group_offsets("kcat-group")["kcat-group"].items()
            }
        finally:
            admin.close()

    first = await asyncio.to_thread(group_read, 100)
    marks = await asyncio.to_thread(committed)
    assert sum(marks.values()) <= 100 and marks, "kcat's group committed what it read, at most"
    rest = await asyncio.to_thread(group_read, len(sent) - sum(marks.values()))
    assert all(o >= marks.get(p, 0) for p, o, _ in rest), "the group resumed at its committed offsets"
    before = {v for p, o, v in first if o < marks.get(p, 0)}
    assert sorted(before | {v for _, _, v in rest}) == sorted(sent), "and read the rest, each record once"


_KAFKAJS_SCRIPT = r"""
const { Kafka, CompressionTypes, logLevel } = require(process.env.KAFKAJS);
const kafka = new Kafka({
  clientId: 'keel-test', brokers: process.env.BOOTSTRAP.split(','), logLevel: logLevel.NOTHING,
});
async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [{ topic: 'kafkajs', numPartitions: 2, replicationFactor: 3 }], waitForLeaders: true,
  });
  const topics = await admin.listTopics();
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const sent = [];
  for (let i = 0; i < 200; i++) sent.push({ key: `k${i % 7}`, value: `v${i}` });
  await producer.send({ topic: 'kafkajs', acks: -1, messages: sent.slice(0, 100) });
  await producer.send({
    topic: 'kafkajs', acks: -1, compression: CompressionTypes.GZIP, messages: sent.slice(100),
  });
  await producer.disconnect();
  const seen = [];
  const consumer = kafka.consumer({ groupId: 'kafkajs-group' });
  await consumer.connect();
  await consumer.subscribe({ topic: 'kafkajs', fromBeginning: true });
  await new Promise((resolve) => {
    consumer.run({ eachMessage: async ({ message }) => {
      seen.push(message.value.toString());
      if (seen.length === sent.length) resolve();
    } });
  });
  await consumer.disconnect();
  const admin2 = kafka.admin();
  await admin2.connect();
  const offsets = await admin2.fetchOffsets({ groupId: 'kafkajs-group', topics: ['kafkajs'] });
  await admin2.disconnect();
  const committed = offsets[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0);
  console.log(JSON.stringify({ topics, seen, committed }));
}
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
"""


@pytest.mark.skipif(
    NODE is None or not KAFKAJS.exists(), reason="node or kafkajs is not installed (npm install kafkajs)"
)
async def test_kafkajs_administers_produces_idempotently_and_reads_in_a_group(
    brokers: Brokers, tmp_path: Path
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1, 2, 3, **GROUP_SETTINGS)
    await controller_of(brokers)
    script = tmp_path / "kafkajs_check.js"
    script.write_text(_KAFKAJS_SCRIPT)
    assert NODE is not None
    done = await asyncio.to_thread(
        subprocess.run,
        [NODE, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KAFKAJS": str(KAFKAJS), "BOOTSTRAP": bootstrap},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "kafkajs" in result["topics"]
    assert sorted(result["seen"]) == sorted(f"v{i}" for i in range(200)), "each record once"
    assert result["committed"] == 200, "the group committed past every record"
