"""LeaderAndIsr (4): the controller tells a broker who leads each of its partitions.

Top-level errors: STALE_BROKER_EPOCH (77) when `broker_epoch` is older than the broker's own
(-1 skips the check); STALE_CONTROLLER_EPOCH (11) when `controller_epoch` is older than the
newest the broker has seen. Then per partition: FENCED_LEADER_EPOCH (74) when the leader
epoch is not greater than the one held; UNKNOWN_TOPIC_OR_PARTITION (3) when the broker is not
in `replicas`. INVALID_REQUEST for malformed entries (nothing is applied).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaderAndIsrPartitionState(Struct):
    topic: str
    partition: int
    # The epoch of the controller that last wrote this partition's state.
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    # The ZooKeeper data version of the partition's state znode.
    partition_epoch: int
    replicas: list[int]
    adding_replicas: list[int] = dataclasses.field(default_factory=list)
    removing_replicas: list[int] = dataclasses.field(default_factory=list)
    is_new: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiveLeader(Struct):
    broker_id: int
    host: str
    port: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaderAndIsrRequest(Request):
    API_KEY = ApiKey.LEADER_AND_ISR

    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partition_states: list[LeaderAndIsrPartitionState] = dataclasses.field(default_factory=list)
    live_leaders: list[LiveLeader] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PartitionError(Struct):
    topic: str
    partition: int
    error_code: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaderAndIsrResponse(Response):
    partition_errors: list[PartitionError] = dataclasses.field(default_factory=list)
