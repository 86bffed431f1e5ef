"""What a broker holds for one partition it hosts (Kafka's Partition), as set by LeaderAndIsr.

Fetchers and the high watermark arrive with the replicated log.
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from actors.ports import TopicPartition

__all__ = ["Partition", "Role", "TopicPartition"]


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclasses.dataclass(slots=True)
class Partition:
    tp: TopicPartition
    role: Role
    leader: int
    leader_epoch: int
    # Kept as the controller sent it; only the leader maintains the ISR.
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0
