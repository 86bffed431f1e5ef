"""IncrementalAlterConfigs and DescribeConfigs on any broker (Kafka's ZkAdminManager and
AdminZkClient for configs): decide with `actors.admin.config_admin`, then write the config znode
and its change notification in one multi-op. Every broker, this one included, applies the
change when its watch on `/config/changes` fires (`node.broker.dynamic_config`)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable, Mapping

from actors.admin.config_admin import (
    BROKERS,
    DEFAULT_ENTITY,
    TOPICS,
    ConfigError,
    apply_operations,
    effective_broker_configs,
    entity_for,
    topic_config_sources,
)
from node.zk.config_store import ZkConfigStore
from wire.api import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

# Read-modify-write attempts when another admin writes the same config at the same time.
_ATTEMPTS = 5


# What DescribeConfigs shows beside the dynamic configs: per key, the value and its source.
Described = Mapping[str, tuple[str | None, int]]


def is_sensitive(key: str) -> bool:
    """Kafka's PASSWORD-type configs and their kin: their values are never described."""
    return "password" in key or key.endswith((".jaas.config", ".key")) or key == "sasl.jaas.config"


# Kafka's ConfigType of the configs whose type their value does not tell.
_INT, _DOUBLE, _LIST = 3, 6, 7
_KAFKA_TYPES = {
    **dict.fromkeys(("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"), _DOUBLE),
    **dict.fromkeys(
        ("min.insync.replicas", "max.message.bytes", "segment.bytes", "message.max.bytes", "broker.id"), _INT
    ),
    **dict.fromkeys(
        (
            "cleanup.policy",
            "log.cleanup.policy",
            "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas",
            "listeners",
            "advertised.listeners",
            "kafka.listeners",
            "kafka.advertised.listeners",
            "log.dirs",
            "sasl.enabled.mechanisms",
        ),
        _LIST,
    ),
}


def config_type(key: str, value: str | None) -> int:
    """Kafka's ConfigType of a config: from the table above, else told by its value (a
    boolean, a number as LONG, else STRING)."""
    if is_sensitive(key):
        return 9  # PASSWORD
    if key in _KAFKA_TYPES:
        return _KAFKA_TYPES[key]
    if value in ("true", "false"):
        return 1
    if value is not None and value.lstrip("-").isdigit():
        return 5
    return 2


class ConfigAdmin:
    def __init__(
        self,
        configs: ZkConfigStore,
        topics: Callable[[], Awaitable[set[str]]],
        *,
        broker_id: int | None = None,
        static_broker: Described | None = None,
        topic_defaults: Described | None = None,
    ) -> None:
        """`static_broker`: this broker's `server.properties` settings and defaults, shown
        when it is the broker described; `topic_defaults`: what each topic config falls back
        to when the topic does not set it."""
        self._broker_id = broker_id
        self._static_broker = static_broker or {}
        self._topic_defaults = topic_defaults or {}
        """`topics` names the topics that exist (a topic's config is changed only then)."""
        self._configs = configs
        self._topics = topics

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        counts = collections.Counter((r.resource_type, r.resource_name) for r in request.resources)
        responses = []
        for resource in request.resources:
            answer = AlterConfigsResourceResponse(
                resource_type=resource.resource_type, resource_name=resource.resource_name
            )
            try:
                if counts[resource.resource_type, resource.resource_name] > 1:
                    raise ConfigError(ErrorCode.INVALID_REQUEST, "the resource is named twice in the request")
                await self._alter(
                    resource,
                    validate_only=request.validate_only,
                    replace=isinstance(request, AlterConfigsRequest),
                )
            except ConfigError as e:
                log.info(
                    "refused a config change of %s: %s %s", resource.resource_name, e.code.name, e.message
                )
                answer = AlterConfigsResourceResponse(
                    error_code=e.code,
                    error_message=e.message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            responses.append(answer)
        return IncrementalAlterConfigsResponse(responses=responses)

    async def _alter(self, resource: AlterConfigsResource, *, validate_only: bool, replace: bool) -> None:
        entity_type, name = entity_for(resource.resource_type, resource.resource_name)
        if entity_type == TOPICS and name not in await self._topics():
            raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
        for _ in range(_ATTEMPTS):
            current, version = await self._configs.entity_config(entity_type, name)
            # AlterConfigs (33) replaces the resource's configs with those it names.
            updated = apply_operations(entity_type, {} if replace else current, resource.configs)
            if validate_only or updated == current:
                return
            if await self._configs.change_entity_config(entity_type, name, updated, version):
                log.info("config of %s/%s is now %s", entity_type, name, updated)
                return
        raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{entity_type}/{name} kept changing; try again")

    async def describe_configs(self, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        results = []
        for resource in request.resources:
            try:
                shown = await self._describe(resource)
            except ConfigError as e:
                results.append(
                    DescribeConfigsResult(
                        error_code=e.code,
                        error_message=e.message,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
                continue
            keys = resource.configuration_keys
            results.append(
                DescribeConfigsResult(
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[
                        DescribeConfigsResourceResult(
                            name=key,
                            value=None if is_sensitive(key) else value,
                            config_source=source,
                            is_sensitive=is_sensitive(key),
                            config_type=config_type(key, value),
                        )
                        for key, (value, source) in sorted(shown.items())
                        if keys is None or key in keys
                    ],
                )
            )
        return DescribeConfigsResponse(results=results)

    async def _describe(self, resource: DescribeConfigsResource) -> dict[str, tuple[str | None, int]]:
        entity_type, name = entity_for(resource.resource_type, resource.resource_name)
        if entity_type == TOPICS:
            if name not in await self._topics():
                raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
            config, _ = await self._configs.entity_config(TOPICS, name)
            return {**self._topic_defaults, **topic_config_sources(config)}
        defaults, _ = await self._configs.entity_config(BROKERS, DEFAULT_ENTITY)
        own: dict[str, str] = {}
        if name != DEFAULT_ENTITY:
            own, _ = await self._configs.entity_config(BROKERS, name)
        static = self._static_broker if name == str(self._broker_id) else {}
        return {**static, **effective_broker_configs(own, defaults)}
