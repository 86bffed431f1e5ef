"""ControlledShutdown (7): a broker about to stop asks the controller to move its leaders away.

Any broker accepts it and hands it to its controller module; only the active controller acts.
Top-level errors: STALE_CONTROLLER_EPOCH (11) from a broker that is not the active controller
(or whose controller moved while the request waited), STALE_BROKER_EPOCH (77) for a broker
epoch below the registered one, BROKER_NOT_AVAILABLE (8) for a broker that is not registered.
`remaining_partitions` lists the partitions the broker still leads (replication factor > 1):
the broker is done when the answer is NONE and the list is empty.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlledShutdownRequest(Request):
    API_KEY = ApiKey.CONTROLLED_SHUTDOWN

    broker_id: int
    # -1 skips the broker-epoch check (Kafka's requests before version 2).
    broker_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemainingPartition(Struct):
    topic_name: str
    partition_index: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlledShutdownResponse(Response):
    remaining_partitions: list[RemainingPartition] = dataclasses.field(default_factory=list)
