"""AlterPartition (56): a partition leader asks the controller to change its ISR.

Top level: NOT_CONTROLLER (41) from a broker that is not the active controller;
STALE_BROKER_EPOCH (77) for an unknown broker or a broker epoch other than the registered
one. Per partition, in the controller's order of checks: UNKNOWN_TOPIC_OR_PARTITION (3),
NOT_CONTROLLER (41) for epochs newer than the controller knows, FENCED_LEADER_EPOCH (74),
INVALID_REQUEST (42) from a broker that is not the partition's leader,
INVALID_UPDATE_VERSION (95), INELIGIBLE_REPLICA (107) for a proposed ISR member that is not
live, or whose broker epoch is not the one it is registered with (KIP-903: each member is named
with the broker epoch its fetches carried, so a replica's previous incarnation never vouches
for the next one). A success carries the state as written, with its new partition epoch.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class BrokerState(Struct):
    """An ISR member and its broker epoch; -1 when the leader has not seen it fetch yet
    (allowed only for a member the current ISR already holds)."""

    broker_id: int
    broker_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionItem(Struct):
    partition_index: int
    leader_epoch: int
    new_isr_with_epochs: list[BrokerState]
    partition_epoch: int

    @property
    def new_isr(self) -> list[int]:
        return [member.broker_id for member in self.new_isr_with_epochs]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionTopic(Struct):
    topic_name: str
    partitions: list[AlterPartitionItem] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionRequest(Request):
    API_KEY = ApiKey.ALTER_PARTITION

    broker_id: int
    broker_epoch: int
    topics: list[AlterPartitionTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionResult(Struct):
    partition_index: int
    error_code: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = dataclasses.field(default_factory=list)
    partition_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionTopicResult(Struct):
    topic_name: str
    partitions: list[AlterPartitionResult] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionResponse(Response):
    topics: list[AlterPartitionTopicResult] = dataclasses.field(default_factory=list)
