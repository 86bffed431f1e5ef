"""IncrementalAlterConfigs and DescribeConfigs on any broker (Kafka's ZkAdminManager and
AdminZkClient for configs): decide with `actors.admin.config_admin`, then write the config znode
and its change notification in one multi-op. Every broker, this one included, applies the
change when its watch on `/config/changes` fires (`node.broker.dynamic_config`)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable

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


class ConfigAdmin:
    def __init__(self, configs: ZkConfigStore, topics: Callable[[], Awaitable[set[str]]]) -> None:
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
                await self._alter(resource, validate_only=request.validate_only)
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

    async def _alter(self, resource: AlterConfigsResource, *, validate_only: bool) -> None:
        entity_type, name = entity_for(resource.resource_type, resource.resource_name)
        if entity_type == TOPICS and name not in await self._topics():
            raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
        for _ in range(_ATTEMPTS):
            current, version = await self._configs.entity_config(entity_type, name)
            updated = apply_operations(entity_type, current, resource.configs)
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
                        DescribeConfigsResourceResult(name=key, value=value, config_source=source)
                        for key, (value, source) in sorted(shown.items())
                        if keys is None or key in keys
                    ],
                )
            )
        return DescribeConfigsResponse(results=results)

    async def _describe(self, resource: DescribeConfigsResource) -> dict[str, tuple[str, int]]:
        entity_type, name = entity_for(resource.resource_type, resource.resource_name)
        if entity_type == TOPICS:
            if name not in await self._topics():
                raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
            config, _ = await self._configs.entity_config(TOPICS, name)
            return topic_config_sources(config)
        defaults, _ = await self._configs.entity_config(BROKERS, DEFAULT_ENTITY)
        own: dict[str, str] = {}
        if name != DEFAULT_ENTITY:
            own, _ = await self._configs.entity_config(BROKERS, name)
        return effective_broker_configs(own, defaults)
