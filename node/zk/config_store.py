"""Kafka's dynamic configs in ZooKeeper, as AdminZkClient writes them (spec §1): each
entity's `/config/<type>/<name>` (topics, brokers and `<default>`, users) and, with every
change, a sequential `/config/changes/config_change_<seq>` naming it, which every broker's
DynamicConfigManager follows. The topic and broker config admin, the brokers' dynamic
configs and the SCRAM users read and write through it."""

from __future__ import annotations

import logging
from typing import Any

from node.zk import data, paths
from node.zk.client import BadVersion, NodeExists, NoNode, ZooKeeperClient, multi_failure

log = logging.getLogger(__name__)


class ZkConfigStore:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    async def entity_config(self, entity_type: str, name: str) -> tuple[dict[str, str], int | None]:
        """`/config/<type>/<name>` and its data version (None: the znode does not exist)."""
        path = paths.entity_config(entity_type, name)
        value = await self.zk.get_or_none(path)
        if value is None:
            return {}, None
        try:
            return data.decode_entity_config(path, value[0]), value[1].version
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable config: %s", e)
            return {}, value[1].version

    async def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity's config under `/config/<type>`, read pipelined."""
        try:
            names = sorted(await self.zk.children(paths.entity_configs(entity_type)))
        except NoNode:
            return {}
        values = await self.zk.get_many([paths.entity_config(entity_type, n) for n in names])
        configs = {}
        for name, value in zip(names, values, strict=True):
            if value is None:
                continue
            path = paths.entity_config(entity_type, name)
            try:
                configs[name] = data.decode_entity_config(path, value[0])
            except data.ZNodeDataError as e:
                log.warning("ignoring unreadable config: %s", e)
        return configs

    async def change_entity_config(
        self, entity_type: str, name: str, config: dict[str, str], version: int | None
    ) -> bool:
        """Write `/config/<type>/<name>` (conditional on the version read, None: create it)
        and a sequential `/config/changes/config_change_<seq>` naming it, in one multi-op,
        as Kafka's changeEntityConfig does in two steps. False when the config moved since it
        was read: read it again and retry."""
        path = paths.entity_config(entity_type, name)
        encoded = data.encode_entity_config(config)
        if version is None:
            write = self.zk.create_op(path, encoded)
        else:
            write = self.zk.set_op(path, encoded, version)
        return await self._write_and_notify(write, entity_type, name)

    async def delete_entity_config(self, entity_type: str, name: str, version: int) -> bool:
        """Delete `/config/<type>/<name>` (conditional on the version read) with its change
        notification, in one multi-op; False when it moved or went since it was read."""
        return await self._write_and_notify(
            self.zk.delete_op(paths.entity_config(entity_type, name), version), entity_type, name
        )

    async def _write_and_notify(self, write: Any, entity_type: str, name: str) -> bool:
        notify = self.zk.create_op(
            paths.config_change(paths.CONFIG_CHANGE_PREFIX),
            data.encode_config_change(f"{entity_type}/{name}"),
            sequential=True,
        )
        error = multi_failure(await self.zk.multi([write, notify]))
        if isinstance(error, NodeExists | BadVersion | NoNode):
            return False
        if error is not None:
            raise error
        return True
