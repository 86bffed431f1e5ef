"""The bulk read of partition states from ZooKeeper, against ZooKeeper's own Java client.

What a controller does when it takes over: read every partition's state. One ZooKeeper
(from the pyspark jars) holds the largest size's states, written once; each size reads the
first N of them, every run by three readers in turn:
  - Keel: `ZooKeeperClient.get_many` (multiReads of 1,000 getData's, at most 10 in flight,
    encoded and decoded by node/zk/read_codec.py);
  - the same requests with aiozk's own codec (the generic `Part` tree), for the codec's share;
  - ZooKeeper's Java client (bench/java/BulkRead.java, compiled here with javac): the same
    multiReads, 10 in flight, asynchronously, in a JVM kept across its runs (JIT warmed up).
Medians over the runs; the ratio to the Java client is the figure, and Keel's time per read
from the smallest size to the largest says whether it grows linearly. The process runs with
the cyclic collector tuned as a broker's is (node/broker/gc_tuning.py): the reads are a
controller's, and with CPython's default thresholds the collector runs every 700 new objects.

    .venv/bin/python -m bench.zk_bulk_read [--sizes 100000,1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiozk import protocol

from bench.election import cpu_model
from bench.failover import PER_TOPIC, populate, topic_names
from node.broker.gc_tuning import tune_gc
from node.cluster.zookeeper import EmbeddedZooKeeper, classpath, java_binary
from node.zk.client import ZooKeeperClient
from node.zk.in_flight import MAX_IN_FLIGHT_REQUESTS, windowed
from node.zk.read_codec import FastMultiReadResponse

CHUNK = 1000
JAVA_SOURCE = Path(__file__).parent / "java" / "BulkRead.java"


class _AiozkMultiReadResponse(protocol.TransactionResponse):  # type: ignore[misc]
    """aiozk's own decoding of a multiRead's answer (defining it registers it: undone below,
    and swapped in only while the aiozk reader runs)."""

    opcode = 22


protocol.response_xref[22] = FastMultiReadResponse


def state_paths(partitions: int) -> list[str]:
    return [
        f"/brokers/topics/{t}/partitions/{p}/state" for t in topic_names(partitions) for p in range(PER_TOPIC)
    ][:partitions]


async def keel_read(client: ZooKeeperClient, paths: list[str]) -> float:
    started = time.perf_counter()
    found = await client.get_many(paths)
    elapsed = time.perf_counter() - started
    assert all(f is not None for f in found), "a state is missing"
    return elapsed


async def aiozk_read(client: ZooKeeperClient, paths: list[str]) -> float:
    async def chunk(part: list[str]) -> int:
        request = protocol.TransactionRequest()
        request.opcode = 22
        for path in part:
            request.add(protocol.GetDataRequest(path=client.path(path), watch=False))
        response = await client.send(request)
        return sum(1 for r in response.responses if not isinstance(r, Exception))

    protocol.response_xref[22] = _AiozkMultiReadResponse
    try:
        started = time.perf_counter()
        chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
        counts = await windowed((functools.partial(chunk, c) for c in chunks), MAX_IN_FLIGHT_REQUESTS)
        elapsed = time.perf_counter() - started
    finally:
        protocol.response_xref[22] = FastMultiReadResponse
    assert sum(counts) == len(paths), "a state is missing"
    return elapsed


def compile_java(directory: Path) -> None:
    javac = Path(java_binary()).with_name("javac")
    subprocess.run(
        [str(javac), "-cp", classpath(), "-d", str(directory), str(JAVA_SOURCE)],
        check=True,
        capture_output=True,
    )


def java_reads(directory: Path, connect: str, paths: list[str], runs: int) -> list[float]:
    listing = directory / f"paths-{len(paths)}.txt"
    listing.write_text("\n".join(paths) + "\n")
    result = subprocess.run(
        [
            java_binary(),
            "-Xmx2g",
            "-cp",
            f"{classpath()}:{directory}",
            "BulkRead",
            connect,
            str(listing),
            str(runs),
            str(CHUNK),
            str(MAX_IN_FLIGHT_REQUESTS),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    assert all(int(found) == len(paths) for _, found in lines), "the Java client missed a state"
    return [float(seconds) for seconds, _ in lines]


async def measure(connect: str, sizes: list[int], runs: int, java_dir: Path, aiozk_up_to: int) -> None:
    client = ZooKeeperClient(connect, session_timeout_s=30, connection_timeout_s=10)
    await client.start()
    per_read = {}
    print("| states | Keel (s) | aiozk's codec (s) | Java client (s) | Keel / Java | aiozk / Keel |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        paths = state_paths(size)
        await keel_read(client, paths)  # a warm-up of each reader's first pass
        keel, aiozk = [], []
        for _ in range(runs):
            keel.append(await keel_read(client, paths))
            if size <= aiozk_up_to:
                aiozk.append(await aiozk_read(client, paths))
        java = java_reads(java_dir, connect, paths, runs + 1)[1:]
        k, j = statistics.median(keel), statistics.median(java)
        per_read[size] = k / size
        if aiozk:
            a = statistics.median(aiozk)
            with_aiozk = f"{a:.3f} | {{}} | {{}} | {a / k:.2f}x"
        else:
            with_aiozk = "— | {} | {} | —"
        print(f"| {size:,} | {k:.3f} | " + with_aiozk.format(f"{j:.3f}", f"{k / j:.2f}x") + " |", flush=True)
    await client.close()
    smallest, largest = min(per_read), max(per_read)
    if largest != smallest:
        low, high = per_read[smallest] * 1e6, per_read[largest] * 1e6
        growth = high / low
        print(f"Keel per read: {low:.2f} µs at {smallest:,}, {high:.2f} µs at {largest:,} ({growth:.2f}x)")


def _sizes(value: str) -> list[int]:
    try:
        sizes = sorted(int(s) for s in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a comma-separated list of state counts") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: each state count must be at least 1")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=_sizes, default="100000,1000000", help="comma-separated state counts")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--aiozk-up-to",
        type=int,
        default=100_000,
        help="read with aiozk's codec only up to this many states (about 17 s per 100k a run)",
    )
    args = parser.parse_args()
    tune_gc()
    sizes: list[int] = args.sizes
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}; runs: {args.runs}, medians")
    with tempfile.TemporaryDirectory() as tmp:
        java_dir = Path(tmp) / "classes"
        java_dir.mkdir()
        compile_java(java_dir)
        zookeeper = EmbeddedZooKeeper(Path(tmp) / "zk", heap_mb=3072)
        connect = zookeeper.start()
        try:
            started = time.perf_counter()
            asyncio.run(populate(connect, max(sizes)))
            print(f"wrote {max(sizes):,} states in {time.perf_counter() - started:.0f} s")
            asyncio.run(measure(connect, sizes, args.runs, java_dir, args.aiozk_up_to))
        finally:
            zookeeper.stop()


if __name__ == "__main__":
    main()
