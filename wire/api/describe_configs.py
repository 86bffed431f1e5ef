"""DescribeConfigs (32): the configs of topics and brokers, each with where its value comes from.

`resource_type` 2 topic, 4 broker (name: the id, or "" for the cluster-wide default);
`configuration_keys` None for every key. `config_source` (Kafka's numbers): 1
DYNAMIC_TOPIC_CONFIG, 2 DYNAMIC_BROKER_CONFIG, 3 DYNAMIC_DEFAULT_BROKER_CONFIG, 4
STATIC_BROKER_CONFIG (`server.properties`), 5 DEFAULT_CONFIG. A topic's answer lists every
topic config: its own value, else the broker's setting it falls back to, else Kafka's default.
A broker's answer includes the cluster-wide defaults it does not override, and, when the
broker asked is the one described, its static settings and defaults too (as Kafka, only a
broker knows its own `server.properties`). A sensitive value (a password, a JAAS config, a
key) is never sent: its value is null and `is_sensitive` true.

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
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


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
    # Kafka's ConfigType: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 7 LIST, 9 PASSWORD (0 unknown).
    config_type: int = 0


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
