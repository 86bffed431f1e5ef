"""What a broker holds for one partition it hosts (Kafka's Partition): the state LeaderAndIsr
set, the log, the high watermark, and on the leader each follower's progress.

The rules for the ISR and the high watermark (spec §9.5) are methods here, without I/O: the
replica manager calls them and acts on the answers.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum

from actors.base.ports import PartitionLog, TopicPartition

__all__ = ["FollowerState", "Partition", "PendingIsr", "Role", "TopicPartition"]


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclasses.dataclass(slots=True)
class FollowerState:
    """The leader's view of one follower (Kafka's Replica)."""

    # -1 until the follower fetches under this leadership.
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_ms: int = 0
    # The broker epoch its fetches carry (KIP-903): what is above was learnt from that
    # incarnation of the broker, and is forgotten when a newer one fetches.
    broker_epoch: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class PendingIsr:
    """An ISR change sent to the controller and not yet answered: one at a time."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    # Each member's broker epoch, in `new_isr`'s order: -1 for one not seen fetching (and
    # for the leader itself, whose own epoch its request carries).
    broker_epochs: tuple[int, ...] = ()


# Read-only, so that a write that skipped `follower` fails rather than reaching every partition.
_NO_FOLLOWERS = typing.cast(dict[int, FollowerState], types.MappingProxyType({}))


@dataclasses.dataclass(slots=True)
class Partition:
    tp: TopicPartition
    role: Role
    leader: int
    leader_epoch: int
    # The ISR as last committed (by the controller's LeaderAndIsr or an AlterPartition answer).
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0
    log: PartitionLog | None = None
    high_watermark: int = 0
    # The log end offset when this broker became leader at this epoch (spec §9.1).
    leader_epoch_start_offset: int = 0
    # Created on a follower's first fetch under this leadership (see `follower`). Until then
    # the shared empty `_NO_FOLLOWERS`: a broker follows most of the partitions it hosts, and
    # an empty dict each is 64 bytes.
    followers: dict[int, FollowerState] = dataclasses.field(default_factory=lambda: _NO_FOLLOWERS)
    leader_since_ms: int = 0
    pending_isr: PendingIsr | None = None
    # Follower side: whether the log must first be truncated to where it agrees with the
    # leader's (a new leader epoch).
    needs_truncation: bool = False
    # StopReplica without delete: the partition stays, its fetching stops.
    stopped: bool = False
    # Follower side: the LeaderAndIsr that made it follow did not name its leader live, so it
    # has nowhere to fetch from; it takes that leader epoch again when it does (see
    # `ReplicaManager._become`).
    leader_unavailable: bool = False

    # --- the leader's rules ---

    @property
    def log_end_offset(self) -> int:
        """The log's end; 0 while no log exists yet (logs are created on first use)."""
        return 0 if self.log is None else self.log.log_end_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR counted for the high watermark: a pending expansion counts at once, a
        pending shrink only once committed (Kafka's maximalIsr)."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr.new_isr)))

    def reset_followers(self, now_ms: int) -> None:
        """A new leadership: every follower's position is unknown; those in the ISR count as
        caught up now (spec §9.1)."""
        self.followers = {}
        self.leader_since_ms = now_ms

    def follower(self, replica: int) -> FollowerState:
        """The leader's view of `replica`, as reset_followers left it until it fetches."""
        state = self.followers.get(replica)
        if state is None:
            if self.followers is _NO_FOLLOWERS:
                self.followers = {}
            caught_up = self.leader_since_ms if replica in self.isr else 0
            state = self.followers[replica] = FollowerState(last_caught_up_ms=caught_up)
        return state

    def update_follower_fetch(
        self, replica: int, fetch_offset: int, now_ms: int, broker_epoch: int = -1
    ) -> bool:
        """A follower fetched from `fetch_offset`: its log ends there. It is caught up when it
        reached the leader's log end now, or the one the leader had at its previous fetch.

        False, and nothing changed, for a fetch of an older incarnation than one already seen
        (Kafka's updateFetchStateOrThrow). A newer incarnation starts from nothing: the
        previous one's progress says nothing of a log that may have lost its unflushed tail."""
        state = self.follower(replica)
        if broker_epoch != state.broker_epoch:
            if broker_epoch < state.broker_epoch:
                return False
            if state.broker_epoch != -1:
                del self.followers[replica]
                state = self.follower(replica)
                state.last_caught_up_ms = 0
            state.broker_epoch = broker_epoch
        leader_end = self.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = state.last_fetch_ms
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_ms = now_ms
        return True

    def broker_epochs(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        """The broker epoch each member of `isr` fetched with, -1 where not known."""
        epochs = []
        for replica in isr:
            state = self.followers.get(replica)
            epochs.append(-1 if state is None or replica == self.leader else state.broker_epoch)
        return tuple(epochs)

    def maybe_advance_high_watermark(self) -> bool:
        """Raise the high watermark to the smallest log end in the maximal ISR."""
        ends = [self.log_end_offset]
        for replica in self.maximal_isr:
            if replica != self.leader:
                state = self.followers.get(replica)
                ends.append(-1 if state is None else state.log_end_offset)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int, lag_ms: int) -> set[int]:
        """ISR followers that are behind and have not caught up for `lag_ms`."""
        leader_end = self.log_end_offset
        out = set()
        for replica in self.isr:
            if replica == self.leader:
                continue
            state = self.follower(replica)
            if state.log_end_offset != leader_end and now_ms - state.last_caught_up_ms > lag_ms:
                out.add(replica)
        return out

    def may_join_isr(self, replica: int, live_broker_epoch: int | None) -> bool:
        """A follower outside the ISR that has reached the high watermark and this leader
        epoch's start offset (spec §9.5), in fetches of the incarnation registered now,
        `live_broker_epoch` (KIP-903; None: not live)."""
        if replica in self.maximal_isr or replica not in self.replicas:
            return False
        state = self.followers.get(replica)
        return (
            state is not None
            and live_broker_epoch is not None
            and state.broker_epoch == live_broker_epoch
            and state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )
