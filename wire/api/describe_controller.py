"""DescribeController (1001, Keel's own): the answering broker's controller module and its
metrics (Kafka's kafka.controller MBeans): ActiveControllerCount, OfflinePartitionsCount,
PreferredReplicaImbalanceCount, GlobalTopicCount, GlobalPartitionCount,
UncleanLeaderElections, LeaderElectionRateAndTimeMs.*, EventQueueSize, EventQueueTimeMs.*.
Gauges only the active controller knows read 0 on other brokers, as Kafka's do.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeControllerRequest(Request):
    API_KEY = ApiKey.DESCRIBE_CONTROLLER


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeControllerResponse(Response):
    broker_id: int = -1
    controller_id: int = -1
    controller_epoch: int = 0
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
