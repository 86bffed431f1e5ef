"""How long a broker's control request (AlterPartition, ControlledShutdown) waits when the
broker also fetches from the controller's broker: the replica link keeps fetches and control
requests on separate connections, because a server answers one connection's requests in order
and an idle leader holds a follower's fetch for `replica.fetch.wait.max.ms` (500 ms).

One process, real sockets: an RPC server stands in for the controller's broker (it holds each
Fetch for the long poll and answers AlterPartition at once); the broker's real `RpcReplicaLink`
keeps one fetch always outstanding, as a follower's fetcher does, and sends an AlterPartition at
random moments. The same run measures the link as it is, and the link with its control requests
sent on the fetch connection (the state before the split, for comparison).

    .venv/bin/python -m bench.control_requests [--requests 40] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import uvloop

from actors.base.ports import BrokerInfo, RegisteredBroker
from bench.election import cpu_model, percentile
from node.broker.replica_link import RpcReplicaLink
from node.cluster.zookeeper import free_ports
from wire.api import AlterPartitionRequest, FetchRequest, Response
from wire.endpoint import Endpoint
from wire.envelope import ParsedRequest
from wire.server import RpcServer

LONG_POLL_S = 0.5  # Kafka's replica.fetch.wait.max.ms


async def controller_broker(request: ParsedRequest) -> Response:
    if isinstance(request.body, FetchRequest):
        await asyncio.sleep(LONG_POLL_S)  # an idle leader: nothing to return until the poll ends
    return request.spec.response()


async def measure(endpoint: Endpoint, *, shared: bool, requests: int, rng: random.Random) -> list[float]:
    """AlterPartition round trips, in seconds, while a fetch is always outstanding."""

    async def registered(broker_id: int) -> RegisteredBroker:
        return RegisteredBroker(BrokerInfo(broker_id, (endpoint,)), 1)

    link = RpcReplicaLink(1, controller_id=lambda: 0, registered_broker=registered, timeout_s=10.0)
    if shared:
        link._control_pool = link._fetch_pool  # the state before the split

    async def fetcher() -> None:
        while True:
            await link.fetch(endpoint, FetchRequest(replica_id=1, max_wait_ms=int(LONG_POLL_S * 1000)))

    fetching = asyncio.create_task(fetcher())
    times = []
    try:
        for _ in range(requests):
            await asyncio.sleep(rng.uniform(0, LONG_POLL_S))
            started = time.perf_counter()
            await link.alter_partition(AlterPartitionRequest(broker_id=1, broker_epoch=1, topics=[]))
            times.append(time.perf_counter() - started)
    finally:
        fetching.cancel()
        await asyncio.gather(fetching, return_exceptions=True)
        await link.close()
    return times


async def run(requests: int, seed: int) -> tuple[list[float], list[float]]:
    (port,) = free_ports(1)
    server = RpcServer(controller_broker, "127.0.0.1", port)
    await server.start()
    endpoint = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)
    try:
        split = await measure(endpoint, shared=False, requests=requests, rng=random.Random(seed))
        shared = await measure(endpoint, shared=True, requests=requests, rng=random.Random(seed))
    finally:
        await server.close()
    return split, shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}; long poll {LONG_POLL_S * 1000:.0f} ms, {args.requests} requests per run")
    medians: dict[str, list[float]] = {"separate connections": [], "one shared connection": []}
    for n in range(1, args.runs + 1):
        split, shared = uvloop.run(run(args.requests, seed=n))
        for name, times in (("separate connections", split), ("one shared connection", shared)):
            medians[name].append(statistics.median(times))
            print(
                f"run {n}, {name}: AlterPartition p50 {statistics.median(times) * 1000:.1f} ms, "
                f"p99 {percentile(times, 99) * 1000:.1f} ms"
            )
    summary = {name: statistics.median(values) for name, values in medians.items()}
    for name, value in summary.items():
        print(f"median of {args.runs} runs, {name}: p50 {value * 1000:.1f} ms")
    ratio = summary["one shared connection"] / summary["separate connections"]
    print(f"ratio shared/separate: {ratio:.0f}x")


if __name__ == "__main__":
    main()
