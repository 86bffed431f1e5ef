"""What this broker fetches as a follower, per source broker, kept up to date as partitions
change rather than recomputed: a fetch plan then costs as much as what changed since the last
one, not as much as the partitions followed (tens of thousands on a big broker).

Per source: the partitions followed there, those whose fetch offset or leader epoch moved since
the last fetch (`updates`), those to drop from the fetch session (`removed`), those that must
truncate by leader epoch before fetching, the leader's endpoint, and the fetch session.
"""

from __future__ import annotations

import dataclasses

from actors.base.ports import TopicPartition
from actors.replica.fetch_session import FetchSessionClient
from wire.endpoint import Endpoint


@dataclasses.dataclass
class Source:
    endpoint: Endpoint
    followed: set[TopicPartition] = dataclasses.field(default_factory=set)
    updates: set[TopicPartition] = dataclasses.field(default_factory=set)
    removed: set[TopicPartition] = dataclasses.field(default_factory=set)
    truncating: set[TopicPartition] = dataclasses.field(default_factory=set)
    # Left out of fetches by the follower quota (replication throttle) until it frees.
    held: set[TopicPartition] = dataclasses.field(default_factory=set)
    session: FetchSessionClient = dataclasses.field(default_factory=FetchSessionClient)
    # The last epoch end offsets asked of this leader failed for some partition: the next
    # plan fetches the others first.
    truncation_failed: bool = False


class FetchTargets:
    def __init__(self) -> None:
        self._sources: dict[int, Source] = {}

    def get(self, source: int) -> Source | None:
        return self._sources.get(source)

    def drop(self, source: int) -> None:
        self._sources.pop(source, None)

    def follow(self, source: int, endpoint: Endpoint, tp: TopicPartition, *, truncate_first: bool) -> None:
        state = self._sources.get(source)
        if state is None:
            state = self._sources[source] = Source(endpoint)
        state.endpoint = endpoint  # the newest LeaderAndIsr knows best
        state.followed.add(tp)
        state.updates.add(tp)
        state.removed.discard(tp)
        if truncate_first:
            state.truncating.add(tp)

    def unfollow(self, source: int, tp: TopicPartition) -> None:
        state = self._sources.get(source)
        if state is None or tp not in state.followed:
            return
        state.followed.discard(tp)
        state.updates.discard(tp)
        state.truncating.discard(tp)
        state.held.discard(tp)
        state.session.waiting.discard(tp)
        state.removed.add(tp)

    def moved(self, source: int, tp: TopicPartition) -> None:
        """The partition's log end changed: the leader must hear the new fetch offset."""
        state = self._sources.get(source)
        if state is not None and tp in state.followed:
            state.updates.add(tp)

    def must_truncate(self, source: int, tp: TopicPartition) -> None:
        state = self._sources.get(source)
        if state is not None and tp in state.followed:
            state.truncating.add(tp)

    def truncation_answered(self, source: int, *, failed: bool) -> None:
        state = self._sources.get(source)
        if state is not None:
            state.truncation_failed = failed and bool(state.truncating)

    def truncated(self, source: int, tp: TopicPartition) -> None:
        state = self._sources.get(source)
        if state is not None:
            state.truncating.discard(tp)
            self.moved(source, tp)
