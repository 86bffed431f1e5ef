"""Kafka's `kafka-reassign-partitions --generate`, for comparison: each topic placed from
scratch over the broker list with a random start and shift, ignoring where replicas are now,
by the same placement as topic creation (actors/topic_admin.place_replicas)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from actors.admin.topic_admin import place_replicas


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
    by_broker = {b: racks[b] if racks else None for b in brokers}
    layout = {}
    for topic, (count, factor) in sorted(topics.items()):
        start, shift = rng.randrange(n), rng.randrange(n)
        layout[topic] = list(place_replicas(count, factor, by_broker, start=start, shift=shift).values())
    return layout
