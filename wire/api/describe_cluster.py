"""DescribeCluster (60): cluster id, brokers with endpoints and rack, controller id and epoch.

`controller_id` is -1 and `controller_epoch` 0 while the answering broker knows no controller.
Errors: none beyond the envelope's.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.endpoint import Endpoint
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeClusterRequest(Request):
    API_KEY = ApiKey.DESCRIBE_CLUSTER


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribedBroker(Struct):
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: list[Endpoint] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeClusterResponse(Response):
    cluster_id: str = ""
    controller_id: int = -1
    controller_epoch: int = 0
    brokers: list[DescribedBroker] = dataclasses.field(default_factory=list)
