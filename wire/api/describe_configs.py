"""DescribeConfigs (32): the dynamic configs of topics and brokers, as ZooKeeper holds them.

Keel answers the dynamic values only (not the static `server.properties` ones nor defaults).
`resource_type` 2 topic, 4 broker (name: the id, or "" for the cluster-wide default);
`configuration_keys` None for every key. `config_source`: 1 DYNAMIC_TOPIC_CONFIG,
2 DYNAMIC_BROKER_CONFIG, 3 DYNAMIC_DEFAULT_BROKER_CONFIG (Kafka's numbers). A broker's answer
includes the cluster-wide defaults it does not override.

Per resource: INVALID_REQUEST (42) for an unknown resource type or a broker name that is not
an id; UNKNOWN_TOPIC_OR_PARTITION (3) for a topic that does not exist.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeConfigsResource(Struct):
    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeConfigsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_CONFIGS

    resources: list[DescribeConfigsResource] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeConfigsResourceResult(Struct):
    name: str
    value: str | None = None
    read_only: bool = False
    config_source: int = DYNAMIC_TOPIC_CONFIG
    is_sensitive: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeConfigsResult(Struct):
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    configs: list[DescribeConfigsResourceResult] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeConfigsResponse(Response):
    results: list[DescribeConfigsResult] = dataclasses.field(default_factory=list)
