"""StopReplica (5): stop (and with `delete_partition`, delete) replicas on a broker.

Top-level errors: STALE_BROKER_EPOCH (77), STALE_CONTROLLER_EPOCH (11). Per partition:
FENCED_LEADER_EPOCH (74) when `leader_epoch` is below the one held; -1 (unknown) and -2
(topic being deleted) always pass, as in Kafka.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.api.leader_and_isr import PartitionError
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class StopReplicaPartition(Struct):
    topic: str
    partition: int
    leader_epoch: int = -1
    delete_partition: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class StopReplicaRequest(Request):
    API_KEY = ApiKey.STOP_REPLICA

    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partitions: list[StopReplicaPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StopReplicaResponse(Response):
    partition_errors: list[PartitionError] = dataclasses.field(default_factory=list)
