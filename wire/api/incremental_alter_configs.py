"""IncrementalAlterConfigs (44): set or delete dynamic configs of topics and brokers (KIP-339).
Any broker answers: it writes `/config/<type>/<name>` and then a change notification
`/config/changes/config_change_<seq>`, which every broker watches and re-reads.

`resource_type`: 2 topic, 4 broker. A broker's `resource_name` is its id, or "" for the
cluster-wide default (`/config/brokers/<default>`). `config_operation`: 0 set, 1 delete, 2
append and 3 subtract (list configs).
`validate_only` checks everything and writes nothing.

Top level: none. Per resource: INVALID_REQUEST (42) for an unknown resource type or operation,
a broker name that is not an id, a config named twice, or a resource named twice;
UNKNOWN_TOPIC_OR_PARTITION (3) for a topic that does not exist; INVALID_CONFIG (40) for an
unknown config or a bad value (a negative rate, a malformed throttled-replicas list).
A resource that fails changes nothing; the others still apply.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
SET_CONFIG = 0
DELETE_CONFIG = 1
# KIP-339, list configs only: items added to or removed from the list.
APPEND_CONFIG = 2
SUBTRACT_CONFIG = 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterableConfig(Struct):
    name: str
    config_operation: int = SET_CONFIG
    value: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterConfigsResource(Struct):
    resource_type: int
    resource_name: str
    configs: list[AlterableConfig] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IncrementalAlterConfigsRequest(Request):
    API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS

    resources: list[AlterConfigsResource] = dataclasses.field(default_factory=list)
    validate_only: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterConfigsResourceResponse(Struct):
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class IncrementalAlterConfigsResponse(Response):
    responses: list[AlterConfigsResourceResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterConfigsRequest(IncrementalAlterConfigsRequest):
    """AlterConfigs (33), Kafka's older form: each resource's dynamic configs become exactly
    those named (every `config_operation` a set), the others deleted."""

    API_KEY = ApiKey.ALTER_CONFIGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterConfigsResponse(IncrementalAlterConfigsResponse):
    pass
