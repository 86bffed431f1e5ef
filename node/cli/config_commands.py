"""`keel configs`, as Kafka's kafka-configs.sh with --bootstrap-server: describe and alter the
dynamic configs of topics and brokers over the wire (DescribeConfigs, IncrementalAlterConfigs;
which configs a broker takes is actors/admin/config_admin.py's).

    keel configs --describe --entity-type topics [--entity-name T] [--all]
    keel configs --describe --entity-type brokers [--entity-name 1 | --entity-default] [--all]
    keel configs --alter --entity-type topics --entity-name T \\
        --add-config 'retention.ms=1000,leader.replication.throttled.replicas=[0:1,1:2]' \\
        --delete-config max.message.bytes

The output is Kafka's: `Dynamic configs for topic T are:` (`All configs ...` with --all,
`Default configs for brokers in the cluster are:`), then per config
`  key=value sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:key=value}`, and
`Completed updating config for topic T.` after an alter. A broker's configs are asked of that
broker, as Kafka's tool does: only it knows its own server.properties (--all).
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from node.clients.admin import KeelAdminClient
from node.command.entry import CommandError, UsageError
from node.command.output import print_json
from wire.api import (
    AlterableConfig,
    AlterConfigsResource,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
)
from wire.api.describe_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)
from wire.api.incremental_alter_configs import BROKER_RESOURCE, DELETE_CONFIG, SET_CONFIG, TOPIC_RESOURCE
from wire.errors import ErrorCode

GROUP = "configs"
TOPICS = "topics"
BROKERS = "brokers"

# Kafka's ConfigEntry.ConfigSource names.
SOURCE_NAMES = {
    DYNAMIC_TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    DEFAULT_CONFIG: "DEFAULT_CONFIG",
}

# kafka-configs' --add-config: items split on the commas outside brackets, each split on the
# `=` outside brackets, brackets then dropped from the value ('k=[a,b]' sets k to 'a,b').
ITEM_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")
_KEY_VALUE_SPLIT = re.compile(r"\s*=\s*(?=[^\]]*(?:\[|$))")
# Kafka's check of a config key.
_KEY = re.compile(r"[a-zA-Z0-9._-]+")


def add_arguments(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    configs = groups.add_parser(
        GROUP, parents=[common], help="describe or alter topic and broker configs (Kafka's kafka-configs)"
    )
    action = configs.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list the configs of the entity")
    action.add_argument("--alter", action="store_true", help="set or delete configs of the entity")
    configs.add_argument("--entity-type", required=True, choices=[TOPICS, BROKERS])
    entity = configs.add_mutually_exclusive_group()
    entity.add_argument("--entity-name", default=None, help="a topic name or a broker id")
    entity.add_argument(
        "--entity-default", action="store_true", help="the cluster-wide default of every broker"
    )
    configs.add_argument(
        "--add-config",
        default=None,
        metavar="K1=V1,K2=[V2,V3]",
        help="configs to set; brackets group a value holding commas",
    )
    configs.add_argument("--delete-config", default=None, metavar="K1,K2", help="configs to remove")
    configs.add_argument(
        "--all",
        action="store_true",
        help="with --describe: every config with its source, not only dynamic ones",
    )


# --- parsing ---


def split_items(text: str) -> list[str]:
    """kafka-configs' items: `text` split on the commas that are not inside brackets."""
    return ITEM_SPLIT.split(text)


def parse_add_config(text: str) -> dict[str, str]:
    """`--add-config 'k1=v1,k2=[v2,v3]'` as Kafka's tool reads it: {k1: v1, k2: 'v2,v3'}."""
    configs = {}
    for item in split_items(text):
        parts = _KEY_VALUE_SPLIT.split(item)
        if len(parts) != 2:
            raise UsageError(
                f"--add-config: invalid entity config {item!r}: "
                'all configs to be added must be in the format "key=val"'
            )
        key = parts[0].strip()
        if not _KEY.fullmatch(key):
            raise UsageError(f"--add-config: invalid character found for config key: {key!r}")
        configs[key] = parts[1].replace("[", "").replace("]", "").strip()
    return configs


def parse_delete_config(text: str) -> list[str]:
    keys = [key.strip() for key in text.split(",") if key.strip()]
    if not keys:
        raise UsageError("--delete-config names no config")
    return keys


@dataclasses.dataclass(frozen=True)
class Entity:
    """A topic, a broker, or the brokers' cluster-wide default (name "")."""

    entity_type: str
    name: str

    @property
    def resource_type(self) -> int:
        return TOPIC_RESOURCE if self.entity_type == TOPICS else BROKER_RESOURCE

    @property
    def dynamic_source(self) -> int:
        if self.entity_type == TOPICS:
            return DYNAMIC_TOPIC_CONFIG
        return DYNAMIC_BROKER_CONFIG if self.name else DYNAMIC_DEFAULT_BROKER_CONFIG

    @property
    def label(self) -> str:
        return (
            f"{self.entity_type.removesuffix('s')} {self.name}"
            if self.name
            else f"default {self.entity_type}"
        )


def checked_request(args: argparse.Namespace) -> tuple[Entity | None, dict[str, str], list[str]]:
    """The entity named (None: every one of its type, for --describe), the configs to set and
    those to delete, as Kafka's tool checks them; UsageError before anything is sent."""
    added = parse_add_config(args.add_config) if args.add_config is not None else {}
    deleted = parse_delete_config(args.delete_config) if args.delete_config is not None else []
    if args.describe and (args.add_config is not None or args.delete_config is not None):
        raise UsageError("--add-config and --delete-config go with --alter, not --describe")
    if args.alter and args.all:
        raise UsageError("--all goes with --describe")
    if args.alter and not (added or deleted):
        raise UsageError("--alter needs --add-config or --delete-config")
    both = sorted(set(added) & set(deleted))
    if both:
        raise UsageError(f"{', '.join(both)} is both added and deleted")
    if args.entity_default:
        if args.entity_type != BROKERS:
            raise UsageError(f"--entity-default is for brokers, not {args.entity_type}")
        return Entity(BROKERS, ""), added, deleted
    if args.entity_name is None:
        if args.alter:
            raise UsageError(
                "--alter needs --entity-name"
                + (" or --entity-default" if args.entity_type == BROKERS else "")
            )
        return None, added, deleted
    if args.entity_type == BROKERS and not args.entity_name.isdigit():
        raise UsageError(
            f"the entity name for brokers must be a valid integer broker id, but it is: {args.entity_name}"
        )
    return Entity(args.entity_type, args.entity_name), added, deleted


# --- output ---


def source_name(source: int) -> str:
    return SOURCE_NAMES.get(source, "UNKNOWN")


def synonyms(
    entry: DescribeConfigsResourceResult, defaults: dict[str, DescribeConfigsResourceResult]
) -> list[tuple[str, str, str | None]]:
    """(source, name, value) of where `entry`'s value comes from, first the one in force, as
    Kafka lists them: a broker's own value is followed by the cluster default it overrides.
    (Keel's brokers do not name the static and default values an override hides.)"""
    found = [(source_name(entry.config_source), entry.name, entry.value)]
    default = defaults.get(entry.name)
    if entry.config_source == DYNAMIC_BROKER_CONFIG and default is not None:
        found.append((source_name(DYNAMIC_DEFAULT_BROKER_CONFIG), default.name, default.value))
    return found


def _value(value: str | None) -> str:
    return "null" if value is None else value


def shown_entries(
    entity: Entity, result: DescribeConfigsResult, *, describe_all: bool
) -> list[DescribeConfigsResourceResult]:
    """The configs Kafka's tool lists: with --all every one, else those set on the entity itself."""
    entries = sorted(result.configs, key=lambda e: e.name)
    return entries if describe_all else [e for e in entries if e.config_source == entity.dynamic_source]


def describe_lines(
    entity: Entity,
    result: DescribeConfigsResult,
    defaults: dict[str, DescribeConfigsResourceResult],
    *,
    describe_all: bool,
) -> list[str]:
    if not entity.name:
        lines = [f"Default configs for {entity.entity_type} in the cluster are:"]
    else:
        lines = [f"{'All' if describe_all else 'Dynamic'} configs for {entity.label} are:"]
    for entry in shown_entries(entity, result, describe_all=describe_all):
        said = ", ".join(f"{s}:{n}={_value(v)}" for s, n, v in synonyms(entry, defaults))
        sensitive = "true" if entry.is_sensitive else "false"
        lines.append(f"  {entry.name}={_value(entry.value)} sensitive={sensitive} synonyms={{{said}}}")
    return lines


def _as_json(
    entity: Entity,
    result: DescribeConfigsResult,
    defaults: dict[str, DescribeConfigsResourceResult],
    *,
    describe_all: bool,
) -> dict[str, object]:
    return {
        "entity_type": entity.entity_type,
        "entity_name": entity.name or None,
        "configs": [
            {
                "name": e.name,
                "value": e.value,
                "source": source_name(e.config_source),
                "sensitive": e.is_sensitive,
                "synonyms": [{"source": s, "name": n, "value": v} for s, n, v in synonyms(e, defaults)],
            }
            for e in shown_entries(entity, result, describe_all=describe_all)
        ],
    }


# --- talking to the brokers ---


def _failed(what: str, code: int, message: str | None) -> CommandError:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return CommandError(f"{what}: {name}: {message or name}")


async def _describe_one(
    admin: KeelAdminClient, entity: Entity
) -> tuple[DescribeConfigsResult, DescribeConfigsResult | None]:
    """The entity's configs and, for a broker, the cluster default's beside them; a broker's
    own are asked of that broker when it is live (its static configs are known only there)."""
    resources = [DescribeConfigsResource(resource_type=entity.resource_type, resource_name=entity.name)]
    if entity.entity_type == BROKERS and entity.name:
        resources.append(DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name=""))
        cluster = await admin.describe_cluster()
        at = next((b for b in cluster.brokers if str(b.broker_id) == entity.name), None)
        if at is not None:
            async with KeelAdminClient(
                f"{at.host}:{at.port}", timeout=admin.timeout, security=admin.security
            ) as own:
                results = (await own.describe_configs(resources)).results
        else:
            results = (await admin.describe_configs(resources)).results
    else:
        results = (await admin.describe_configs(resources)).results
    for result in results:
        if result.error_code != ErrorCode.NONE:
            raise _failed(
                f"cannot describe the configs of {entity.label}", result.error_code, result.error_message
            )
    return results[0], results[1] if len(results) > 1 else None


async def _entities(admin: KeelAdminClient, entity_type: str) -> list[Entity]:
    """Every entity of the type, as Kafka's tool lists them without --entity-name."""
    if entity_type == TOPICS:
        names = sorted(t.name for t in (await admin.metadata(None)).topics)
        return [Entity(TOPICS, name) for name in names]
    ids = sorted(b.broker_id for b in (await admin.describe_cluster()).brokers)
    return [*(Entity(BROKERS, str(i)) for i in ids), Entity(BROKERS, "")]


async def describe(admin: KeelAdminClient, args: argparse.Namespace, entity: Entity | None) -> int:
    shown = []
    for each in [entity] if entity is not None else await _entities(admin, args.entity_type):
        result, default = await _describe_one(admin, each)
        defaults = (
            {e.name: e for e in default.configs if e.config_source == DYNAMIC_DEFAULT_BROKER_CONFIG}
            if default
            else {}
        )
        if args.format == "json":
            shown.append(_as_json(each, result, defaults, describe_all=args.all))
        else:
            print("\n".join(describe_lines(each, result, defaults, describe_all=args.all)))
    if args.format == "json":
        print_json(shown)
    return 0


async def alter(
    admin: KeelAdminClient,
    args: argparse.Namespace,
    entity: Entity,
    added: dict[str, str],
    deleted: list[str],
) -> int:
    if deleted:
        # As Kafka's tool: deleting a config the entity does not set is refused, and nothing changes.
        current, _ = await _describe_one(admin, entity)
        have = {e.name for e in shown_entries(entity, current, describe_all=False)}
        missing = [key for key in deleted if key not in have]
        if missing:
            raise CommandError(f"Invalid config(s): {','.join(missing)} (not set on {entity.label})")
    operations = [AlterableConfig(name=k, config_operation=SET_CONFIG, value=v) for k, v in added.items()]
    operations += [AlterableConfig(name=k, config_operation=DELETE_CONFIG) for k in deleted]
    resource = AlterConfigsResource(
        resource_type=entity.resource_type, resource_name=entity.name, configs=operations
    )
    (answer,) = (await admin.incremental_alter_configs([resource])).responses
    if answer.error_code != ErrorCode.NONE:
        raise _failed(f"cannot alter the configs of {entity.label}", answer.error_code, answer.error_message)
    if args.format == "json":
        print_json(
            {
                "entity_type": entity.entity_type,
                "entity_name": entity.name or None,
                "set": added,
                "deleted": deleted,
            }
        )
    elif entity.name:
        print(f"Completed updating config for {entity.label}.")
    else:
        print(f"Completed updating default config for {entity.entity_type} in the cluster.")
    return 0


async def run(
    admin: KeelAdminClient, args: argparse.Namespace, checked: tuple[Entity | None, dict[str, str], list[str]]
) -> int:
    entity, added, deleted = checked
    if args.describe:
        return await describe(admin, args, entity)
    assert entity is not None, "checked_request names the entity of an alter"
    return await alter(admin, args, entity, added, deleted)
