"""Equal lists of broker ids held as one tuple object.

A broker keeps a replica list and an ISR for every partition it hosts or knows of, and the
controller's requests carry a fresh list per partition state; a cluster of a million
partitions on a few brokers has only a handful of distinct lists. Keeping one tuple per
distinct list saves about 64 bytes per list held."""

from __future__ import annotations

from collections.abc import Iterable


class SharedIds:
    # Bounded: once this many distinct lists are held, the table starts again (the tuples
    # already handed out stay valid; only later equal lists get a new shared copy).
    LIMIT = 10_000

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[tuple[int, ...], tuple[int, ...]] = {}

    def __call__(self, ids: Iterable[int]) -> tuple[int, ...]:
        key = tuple(ids)
        held = self._held.get(key)
        if held is None:
            if len(self._held) >= self.LIMIT:
                self._held.clear()
            held = self._held[key] = key
        return held
