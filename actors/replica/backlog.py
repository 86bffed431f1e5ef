"""A set of partitions handed out a slice at a time, smallest first.

Fetch sessions move partitions in slices: a follower adds at most a thousand new partitions to
its session per fetch, and a leader answers at most a thousand changed ones. After a broker
failure at scale both sets hold hundreds of thousands. Picking each slice by scanning the whole
set (`heapq.nsmallest`) cost the set's size per fetch, so the size squared over the slices: at
1M partitions a follower spent minutes re-scanning what it had not yet added. A heap beside the
set makes a slice cost its own size (times a logarithm).

Entries removed from the set stay in the heap until popped (a lazy delete); the heap is
rebuilt from the set when such leftovers outnumber the members.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from actors.base.ports import TopicPartition

# Leftovers tolerated in the heap before it is rebuilt, beyond one per member.
_SLACK = 1024


class Backlog:
    __slots__ = ("_heap", "_members")

    def __init__(self, members: Iterable[TopicPartition] = ()) -> None:
        self._members: set[TopicPartition] = set(members)
        self._heap: list[TopicPartition] = list(self._members)
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._members)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __contains__(self, tp: object) -> bool:
        return tp in self._members

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._members)

    def add(self, tp: TopicPartition) -> None:
        if tp not in self._members:
            self._members.add(tp)
            heapq.heappush(self._heap, tp)

    def update(self, tps: Iterable[TopicPartition]) -> None:
        fresh = [tp for tp in tps if tp not in self._members]
        self._members.update(fresh)
        if len(fresh) > len(self._heap):
            self._heap += fresh
            heapq.heapify(self._heap)
        else:
            for tp in fresh:
                heapq.heappush(self._heap, tp)

    def discard(self, tp: TopicPartition) -> None:
        self._members.discard(tp)

    def clear(self) -> None:
        self._members.clear()
        self._heap.clear()

    def take(self, limit: int) -> list[TopicPartition]:
        """The `limit` smallest members, in order, removed from the backlog."""
        taken: list[TopicPartition] = []
        heap, members = self._heap, self._members
        while heap and len(taken) < limit:
            tp = heapq.heappop(heap)
            if tp in members:
                members.remove(tp)
                taken.append(tp)
        if len(heap) > 2 * len(members) + _SLACK:
            self._heap = list(members)
            heapq.heapify(self._heap)
        return taken
