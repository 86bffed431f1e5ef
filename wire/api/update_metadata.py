"""UpdateMetadata (6): the controller publishes live brokers and partition states to a broker's
metadata cache, which answers Metadata.

Top-level errors: STALE_BROKER_EPOCH (77), STALE_CONTROLLER_EPOCH (11). Partition states are
merged into the cache; a `leader` of -2 removes the partition (its topic is being deleted).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.endpoint import Endpoint
from wire.schema import Struct

# The leader UpdateMetadata gives a partition of a topic queued for deletion (Kafka's
# LeaderAndIsr.LeaderDuringDelete): the receiving broker removes the partition.
LEADER_DURING_DELETE = -2


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpdateMetadataPartitionState(Struct):
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    offline_replicas: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiveBroker(Struct):
    broker_id: int
    endpoints: list[Endpoint]
    rack: str | None = None
    # The epoch of the registration the controller knows (KIP-903): a leader lets a follower
    # into the ISR only on fetches of that incarnation.
    broker_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpdateMetadataRequest(Request):
    API_KEY = ApiKey.UPDATE_METADATA

    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partition_states: list[UpdateMetadataPartitionState] = dataclasses.field(default_factory=list)
    live_brokers: list[LiveBroker] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpdateMetadataResponse(Response):
    pass
