"""Kafka's `kafka-reassign-partitions --generate`, for comparison: each topic placed from
scratch over the broker list with a random start and shift, ignoring where replicas are now
(AdminUtils' rack-unaware and rack-aware assignment, as Kafka documents and tests them)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence


def rack_alternated(brokers: Sequence[int], racks: Mapping[int, str]) -> list[int]:
    """Racks sorted by name, brokers by id inside each; then one broker from each rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(racks[b], []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _replica_index(first: int, second_shift: int, replica: int, n: int) -> int:
    shift = 1 + (second_shift + replica) % (n - 1)
    return (first + shift) % n


def assign(
    brokers: Sequence[int],
    partitions: int,
    replication: int,
    *,
    start: int,
    shift: int,
    racks: Mapping[int, str] | None = None,
) -> list[list[int]]:
    """Replica lists of partitions 0..partitions-1 (fixed start and shift)."""
    n = len(brokers)
    if partitions <= 0 or replication <= 0 or replication > n:
        raise ValueError("bad partition count or replication factor for the broker list")
    if not racks:
        out = []
        next_shift = shift
        for p in range(partitions):
            if p > 0 and p % n == 0:
                next_shift += 1
            first = (p + start) % n
            out.append(
                [brokers[first]]
                + [brokers[_replica_index(first, next_shift, j, n)] for j in range(replication - 1)]
            )
        return out
    ordered = rack_alternated(brokers, racks)
    n_racks = len(set(racks[b] for b in brokers))
    out = []
    next_shift = shift
    for p in range(partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        leader = ordered[first]
        chosen = [leader]
        used_racks = {racks[leader]}
        k = 0
        for _ in range(replication - 1):
            while True:
                candidate = ordered[_replica_index(first, next_shift * n_racks, k, n)]
                k += 1
                rack = racks[candidate]
                if (rack not in used_racks or len(used_racks) == n_racks) and (
                    candidate not in chosen or len(chosen) == n
                ):
                    chosen.append(candidate)
                    used_racks.add(rack)
                    break
        out.append(chosen)
    return out


def generate(
    topics: Mapping[str, tuple[int, int]],
    brokers: Sequence[int],
    racks: Mapping[int, str] | None,
    seed: int = 0,
) -> dict[str, list[list[int]]]:
    """topic -> (partition count, replication factor) placed as `--generate` does: every topic
    gets its own random start and shift (seeded here, so a run can be repeated)."""
    rng = random.Random(seed)
    n = len(brokers)
    return {
        t: assign(brokers, count, rf, start=rng.randrange(n), shift=rng.randrange(n), racks=racks)
        for t, (count, rf) in sorted(topics.items())
    }
