"""What the console shows, as plain data built from what it read: no I/O here, so the pages
and the timeline can be tested on views made by hand.

A broker is alive while it holds `/brokers/ids/<id>`. A broker the console saw registered
before, or that a replica list names, stays on the page marked down. A partition is offline
when it has no leader or its leader is not alive, under-replicated when its ISR is smaller
than its replica list (Kafka's UnderReplicatedPartitions counts the same on the leader).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from actors.base.ports import BrokerInfo, LeadershipInfo, RegisteredBroker, TopicAssignment, TopicPartition
from node.ui.progress import CopyProgress

NO_LEADER = -1


@dataclasses.dataclass(frozen=True)
class BrokerRow:
    broker_id: int
    rack: str | None
    address: str | None
    alive: bool
    # The czxid of its registration (Kafka's broker epoch); None for a broker never seen registered.
    broker_epoch: int | None
    partitions: int = 0
    leaders: int = 0
    bytes: int = 0


@dataclasses.dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # The leader's replica size, else the largest replica's (as the live snapshot counts it).
    size: int = 0
    offline: bool = False

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def under_replicated(self) -> bool:
        return not self.offline and len(self.isr) < len(self.replicas)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@dataclasses.dataclass(frozen=True)
class Reassignment:
    """One partition's reassignment in progress and how far its copy is."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    progress: CopyProgress


@dataclasses.dataclass(frozen=True)
class ClusterView:
    taken_ms: int
    controller_id: int | None
    controller_epoch: int | None
    brokers: tuple[BrokerRow, ...]
    partitions: tuple[PartitionRow, ...]
    # The active controller's own metrics (DescribeController), {} when it did not answer.
    controller_metrics: Mapping[str, float] = dataclasses.field(default_factory=dict)
    topics_being_deleted: frozenset[str] = frozenset()
    reassignments: tuple[Reassignment, ...] = ()
    # The planner's status object (`keel reassign status --format json`), None: no planner.
    planner_status: Mapping[str, object] | None = None
    planner_address: str | None = None

    @property
    def event_queue_size(self) -> int | None:
        value = self.controller_metrics.get("EventQueueSize")
        return None if value is None else int(value)

    def broker(self, broker_id: int) -> BrokerRow | None:
        return next((b for b in self.brokers if b.broker_id == broker_id), None)

    @property
    def offline_count(self) -> int:
        return sum(1 for p in self.partitions if p.offline)

    @property
    def under_replicated_count(self) -> int:
        return sum(1 for p in self.partitions if p.under_replicated)


def partition_rows(
    assignments: Mapping[str, TopicAssignment],
    states: Mapping[TopicPartition, LeadershipInfo],
    sizes: Mapping[int, Mapping[TopicPartition, int]],
    alive: set[int],
) -> list[PartitionRow]:
    """Every partition with its state; `sizes` is each broker's replica sizes."""
    rows = []
    for topic in sorted(assignments):
        for partition, assignment in sorted(assignments[topic].partitions.items()):
            tp = TopicPartition(topic, partition)
            state = states.get(tp)
            leader = state.leader_and_isr.leader if state else NO_LEADER
            on_leader = sizes.get(leader, {}).get(tp)
            largest = max((sizes.get(b, {}).get(tp, 0) for b in assignment.replicas), default=0)
            rows.append(
                PartitionRow(
                    topic=topic,
                    partition=partition,
                    replicas=assignment.replicas,
                    leader=leader,
                    leader_epoch=state.leader_and_isr.leader_epoch if state else -1,
                    isr=state.leader_and_isr.isr if state else (),
                    adding=assignment.adding,
                    removing=assignment.removing,
                    size=on_leader if on_leader is not None else largest,
                    offline=leader == NO_LEADER or leader not in alive,
                )
            )
    return rows


def broker_rows(
    registered: list[RegisteredBroker],
    seen: Mapping[int, RegisteredBroker],
    partitions: list[PartitionRow],
    sizes: Mapping[int, Mapping[TopicPartition, int]],
    protocol: str,
) -> list[BrokerRow]:
    """Every broker registered now, seen registered before (`seen`) or named by a replica
    list, with its counts; its address is its endpoint of the console's `protocol`."""
    live = {b.info.broker_id: b for b in registered}
    named = {r for p in partitions for r in p.replicas}
    rows = []
    for broker_id in sorted(set(live) | set(seen) | named):
        known = live.get(broker_id) or seen.get(broker_id)
        info: BrokerInfo | None = known.info if known else None
        endpoint = None
        if info is not None:
            endpoint = next((e for e in info.endpoints if e.security_protocol == protocol), None)
            endpoint = endpoint or (info.endpoints[0] if info.endpoints else None)
        rows.append(
            BrokerRow(
                broker_id=broker_id,
                rack=info.rack if info else None,
                address=endpoint.address if endpoint else None,
                alive=broker_id in live,
                broker_epoch=known.broker_epoch if known else None,
                partitions=sum(1 for p in partitions if broker_id in p.replicas),
                leaders=sum(1 for p in partitions if p.leader == broker_id),
                bytes=sum(sizes.get(broker_id, {}).values()),
            )
        )
    return rows
