"""The change notification listener and the dynamic config manager on stand-ins for
ZooKeeper: a notification counts as seen only once its handler succeeded, and each one reaches
the handler of the entity type it names with that entity's current config (the real
ZooKeeper path: tests/integration/test_zookeeper_security.py)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from actors.security.credential_cache import CredentialCache
from node.broker.dynamic_config import TopicConfigHandler
from node.zk.change_listener import ChangeNotificationListener
from node.zk.dynamic_config import DynamicConfigManager, UserConfigHandler
from node.zk.paths import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES, sanitize
from node.zk.scram_users import new_credential
from tests.scram import authenticates
from tests.support import ManualClock

SHA512 = "SCRAM-SHA-512"


def notification(entity_path: str) -> bytes:
    return orjson.dumps({"version": 2, "entity_path": entity_path})


class _ZooKeeper:
    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self._sequence = 0

    def notify(self, entity_path: str) -> None:
        self._sequence += 1
        self.nodes[f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}{self._sequence:010d}"] = notification(
            entity_path
        )

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        return [p.rpartition("/")[2] for p in self.nodes if p.rpartition("/")[0] == path]

    async def watch_children(self, path: str, handler: object = None) -> list[str]:
        return await self.children(path, watch=True)

    async def get_or_none(self, path: str) -> tuple[bytes, Any] | None:
        value = self.nodes.get(path)
        return None if value is None else (value, types.SimpleNamespace(created=10**13))

    async def delete(self, path: str) -> None:
        del self.nodes[path]


class _Store:
    def __init__(self, zk: _ZooKeeper) -> None:
        self.zk = zk
        self.configs: dict[str, dict[str, dict[str, str]]] = {"topics": {}, "users": {}}

    async def entity_config(self, entity_type: str, name: str) -> tuple[dict[str, str], int | None]:
        config = self.configs.get(entity_type, {}).get(name)
        return ({}, None) if config is None else (config, 0)

    async def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return dict(self.configs.get(entity_type, {}))


class _Handler:
    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.seen: list[dict[str, dict[str, str]]] = []

    async def process_config_changes(self, configs: Mapping[str, dict[str, str]]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("busy")
        self.seen.append(dict(configs))


def manager(store: _Store, handlers: Mapping[str, Any]) -> DynamicConfigManager:
    return DynamicConfigManager(store, handlers, ManualClock())  # type: ignore[arg-type]


async def test_a_notification_whose_handler_failed_is_handled_on_the_next_pass() -> None:
    zk, seen = _ZooKeeper(), []

    async def handler(raw: bytes | None) -> None:
        if not seen:
            seen.append(None)
            raise RuntimeError("busy")
        seen.append(raw)

    zk.notify("topics/t")
    listener = ChangeNotificationListener(zk, CONFIG_CHANGES, CONFIG_CHANGE_PREFIX, handler, ManualClock())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        await listener._process_new()
    await listener._process_new()
    await listener._process_new()
    assert seen == [None, notification("topics/t")], "handled again after the failure, then only once"


async def test_each_notification_reaches_its_entity_types_handler_with_the_current_config() -> None:
    zk = _ZooKeeper()
    store = _Store(zk)
    topics, users = _Handler(), _Handler()
    configs = manager(store, {"topics": topics, "users": users})
    store.configs["topics"]["t"] = {"leader.replication.throttled.replicas": "0:1"}
    zk.notify("topics/t")
    zk.notify("brokers/1")  # no handler for brokers here
    zk.notify("topics/gone")
    await configs._listener._process_new()
    assert topics.seen == [{"t": {"leader.replication.throttled.replicas": "0:1"}}, {"gone": {}}]
    assert users.seen == []


async def test_a_malformed_notification_is_skipped() -> None:
    zk = _ZooKeeper()
    topics = _Handler()
    configs = manager(_Store(zk), {"topics": topics})
    zk.nodes[f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}0000000001"] = b"{not json"
    zk.notify("topics/t")
    await configs._listener._process_new()
    assert topics.seen == [{"t": {}}]


async def test_users_follow_into_the_credential_cache_and_client_quotas_are_not_users() -> None:
    cache = CredentialCache()
    handler = UserConfigHandler(cache)
    await handler.process_config_changes(
        {
            sanitize("CN=a b"): {SHA512: new_credential(SHA512, "n").to_kafka()},
            "old": {SHA512: new_credential(SHA512, "o").to_kafka()},
            "old/clients/c": {SHA512: new_credential(SHA512, "x").to_kafka()},
        }
    )
    assert cache.users() == {"CN=a b", "old"}
    assert authenticates(cache.credential, SHA512, "CN=a b", "n")
    await handler.process_config_changes({"old": {}})
    assert cache.users() == {"CN=a b"}


async def test_topic_configs_go_to_the_replica_manager() -> None:
    applied: list[dict[str, Any]] = []

    class _ReplicaManager:
        async def set_throttles(self, **kwargs: Any) -> None:
            applied.append(kwargs)

    handler = TopicConfigHandler(_ReplicaManager())  # type: ignore[arg-type]
    await handler.process_config_changes({})
    await handler.process_config_changes({"t": {"retention.ms": "1"}})
    assert applied == [{"topic_configs": {"t": {"retention.ms": "1"}}}]
