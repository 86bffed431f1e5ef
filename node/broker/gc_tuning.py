"""CPython's cyclic garbage collector, tuned for a process that holds 200k partitions.

A collection holds the event loop (and with it the ZooKeeper session, node/metrics/loop_lag.py)
for as long as it examines objects, and Keel's state is millions of small tracked objects: a
controller of 200k partitions at replication factor 3 holds about 5M (TopicPartition 0.9M,
PartitionReplica 0.8M, LeaderAndIsr 0.4M, ...; named tuples and dataclasses stay tracked where
plain tuples of strings and ints would not). Two things follow.

- The youngest generation's threshold is raised from 700 to 25,000: controller requests and
  ZooKeeper reads allocate hundreds of thousands of maps and lists, and at 700 the collector
  ran thousands of times per request and dominated decoding (0.72 s to 0.25 s to unpack a
  100k-partition LeaderAndIsr).
- A full collection examines every object in the process: 1.4 to 2.7 s at 200k partitions
  (measured through `gc.callbacks` during a controlled shutdown and a broker failure,
  bench/topics_at_scale.py --operations), a third of a 6 s session. So once a full collection
  is done, what survived it (every object then reachable, and nothing else: it has just
  removed the rest) is frozen (`gc.freeze`), and later collections do not examine it: the next
  full one examines only what came since. And the older generations' thresholds are 0, so
  that every third collection is a full one (CPython's defaults put one off for 100 of the
  youngest generation's, which then examined millions of objects at once): a new object is
  examined once or twice before it is frozen or freed. Building 600k partition states this
  way (a synthetic run, 4.8M objects), the longest collection took 20 ms, and all of them 2.7 s;
  with a full collection every 9 of the youngest's, 115 ms and 4.3 s. Frozen
  objects are still freed by reference counting
  when the last reference goes, as Keel's partition, replica and metadata states are: they
  hold no reference cycles. What freezing gives up is a cycle among frozen objects that later
  becomes garbage, which no collection reclaims: such a leak shows as resident memory that
  grows while the partitions do not (`process_resident_memory_bytes`). The frozen count itself
  is not exported: `gc.get_freeze_count` walks the list of frozen objects, and at 200k
  partitions that held the loop 85 to 285 ms on every scrape.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from node.metrics.loop_lag import COLLECTIONS

THRESHOLDS = (25_000, 0, 0)
OLDEST = 2


class _FreezeAfterFullCollection:
    """A `gc.callbacks` entry: times every collection (node/metrics/loop_lag.py exports the
    longest) and freezes the survivors of a full one."""

    def __init__(self) -> None:
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        COLLECTIONS.record(time.perf_counter() - self._started)
        if info["generation"] == OLDEST:
            gc.freeze()


def tune_gc() -> None:
    """Set the thresholds and freeze after each full collection (once per process)."""
    gc.set_threshold(*THRESHOLDS)
    if not any(isinstance(c, _FreezeAfterFullCollection) for c in gc.callbacks):
        gc.callbacks.append(_FreezeAfterFullCollection())
