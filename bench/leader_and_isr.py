"""LeaderAndIsr handling on one broker, in partition states per second.

In process: the replica manager applying a request of N partition states (no I/O).
Over the wire: the same request sent to a real broker process, timed from the client's
send to its answer (encode, frame, decode, validate, apply, answer).
Each is the median of several runs; every run uses fresh partitions and a higher leader
epoch, so every state is really applied.

    .venv/bin/python -m bench.leader_and_isr [--partitions 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from actors.replica.replica_manager import ReplicaManager
from bench.election import cpu_model
from node.broker.gc_tuning import tune_gc
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from node.clients.admin import KeelAdminClient
from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper
from wire.api import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrResponse
from wire.client import RpcClient

BROKER = 1


def request(partitions: int, epoch: int, topic_prefix: str) -> LeaderAndIsrRequest:
    states = [
        LeaderAndIsrPartitionState(
            topic=f"{topic_prefix}-{p // 1000}",
            partition=p % 1000,
            controller_epoch=epoch,
            leader=BROKER if p % 3 == 0 else 2,
            leader_epoch=epoch,
            isr=[1, 2, 3],
            partition_epoch=epoch,
            replicas=[1, 2, 3],
        )
        for p in range(partitions)
    ]
    return LeaderAndIsrRequest(controller_id=2, controller_epoch=epoch, partition_states=states)


def in_process(partitions: int, runs: int) -> list[float]:
    # Logs are created on first use, so this directory stays empty.
    scratch = tempfile.mkdtemp(prefix="keel-leader-and-isr-")
    manager = ReplicaManager(BROKER, LogManager([Path(scratch)], LogConfig()))
    rates = []
    for run in range(1, runs + 1):
        order = request(partitions, run, "t")
        started = time.perf_counter()
        response = manager.become_leader_or_follower(order, -1)
        elapsed = time.perf_counter() - started
        assert not any(e.error_code for e in response.partition_errors)
        rates.append(partitions / elapsed)
    return rates


async def over_the_wire(port: int, partitions: int, runs: int) -> list[float]:
    client = await RpcClient.connect("127.0.0.1", port, request_timeout=120)
    rates = []
    for run in range(1, runs + 1):
        order = request(partitions, run, "w")
        started = time.perf_counter()
        response = await client.send(order)
        elapsed = time.perf_counter() - started
        assert isinstance(response, LeaderAndIsrResponse) and response.error_code == 0, response.error_message
        assert not any(e.error_code for e in response.partition_errors)
        rates.append(partitions / elapsed)
    await client.close()
    return rates


async def wait_up(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            async with KeelAdminClient(f"127.0.0.1:{port}", timeout=2) as admin:
                await admin.api_versions()
                return
        except Exception:
            await asyncio.sleep(0.1)
    raise RuntimeError("broker did not come up")


def _runs(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tune_gc()  # as the broker and controller processes do
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}")
    rates = in_process(args.partitions, args.runs)
    print(f"in process: median {statistics.median(rates):,.0f} states/s (runs: {_runs(rates)})")
    with tempfile.TemporaryDirectory() as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk")
        zk.start()
        broker = LocalCluster(Path(tmp), zk.connect_string).new(BROKER, home=Path(tmp) / "broker").start()
        try:
            uvloop.run(wait_up(broker.port))
            wire = uvloop.run(over_the_wire(broker.port, args.partitions, args.runs))
        finally:
            broker.stop(20)
            zk.stop()
    print(f"over the wire: median {statistics.median(wire):,.0f} states/s (runs: {_runs(wire)})")


if __name__ == "__main__":
    main()
