"""The rows of `keel consumer-groups --describe`, as Kafka's ConsumerGroupCommand lays them
out: pure functions of what DescribeGroups, OffsetFetch and ListOffsets answered.

The default view has a row per partition: first the members' partitions (members with the
most partitions first, each member's partitions in order), then the partitions the group has
an offset for that no member holds (consumer "-"). LAG is the log-end offset minus the
committed offset, "-" without a commit. A member's partitions come from its
ConsumerProtocolAssignment, in groups of protocol type "consumer" only (another protocol's
bytes mean nothing here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from wire.api import DescribedGroup, DescribedGroupMember
from wire.consumer_protocol import ConsumerProtocolError, decode_assignment

TopicPartition = tuple[str, int]
CONSUMER_PROTOCOL = "consumer"
# The states of a classic group (Kafka's ConsumerGroupState), as ListGroups names them.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
REBALANCING = ("PreparingRebalance", "CompletingRebalance")

OFFSETS_HEADERS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
MEMBERS_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


@dataclasses.dataclass(frozen=True)
class PartitionRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset

    def cells(self) -> list[object]:
        return [
            self.group,
            self.topic,
            self.partition,
            self.current_offset,
            self.log_end_offset,
            self.lag,
            self.consumer_id,
            self.host,
            self.client_id,
        ]


def member_partitions(group: DescribedGroup, member: DescribedGroupMember) -> list[TopicPartition]:
    """The partitions a member of a consumer group holds, in order; none for a member of a
    group of another protocol, or whose assignment cannot be read."""
    if group.protocol_type != CONSUMER_PROTOCOL:
        return []
    try:
        return sorted(decode_assignment(member.member_assignment).partitions)
    except ConsumerProtocolError:
        return []


def offset_rows(
    group: DescribedGroup,
    committed: Mapping[TopicPartition, int],
    log_end: Mapping[TopicPartition, int],
) -> list[PartitionRow]:
    """Kafka's rows of `--describe` for one group (`log_end` may lack a partition: "-")."""
    held = [(m, member_partitions(group, m)) for m in group.members]
    held = sorted((pair for pair in held if pair[1]), key=lambda pair: -len(pair[1]))
    rows = []
    for member, partitions in held:
        for tp in partitions:
            rows.append(
                PartitionRow(
                    group.group_id,
                    *tp,
                    committed.get(tp),
                    log_end.get(tp),
                    member.member_id,
                    member.client_host,
                    member.client_id,
                )
            )
    assigned = {tp for _, partitions in held for tp in partitions}
    for tp in sorted(set(committed) - assigned):
        rows.append(PartitionRow(group.group_id, *tp, committed[tp], log_end.get(tp), None, None, None))
    return rows


def member_rows(group: DescribedGroup, *, with_assignment: bool) -> list[list[object]]:
    """`--describe --members`: a row per member, with its partitions as Kafka's `--verbose`
    prints them (`topic(0,1), other(2)`) when asked."""
    rows = []
    for member in group.members:
        partitions = member_partitions(group, member)
        row: list[object] = [
            group.group_id,
            member.member_id,
            member.client_host,
            member.client_id,
            len(partitions),
        ]
        if with_assignment:
            row.append(assignment_text(partitions))
        rows.append(row)
    return rows


def assignment_text(partitions: list[TopicPartition]) -> str:
    if not partitions:
        return "-"
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(grouped.items()))


def state_row(group: DescribedGroup, coordinator_id: int, host: str, port: int) -> list[object]:
    """`--describe --state`: the coordinator as Kafka prints it, `host:port  (id)`."""
    return [
        group.group_id,
        f"{host}:{port}  ({coordinator_id})",
        group.protocol_data,
        group.group_state,
        len(group.members),
    ]


def parse_states(text: str) -> list[str]:
    """`--state stable,empty`: Kafka's state names in any case; ValueError names the valid ones."""
    by_lower = {s.lower(): s for s in GROUP_STATES}
    wanted = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in wanted if s.lower() not in by_lower]
    if unknown:
        raise ValueError(f"Invalid state list '{text}'. Valid states are: {', '.join(GROUP_STATES)}")
    return [by_lower[s.lower()] for s in wanted]
