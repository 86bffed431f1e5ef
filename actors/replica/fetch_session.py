"""Incremental fetch sessions (Kafka's KIP-227), so that an idle follower of many partitions
does not send, and its leader does not answer, every partition twice a second.

The follower's first Fetch to a leader is full (session id 0, epoch 0) and opens a session on
the leader, which remembers each partition's fetch offset and leader epoch. Later fetches
(epoch 1, 2, ...) carry only the partitions whose offset or epoch changed, and the ones to
forget. The leader answers only partitions that have records, an error, or a new high
watermark or log start: it tracks which partitions changed since the last answer (`dirty`)
instead of looking at all of them. A follower whose session the leader does not know, or whose
epoch is off, starts again with a full fetch. Consumers (epoch -1) fetch without sessions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
from collections.abc import Iterable

from actors.base.ports import TopicPartition
from actors.replica.backlog import Backlog
from wire.api import FetchPartition, FetchRequest, ForgottenTopic
from wire.errors import ErrorCode

FULL_EPOCH = 0
NO_SESSION_EPOCH = -1
# Sessions a leader keeps; each follower has at most one (a new full fetch replaces it).
MAX_SESSIONS = 1000
# Partitions a follower adds to its session per fetch. A session over 100k partitions (a big
# broker after another one failed) is not opened by one fetch naming them all: building it,
# decoding it on the leader and answering it each held a loop for a second at 200k partitions
# (bench/topics_at_scale.py --operations). It opens with this many and grows by as many per
# fetch, each answered at once (no long poll) while partitions wait to be added; a partition
# already in the session is always sent when its offset or epoch moves.
PARTITIONS_ADDED_PER_FETCH = 1000
# Partitions that changed since a session's last answer, answered per fetch: after a broker
# failure a new leader marks 70k partitions at once (their high watermarks move), and one
# answer for all of them held both loops for half a second; the rest are answered by the
# next fetches, each at once.
DIRTY_ANSWERED_PER_FETCH = 1000
_IDS = random.SystemRandom()


@dataclasses.dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    leader_epoch: int
    max_bytes: int
    # What the follower was last told, to answer only changes.
    sent_high_watermark: int = -1
    sent_log_start_offset: int = -1


@dataclasses.dataclass
class FetchSession:
    session_id: int
    replica: int
    next_epoch: int
    partitions: dict[TopicPartition, CachedPartition]
    # The session's number in the order sessions were opened: what the leader goes by
    # internally (the id, random, is what the follower sends).
    seq: int = 0
    # Who opened it (principal, connection id): only its fetches use it; any other's naming
    # its id are answered as if it did not exist.
    owner: tuple[str, int] = ("", 0)
    # The follower's broker epoch when it opened the session (KIP-903). A fetch of a later
    # incarnation (after its ZooKeeper session expired and it registered again) finds no
    # session: its full fetch then names every partition, and the leader learns each
    # partition's offset from the incarnation that is live now.
    replica_epoch: int = -1
    dirty: Backlog = dataclasses.field(default_factory=Backlog)
    waiter: asyncio.Future[None] | None = None


class FetchSessionCache:
    """The leader's sessions."""

    def __init__(self) -> None:
        self._sessions: dict[int, FetchSession] = {}
        self._by_replica: dict[int, int] = {}
        # The sessions holding each partition, by their `seq`: they are woken in that order,
        # whatever their ids.
        self._by_partition: dict[TopicPartition, set[int]] = {}
        self._by_seq: dict[int, FetchSession] = {}
        self._seqs = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def open_or_update(
        self, request: FetchRequest, owner: tuple[str, int] = ("", 0)
    ) -> tuple[FetchSession | None, ErrorCode, list[tuple[TopicPartition, FetchPartition]]]:
        """(session, error, partitions to answer now). Without a session: every partition
        of the request. `owner`, the principal and connection the request came on, is bound
        to a session it opens; a session is found only by its owner's fetches."""
        asked = [
            (TopicPartition(topic.topic, item.partition), item)
            for topic in request.topics
            for item in topic.partitions
        ]
        if request.session_epoch == NO_SESSION_EPOCH or request.replica_id < 0:
            return None, ErrorCode.NONE, asked
        if request.session_id == 0:
            opened = self._open(request.replica_id, owner, request.replica_epoch)
            self._update(opened, asked, [])
            return opened, ErrorCode.NONE, asked
        session = self._sessions.get(request.session_id)
        if session is None or session.replica != request.replica_id or session.owner != owner:
            return None, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, []
        if session.replica_epoch != request.replica_epoch:
            self._close(session.session_id)
            return None, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, []
        if request.session_epoch != session.next_epoch:
            return None, ErrorCode.INVALID_FETCH_SESSION_EPOCH, []
        session.next_epoch += 1
        forgotten = [TopicPartition(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions]
        self._update(session, asked, forgotten)
        wanted = dict(asked)
        for tp, item in self.take_dirty(session):
            wanted.setdefault(tp, item)
        return session, ErrorCode.NONE, list(wanted.items())

    def _open(self, replica: int, owner: tuple[str, int], replica_epoch: int) -> FetchSession:
        previous = self._by_replica.pop(replica, None)
        if previous is not None:
            self._close(previous)
        if len(self._sessions) >= MAX_SESSIONS:
            self._close(next(iter(self._sessions)))
        session = FetchSession(self._new_id(), replica, 1, {}, next(self._seqs), owner, replica_epoch)
        self._sessions[session.session_id] = session
        self._by_seq[session.seq] = session
        self._by_replica[replica] = session.session_id
        return session

    def _new_id(self) -> int:
        """A random id (as Kafka's), not the next of a sequence: a session is not found by
        counting (and only a principal with ClusterAction reaches the session code at all:
        actors/security/api_authorization.py). Drawn from the system's generator, not from `random`,
        which the simulation seeds: its seeds replay as before."""
        while True:
            session_id = _IDS.getrandbits(31)
            if session_id and session_id not in self._sessions:
                return session_id

    def _close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        del self._by_seq[session.seq]
        for tp in session.partitions:
            self._by_partition.get(tp, set()).discard(session.seq)
        if self._by_replica.get(session.replica) == session_id:
            del self._by_replica[session.replica]
        if session.waiter is not None and not session.waiter.done():
            session.waiter.set_result(None)

    def _update(
        self,
        session: FetchSession,
        asked: list[tuple[TopicPartition, FetchPartition]],
        forgotten: list[TopicPartition],
    ) -> None:
        for tp in forgotten:
            if session.partitions.pop(tp, None) is not None:
                self._by_partition.get(tp, set()).discard(session.seq)
        for tp, item in asked:
            cached = session.partitions.get(tp)
            if cached is None:
                session.partitions[tp] = CachedPartition(
                    item.fetch_offset, item.current_leader_epoch, item.partition_max_bytes
                )
                self._by_partition.setdefault(tp, set()).add(session.seq)
            else:
                cached.fetch_offset = item.fetch_offset
                cached.leader_epoch = item.current_leader_epoch
                cached.max_bytes = item.partition_max_bytes

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def take_dirty(
        self, session: FetchSession, limit: int = DIRTY_ANSWERED_PER_FETCH
    ) -> list[tuple[TopicPartition, FetchPartition]]:
        """The partitions of `session` that changed since its last answer (a long poll woke),
        at most `limit` of them, first in partition order; the rest stay dirty, and the next
        fetch is answered at once with them."""
        wanted = []
        for tp in session.dirty.take(limit):
            cached = session.partitions.get(tp)
            if cached is not None:
                wanted.append((tp, _cached_request(tp, cached)))
        return wanted

    def read_again(self, tp: TopicPartition) -> None:
        """Read `tp` at each session's next fetch, without waking a long poll: the next fetch
        comes at the follower's pace, as Kafka's leader reads every partition of a session at
        each fetch."""
        for seq in self._by_partition.get(tp, ()):
            self._by_seq[seq].dirty.add(tp)

    def mark_dirty(self, tp: TopicPartition) -> None:
        """Something followers should hear about changed for `tp`: wake their long polls."""
        for seq in self._by_partition.get(tp, ()):
            session = self._by_seq[seq]
            session.dirty.add(tp)
            if session.waiter is not None and not session.waiter.done():
                session.waiter.set_result(None)


@dataclasses.dataclass
class FetchSessionClient:
    """The follower's side of its session with one leader."""

    session_id: int = 0
    next_epoch: int = FULL_EPOCH
    sent: dict[TopicPartition, tuple[int, int]] = dataclasses.field(default_factory=dict)
    in_flight: bool = False
    # The leader answered a full fetch without opening a session: every fetch is full, so each
    # names every partition (growing a session is then impossible).
    sessionless: bool = False
    # Followed partitions not in the session yet, added a bounded number per fetch.
    waiting: Backlog = dataclasses.field(default_factory=Backlog)

    def reset(self) -> None:
        """No session: the next fetch is full. `sent` stays until then: it names what was in
        the session, which joins the next one."""
        self.session_id, self.next_epoch, self.in_flight = 0, FULL_EPOCH, False

    def split_additions(
        self, wanted: Iterable[TopicPartition], limit: int = PARTITIONS_ADDED_PER_FETCH
    ) -> list[TopicPartition]:
        """The partitions to send in the next fetch, in partition order: every one of `wanted`
        already in the session, and the first `limit` of those waiting to join it (all of
        them when the leader keeps no session); those of `wanted` new to the session join
        the wait. Before a full fetch nothing is in the session: `wanted` must then name
        what was (see `reset`) beside what changed."""
        if self.needs_full_fetch:
            self.waiting.update(wanted)
            return self.waiting.take(len(self.waiting) if self.sessionless else limit)
        in_session: list[TopicPartition] = []
        for tp in wanted:
            if tp in self.sent:
                in_session.append(tp)
            else:
                self.waiting.add(tp)
        return sorted([*in_session, *self.waiting.take(limit)])

    @property
    def needs_full_fetch(self) -> bool:
        """No session yet, or the last fetch got no answer (the leader's view is unknown)."""
        return self.session_id == 0 or self.in_flight

    def build_full(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> tuple[int, int, list[TopicPartition]]:
        """(session id 0, epoch 0, every partition): the fetch that opens a session, given
        each followed partition's (fetch offset, leader epoch)."""
        self.reset()
        self.sent = dict(partitions)  # the rest wait to join
        self.in_flight = True
        return 0, FULL_EPOCH, list(partitions)

    def build_incremental(
        self, updates: dict[TopicPartition, tuple[int, int]], removed: set[TopicPartition]
    ) -> tuple[int, int, list[TopicPartition], dict[str, list[int]]]:
        """(session id, epoch, partitions to send, forgotten by topic): only what moved."""
        changed = [tp for tp, state in updates.items() if self.sent.get(tp) != state]
        self.sent.update(updates)
        forgotten: dict[str, list[int]] = {}
        for tp in sorted(removed):
            if self.sent.pop(tp, None) is not None:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
        self.in_flight = True
        return self.session_id, self.next_epoch, changed, forgotten

    def answered(self, error_code: int, session_id: int) -> None:
        self.in_flight = False
        if error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self.reset()
            return
        if session_id == 0:
            self.reset()  # the leader keeps no session: every fetch is full
            self.sessionless = True
            return
        self.sessionless = False
        self.session_id = session_id
        self.next_epoch += 1

    @staticmethod
    def forgotten_topics(forgotten: dict[str, list[int]]) -> list[ForgottenTopic]:
        return [ForgottenTopic(topic=t, partitions=sorted(ps)) for t, ps in sorted(forgotten.items())]


def _cached_request(tp: TopicPartition, cached: CachedPartition) -> FetchPartition:
    return FetchPartition(
        partition=tp.partition,
        fetch_offset=cached.fetch_offset,
        current_leader_epoch=cached.leader_epoch,
        partition_max_bytes=cached.max_bytes,
    )
