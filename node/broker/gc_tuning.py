"""CPython's cyclic garbage collector, tuned for a process that holds 200k partitions.

A collection holds the event loop (and with it the ZooKeeper session, node/metrics/loop_lag.py)
for as long as it examines objects, and Keel's state is millions of small tracked objects: a
controller of 200k partitions at replication factor 3 holds about 5M (TopicPartition 0.9M,
PartitionReplica 0.8M, LeaderAndIsr 0.4M, ...; named tuples and dataclasses stay tracked where
plain tuples of strings and ints would not). Two things follow.

- The youngest generation's threshold is raised from 700 to 25,000: controller requests and
  ZooKeeper reads allocate hundreds of thousands of maps and lists, and at 700 the collector
  ran thousands of times per request and dominated decoding (0.72 s to 0.25 s to unpack a
  100k-partition LeaderAndIsr). The middle one is collected every 2 of those rather than 10:
  it then examines a twentieth as much each time, for about the same work in all (the longest
  such collection over 200 LeaderAndIsr of 1,000 states: 14 ms).
- A full collection examines every object in the process: 1.4 to 2.7 s at 200k partitions
  (measured through `gc.callbacks` during a controlled shutdown and a broker failure,
  bench/topics_at_scale.py --operations), a third of a 6 s session. So once a full collection
  is done, what survived it (every object then reachable, and nothing else: it has just
  removed the rest) is frozen (`gc.freeze`), and later collections do not examine it: the next
  full one examines only what came since. And a full collection comes every 2 of the middle
  generation's (CPython's default is 10, and 100 here before), so that what came since stays
  small: at 100 they were put off until they examined millions of objects at once. Frozen
  objects are still freed by reference counting
  when the last reference goes, as Keel's partition, replica and metadata states are: they
  hold no reference cycles. What freezing gives up is a cycle among frozen objects that later
  becomes garbage, which no collection reclaims; the frozen count is exported
  (`keel_gc_frozen_objects`) so that such a leak shows as growth past the state's own size.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from node.metrics.loop_lag import COLLECTIONS

THRESHOLDS = (25_000, 2, 2)
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
