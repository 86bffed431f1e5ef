"""The broker's dynamic config listener on a stand-in store: a notification counts as seen
only once what it names has been applied."""

from __future__ import annotations

from typing import Any

import pytest

from node.broker.dynamic_config import DynamicConfigManager
from node.zk.paths import CONFIG_CHANGE_PREFIX
from tests.support import ManualClock


class _Store:
    def __init__(self) -> None:
        self.changes = {f"{CONFIG_CHANGE_PREFIX}0000000001": "topics/t"}
        self.configs = {"t": {"leader.replication.throttled.replicas": "0:1"}}

    async def config_changes(self, *, watch: bool) -> list[str]:
        return sorted(self.changes)

    async def config_change(self, name: str) -> tuple[str | None, int] | None:
        return self.changes[name], 0

    async def entity_config(self, entity_type: str, name: str) -> tuple[dict[str, str], int]:
        return self.configs.get(name, {}), 0

    async def delete_config_change(self, name: str) -> None:
        del self.changes[name]


class _ReplicaManager:
    def __init__(self) -> None:
        self.failures = 1
        self.applied: list[dict[str, Any]] = []

    async def set_throttles(self, **kwargs: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("replica manager busy")
        self.applied.append(kwargs)


async def test_a_notification_whose_apply_failed_is_applied_on_the_next_pass() -> None:
    store, replica_manager = _Store(), _ReplicaManager()
    manager = DynamicConfigManager(1, store, replica_manager, ManualClock())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        await manager._process_new()
    await manager._process_new()
    assert replica_manager.applied == [{"topic_configs": {"t": store.configs["t"]}}]
