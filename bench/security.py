"""What TLS and SASL cost: produce throughput and LeaderAndIsr handling over SASL_SSL
(TLS 1.2+ and SCRAM-SHA-512) against PLAINTEXT, in the same run, on the same broker.

One broker process with two listeners, PLAINTEXT and SASL_SSL (`keel-cluster`'s own CA and
certificates, `node/cluster/security.py`); a topic of one partition with replication factor
1, so acks=all is the leader's append and the figures are the client connections' cost, not
replication's. Rounds alternate PLAINTEXT and SASL_SSL so that the machine's changing load
falls on both alike; each round:

- produce: `--connections` clients, each with one request in flight, send ready-made batches
  of `--batch-records` records of `--record-bytes` until `--megabytes` are acknowledged
  (records/s and MB/s of record payload);
- LeaderAndIsr: one request of `--partitions` partition states (the same partitions every
  time, at a higher leader epoch, so every state is applied), states/s from send to answer;
- connect: the time to open a connection and, on SASL_SSL, do the TLS handshake and the
  SCRAM exchange (once per connection; not in the figures above).

Prints every round, the medians and SASL_SSL's share of PLAINTEXT's figures.

    .venv/bin/python -m bench.security [--rounds 3] [--megabytes 50] [--partitions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench.election import cpu_model
from bench.leader_and_isr import request as leader_and_isr
from bench.leader_and_isr import wait_up
from node.broker.gc_tuning import tune_gc
from node.clients.admin import KeelAdminClient
from node.cluster.local import LocalCluster
from node.cluster.security import make_cluster_security
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from node.security.settings import client_security_from_properties
from wire import records
from wire.api import (
    CreatableTopic,
    LeaderAndIsrResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from wire.client import RpcClient
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

TOPIC = "bench-security"
MB = 1_000_000
PROTOCOLS = ("PLAINTEXT", "SASL_SSL")


class Broker:
    """The broker's two listeners and how a client reaches each."""

    def __init__(self, ports: dict[str, int], sasl_ssl: ClientSecurity) -> None:
        self.ports = ports
        self.security = {"PLAINTEXT": PLAINTEXT_CLIENT, "SASL_SSL": sasl_ssl}

    async def connect(self, protocol: str) -> RpcClient:
        return await RpcClient.connect(
            "127.0.0.1",
            self.ports[protocol],
            request_timeout=120,
            security_protocol=protocol,
            security=self.security[protocol],
        )


async def produce(broker: Broker, protocol: str, batch: bytes, batches: int, connections: int) -> float:
    clients = [await broker.connect(protocol) for _ in range(connections)]
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceTopicData(name=TOPIC, partition_data=[ProducePartitionData(index=0, records=batch)])
        ],
    )
    remaining = [batches]

    async def run(client: RpcClient) -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            response = await client.send(request)
            assert isinstance(response, ProduceResponse)
            error = response.responses[0].partition_responses[0].error_code
            assert error == 0, f"produce failed with error {error}"

    started = time.perf_counter()
    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    return elapsed


async def control(broker: Broker, protocol: str, partitions: int, epoch: int) -> float:
    client = await broker.connect(protocol)
    started = time.perf_counter()
    response = await client.send(leader_and_isr(partitions, epoch, "bench-lai"))
    elapsed = time.perf_counter() - started
    await client.close()
    assert isinstance(response, LeaderAndIsrResponse) and response.error_code == 0, response.error_message
    assert not any(e.error_code for e in response.partition_errors)
    return elapsed


async def connect_time(broker: Broker, protocol: str, count: int = 5) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        client = await broker.connect(protocol)
        times.append(time.perf_counter() - started)
        await client.close()
    return statistics.median(times)


async def create_topic(port: int) -> None:
    async with KeelAdminClient(f"127.0.0.1:{port}", timeout=30) as admin:
        (result,) = (await admin.create_topics([CreatableTopic(name=TOPIC, num_partitions=1)])).topics
        assert result.error_code == 0, result.error_message
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = await admin.metadata([TOPIC])
            if answer.topics and answer.topics[0].partitions and answer.topics[0].partitions[0].leader >= 0:
                return
            await asyncio.sleep(0.1)
    raise RuntimeError("the topic got no leader")


def start_broker(home: Path, connect: str) -> tuple[LocalCluster, Broker]:
    security = make_cluster_security(home, "sasl")
    plain, sasl = free_ports(2)
    settings = {
        **security.broker_settings,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
        "security.inter.broker.protocol": "PLAINTEXT",
        "message.max.bytes": "8388608",
    }
    cluster = LocalCluster(home, connect)
    cluster.new(1, settings, port=plain, home=home / "broker").start()
    sasl_client = client_security_from_properties(security.client_properties)
    return cluster, Broker({"PLAINTEXT": plain, "SASL_SSL": sasl}, sasl_client)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each protocol, alternating")
    parser.add_argument("--megabytes", type=int, default=50, help="record payload per produce round")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=64)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=10_000, help="partition states per LeaderAndIsr")
    args = parser.parse_args()
    tune_gc()
    record = bytes(range(256)) * (args.record_bytes // 256) + b"x" * (args.record_bytes % 256)
    batch = records.build_batch([(None, record)] * args.batch_records, timestamp=int(time.time() * 1000))
    batches = max(1, args.megabytes * MB // (args.record_bytes * args.batch_records))
    payload = batches * args.record_bytes * args.batch_records
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f},"
        f" python {sys.version.split()[0]}; RF 1, acks=all, {args.record_bytes} B records in batches of"
        f" {args.batch_records} ({len(batch) / 1024:.0f} KiB), {args.connections} connections,"
        f" {payload / MB:.0f} MB per round; LeaderAndIsr of {args.partitions} states"
    )
    figures: dict[str, dict[str, list[float]]] = {
        p: {"mb": [], "records": [], "states": [], "connect": []} for p in PROTOCOLS
    }
    epochs = itertools.count(1)
    with tempfile.TemporaryDirectory(prefix="keel-bench-security-") as tmp:
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk")
        zookeeper.start()
        cluster, broker = start_broker(Path(tmp), zookeeper.connect_string)
        try:
            uvloop.run(wait_up(broker.ports["PLAINTEXT"]))
            uvloop.run(create_topic(broker.ports["PLAINTEXT"]))
            # A warm-up round of each: the log's first segment, the broker's caches.
            for protocol in PROTOCOLS:
                uvloop.run(produce(broker, protocol, batch, max(1, batches // 10), args.connections))
                uvloop.run(control(broker, protocol, args.partitions, next(epochs)))
            for round_ in range(1, args.rounds + 1):
                for protocol in PROTOCOLS if round_ % 2 else reversed(PROTOCOLS):
                    elapsed = uvloop.run(produce(broker, protocol, batch, batches, args.connections))
                    control_s = uvloop.run(control(broker, protocol, args.partitions, next(epochs)))
                    connect_s = uvloop.run(connect_time(broker, protocol))
                    row = figures[protocol]
                    row["mb"].append(payload / MB / elapsed)
                    row["records"].append(batches * args.batch_records / elapsed)
                    row["states"].append(args.partitions / control_s)
                    row["connect"].append(connect_s * 1000)
                    print(
                        f"round {round_} {protocol:>9}: produce {row['mb'][-1]:.1f} MB/s"
                        f" ({row['records'][-1]:,.0f} records/s), LeaderAndIsr {row['states'][-1]:,.0f}"
                        f" states/s, connect {row['connect'][-1]:.1f} ms"
                    )
        finally:
            cluster.kill_all()
            zookeeper.stop()
    medians = {p: {k: statistics.median(v) for k, v in figures[p].items()} for p in PROTOCOLS}
    for protocol in PROTOCOLS:
        m = medians[protocol]
        print(
            f"median {protocol:>9}: produce {m['mb']:.1f} MB/s ({m['records']:,.0f} records/s),"
            f" LeaderAndIsr {m['states']:,.0f} states/s, connect {m['connect']:.1f} ms"
        )
    plain, secure = medians["PLAINTEXT"], medians["SASL_SSL"]
    print(
        f"SASL_SSL / PLAINTEXT: produce {secure['mb'] / plain['mb']:.0%},"
        f" LeaderAndIsr {secure['states'] / plain['states']:.0%} (target: produce >= 70%)"
    )


if __name__ == "__main__":
    main()
