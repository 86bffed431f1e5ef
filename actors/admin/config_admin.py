"""Dynamic config decisions without I/O, as Kafka's ZK-mode admin path makes them for
IncrementalAlterConfigs and DescribeConfigs: which znode a resource names, what the config
becomes after a request's set and delete operations, whether the new values are valid, and
what DescribeConfigs shows.

Topic configs live in `/config/topics/<T>`, broker configs in `/config/brokers/<id>` and the
cluster-wide defaults in `/config/brokers/<default>`. Keel's dynamic broker configs are the
replication throttle rates; topic configs are those of `actors.admin.topic_admin`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from actors.admin.throttle_configs import FOLLOWER_RATE, LEADER_RATE, parse_rate
from actors.admin.topic_admin import TopicError, validate_configs
from wire.api import AlterableConfig
from wire.api.describe_configs import (
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
)
from wire.api.incremental_alter_configs import (
    APPEND_CONFIG,
    BROKER_RESOURCE,
    DELETE_CONFIG,
    SET_CONFIG,
    SUBTRACT_CONFIG,
    TOPIC_RESOURCE,
)
from wire.errors import ErrorCode

TOPICS = "topics"
BROKERS = "brokers"
# `/config/users/<name>`: SCRAM credentials (actors.security.credential_cache) and client quotas.
USERS = "users"
DEFAULT_ENTITY = "<default>"

# Broker configs that can change without a restart, with their checks.
BROKER_DYNAMIC_CONFIGS: dict[str, Callable[[str], int]] = {
    LEADER_RATE: parse_rate,
    FOLLOWER_RATE: parse_rate,
}


class ConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_for(resource_type: int, resource_name: str) -> tuple[str, str]:
    """(entity type, entity name) of a resource: its znode is `/config/<type>/<name>`."""
    if resource_type == TOPIC_RESOURCE:
        if not resource_name:
            raise ConfigError(ErrorCode.INVALID_REQUEST, "a topic resource needs a topic name")
        return TOPICS, resource_name
    if resource_type == BROKER_RESOURCE:
        if resource_name in ("", DEFAULT_ENTITY):
            return BROKERS, DEFAULT_ENTITY
        if not resource_name.isdigit():
            raise ConfigError(
                ErrorCode.INVALID_REQUEST, f"broker resource name {resource_name!r} is not a broker id"
            )
        return BROKERS, str(int(resource_name))
    raise ConfigError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource_type}")


def validate_broker_configs(configs: Mapping[str, str]) -> None:
    for key, value in configs.items():
        check = BROKER_DYNAMIC_CONFIGS.get(key)
        if check is None:
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"{key} is not a dynamic broker config")
        try:
            check(value)
        except ValueError as e:
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {key}: {e}") from None


# The configs whose value is a list, and the default an APPEND or SUBTRACT starts from when
# the resource does not set them (KIP-339).
LIST_CONFIGS = {
    "cleanup.policy": "delete",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
}


def _list_operation(op: AlterableConfig, current: str | None) -> str:
    """KIP-339's APPEND (items added, those there already kept once) and SUBTRACT (items
    removed) on a list config; INVALID_CONFIG on any other."""
    if op.name not in LIST_CONFIGS:
        raise ConfigError(ErrorCode.INVALID_CONFIG, f"{op.name} is not a list: only SET and DELETE apply")
    if op.value is None:
        raise ConfigError(ErrorCode.INVALID_CONFIG, f"no value to append to or subtract from {op.name}")
    items = [i for i in (LIST_CONFIGS[op.name] if current is None else current).split(",") if i]
    given = [i.strip() for i in op.value.split(",") if i.strip()]
    if op.config_operation == APPEND_CONFIG:
        items += [i for i in given if i not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


def apply_operations(
    entity_type: str, current: Mapping[str, str], operations: Sequence[AlterableConfig]
) -> dict[str, str]:
    """The config after the operations; raises ConfigError and then nothing applies."""
    names = [op.name for op in operations]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(ErrorCode.INVALID_REQUEST, f"config {repeated[0]} is named twice")
    updated = dict(current)
    changed = {}
    for op in operations:
        if op.config_operation == SET_CONFIG:
            if op.value is None:
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"no value to set for {op.name}")
            updated[op.name] = changed[op.name] = op.value
        elif op.config_operation == DELETE_CONFIG:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND_CONFIG, SUBTRACT_CONFIG):
            updated[op.name] = changed[op.name] = _list_operation(op, updated.get(op.name))
        else:
            raise ConfigError(
                ErrorCode.INVALID_REQUEST, f"unsupported config operation {op.config_operation} for {op.name}"
            )
    if entity_type == TOPICS:
        try:
            validate_configs(changed)
        except TopicError as e:
            raise ConfigError(e.code, e.message) from None
    else:
        validate_broker_configs(changed)
    return updated


def effective_broker_configs(
    own: Mapping[str, str], defaults: Mapping[str, str]
) -> dict[str, tuple[str, int]]:
    """A broker's dynamic configs with their source: its own, else the cluster default."""
    shown = {key: (value, DYNAMIC_DEFAULT_BROKER_CONFIG) for key, value in defaults.items()}
    shown.update({key: (value, DYNAMIC_BROKER_CONFIG) for key, value in own.items()})
    return shown


def topic_config_sources(config: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    return {key: (value, DYNAMIC_TOPIC_CONFIG) for key, value in config.items()}


def throttle_rates(own: Mapping[str, str], defaults: Mapping[str, str]) -> tuple[int | None, int | None]:
    """The (leader, follower) throttle rates a broker applies: its own value, else the
    cluster-wide default, else unlimited (None). Unreadable values count as unset."""

    def rate(key: str) -> int | None:
        for source in (own, defaults):
            if key in source:
                try:
                    return parse_rate(source[key])
                except ValueError:
                    return None
        return None

    return rate(LEADER_RATE), rate(FOLLOWER_RATE)
