"""Log compaction throughput: how fast the log cleaner rewrites a log, against a plain copy.

A log of `--megabytes` of record batches (`--batch` records each, `--value-bytes` values,
keys drawn in turn from `--keys` keys, optionally compressed with `--codec`) is written once
through `Log.append_as_leader` into segments of `--segment-megabytes`. Each run then:

- baseline: copies the log's directory to a fresh one, file by file, read and written
  sequentially and fsynced, as the cleaner's output is: what moving these bytes costs here;
- compaction: one clean of the copy as the broker's cleaner does it (the plan on the log,
  `compaction.clean` with its offset map, rewrite and fsyncs, then the swap), everything
  below the active segment being dirty.

Throughput is the log bytes cleaned (read) per second; the ratio is compaction's throughput
over the copy's, per run, reported as medians.

    .venv/bin/python -m bench.compaction [--runs 5] [--megabytes 200] [--keys 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from actors.base.ports import TopicPartition
from bench.election import cpu_model
from node.broker.log import compaction
from node.broker.log.cleaner import plan_clean
from node.broker.log.config import LogConfig
from node.broker.log.log import Log
from wire import compression, records

MB = 1_000_000
TP = TopicPartition("bench", 0)
NOW_MS = 1_700_000_000_000


def write_log(directory: Path, args: argparse.Namespace) -> Log:
    config = LogConfig(cleanup_policy="compact", segment_bytes=args.segment_megabytes * MB)
    log = Log(directory, TP, config)
    value = (b"0123456789abcdef" * (args.value_bytes // 16 + 1))[: args.value_bytes]
    codec = compression.CODECS[args.codec]
    n = 0
    while log.size < args.megabytes * MB:
        pairs = [(f"key-{(n + i) % args.keys:08d}".encode(), value) for i in range(args.batch)]
        n += args.batch
        log.append_as_leader(
            records.build_batch(pairs, timestamp=NOW_MS, compression_codec=codec), leader_epoch=0
        )
    log.flush()
    return log


def copy_directory(source: Path, target: Path) -> int:
    """Each file read and written sequentially, fsynced; the bytes copied."""
    target.mkdir()
    copied = 0
    for path in sorted(source.iterdir()):
        with path.open("rb") as f, (target / path.name).open("wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
            copied += out.tell()
    return copied


def one_run(
    pristine: Path, work: Path, args: argparse.Namespace
) -> tuple[float, float, compaction.CleanResult]:
    """(copy MB/s, compaction MB/s, what the clean did)."""
    started = time.perf_counter()
    copied = copy_directory(pristine, work)
    copy_rate = copied / MB / (time.perf_counter() - started)
    log = Log(work, TP, LogConfig(cleanup_policy="compact", segment_bytes=args.segment_megabytes * MB))
    started = time.perf_counter()
    plan = plan_clean(log, log.log_end_offset, NOW_MS)
    assert plan is not None
    result = compaction.clean(plan)
    for group in result.groups:
        assert log.replace_segments(group)
    clean_rate = result.bytes_read / MB / (time.perf_counter() - started)
    log.close()
    shutil.rmtree(work)
    return copy_rate, clean_rate, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--segment-megabytes", type=int, default=64)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--codec", choices=sorted(compression.CODECS), default="none")
    parser.add_argument("--dir", type=Path, default=None, help="where the logs go (a temporary directory)")
    args = parser.parse_args()
    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=args.dir) as home:
        pristine = Path(home) / "pristine" / "bench-0"
        started = time.perf_counter()
        log = write_log(pristine, args)
        print(
            f"log: {log.size / MB:.1f} MB in {len(log.segments)} segments, "
            f"offsets 0..{log.log_end_offset - 1}, {args.keys} keys, {args.codec}; "
            f"written in {time.perf_counter() - started:.1f} s"
        )
        log.close()
        copies, cleans, ratios = [], [], []
        for run in range(args.runs):
            copy_rate, clean_rate, result = one_run(pristine, Path(home) / f"run-{run}", args)
            copies.append(copy_rate)
            cleans.append(clean_rate)
            ratios.append(clean_rate / copy_rate)
            handled = result.records_kept + result.records_removed
            print(
                f"run {run + 1}: copy {copy_rate:.1f} MB/s, compaction {clean_rate:.1f} MB/s "
                f"({handled * clean_rate / (result.bytes_read / MB) / 1000:.0f}k records/s) "
                f"({result.bytes_read / MB:.1f} MB to {result.bytes_written / MB:.2f} MB, "
                f"{result.records_removed} records removed, {result.records_kept} kept), "
                f"ratio {100 * clean_rate / copy_rate:.1f} %; load average {os.getloadavg()[0]:.2f}"
            )
    print(
        f"median of {args.runs}: compaction {statistics.median(cleans):.1f} MB/s, "
        f"copy {statistics.median(copies):.1f} MB/s, ratio {100 * statistics.median(ratios):.1f} %"
    )


if __name__ == "__main__":
    main()
