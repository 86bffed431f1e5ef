"""One consumer group as its coordinator holds it (Kafka's GroupMetadata and MemberMetadata).

A group moves through Kafka's states:

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable
      ^             ^   |                  |                 |
      |             |   +-- (no members) --+-----------------+--> Empty
      +-------------+------- a member joins, leaves or expires ---+

In PreparingRebalance the coordinator waits for every member to send JoinGroup again (or for
the rebalance timeout); the members that did form the next generation, and the leader gets
their metadata. In CompletingRebalance it waits for the leader's SyncGroup with the
assignments; Stable hands each member its own. Dead is a group deleted or unloaded: its
members must find the coordinator again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import Counter

from actors.base.clock import Cancellable
from actors.group.records import CommittedOffset, StoredGroup, StoredMember
from wire.api import JoinGroupResponse, SyncGroupResponse
from wire.consumer_protocol import ConsumerProtocolError, subscription_topics


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: asyncio.Future[JoinGroupResponse] | None = None
    awaiting_sync: asyncio.Future[SyncGroupResponse] | None = None
    heartbeat: Cancellable | None = None
    # A member that has joined no generation yet: it may not hold up a rebalance for long.
    is_new: bool = False

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols that every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def stored(self, protocol: str | None) -> StoredMember:
        return StoredMember(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.metadata(protocol) if protocol else b"",
            self.assignment,
        )


@dataclasses.dataclass(eq=False)
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = dataclasses.field(default_factory=dict)
    # MEMBER_ID_REQUIRED handed out, the JoinGroup with it not yet seen.
    pending: dict[str, Cancellable] = dataclasses.field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = dataclasses.field(default_factory=dict)
    state_timestamp: int = -1
    rebalance_timer: Cancellable | None = None
    # The join deadline of the rebalance under way, and for a first rebalance of an empty
    # group the latest it may be pushed to (group.initial.rebalance.delay.ms).
    rebalance_deadline: float = 0.0
    instances: dict[str, str] = dataclasses.field(default_factory=dict)  # instance id -> member id
    # Commits appended but not yet answered: expiry leaves them be, so that no tombstone
    # lands after a commit it did not see.
    pending_commits: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)
    # The topics this generation's members subscribed to, as it formed (None: not known).
    subscribed: set[str] | None = None

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        if not protocols or not protocol_type:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidates())

    def candidates(self) -> set[str]:
        """The protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """The candidate the most members name first among the candidates (Kafka's vote)."""
        candidates = self.candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(sorted(votes), key=lambda name: votes[name])

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        """Every member has sent JoinGroup for the next generation (true of no members: the
        rebalance then ends with the group empty)."""
        return all(m.awaiting_join is not None for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to, taken as each generation forms
        (Kafka's computeSubscribedTopics); None when a member's subscription cannot be read
        (then none of its offsets is known to be unused)."""
        if self.protocol_type != "consumer" or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(subscription_topics(member.metadata(self.protocol or "")))
            except ConsumerProtocolError:
                return None
        return topics

    def expired_offsets(self, now_ms: int, retention_ms: int) -> dict[tuple[str, int], CommittedOffset]:
        """The committed offsets past `offsets.retention.minutes` (KIP-211, Kafka's
        removeExpiredOffsets): an empty group's once it has been empty that long; a stable
        consumer group's, only for topics no member subscribes to, that long after their
        commit; a group used only to store offsets (no protocol), that long after each
        commit. A group rebalancing, or of another protocol while it has members, keeps all."""
        subscribed: set[str] = set()
        since_empty = -1
        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            since_empty = self.state_timestamp
        elif self.protocol_type == "consumer" and self.state is GroupState.STABLE:
            if self.subscribed is None:
                return {}
            subscribed = self.subscribed
        elif self.protocol_type is not None:
            return {}
        return {
            tp: committed
            for tp, committed in self.offsets.items()
            if tp[0] not in subscribed
            and tp not in self.pending_commits
            and now_ms - (since_empty if since_empty >= 0 else committed.commit_timestamp) >= retention_ms
        }

    def stored(self) -> StoredGroup:
        return StoredGroup(
            self.protocol_type or "",
            self.generation,
            self.protocol,
            self.leader,
            self.state_timestamp,
            tuple(m.stored(self.protocol) for m in self.members.values()),
        )
