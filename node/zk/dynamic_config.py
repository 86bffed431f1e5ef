"""Kafka's DynamicConfigManager: every config of the entity types a process cares about, read
at start-up and then kept current by the change notifications under `/config/changes`, each
handed to that entity type's handler (Kafka's ConfigHandler).

The notifications are followed by the one ChangeNotificationListener (node/zk/change_listener.py),
armed before the configs are read, so a change made meanwhile is never missed. A notification
names `<entity type>/<name>`; the entity's config is read again and replaces what its handler
knew (an entity whose znode is gone has an empty config).

Brokers hand it their replication throttles (node/broker/dynamic_config.py) and SCRAM users;
the planner only its SCRAM users, which its SASL listener authenticates against as a
broker's does (`UserConfigHandler`, Kafka's handler of the same name).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from actors.admin.config_admin import USERS
from actors.base.clock import Clock
from actors.security.credential_cache import CredentialCache, scram_credentials
from node.zk import data, paths
from node.zk.change_listener import ChangeNotificationListener
from node.zk.config_store import ZkConfigStore

log = logging.getLogger(__name__)


class ConfigHandler(Protocol):
    async def process_config_changes(self, configs: Mapping[str, dict[str, str]]) -> None:
        """The current configs of these entities (by sanitized name): every one at start-up,
        then one per change notification."""


class DynamicConfigManager:
    def __init__(self, configs: ZkConfigStore, handlers: Mapping[str, ConfigHandler], clock: Clock) -> None:
        self._configs = configs
        self._handlers = dict(handlers)
        self._listener = ChangeNotificationListener(
            configs.zk, paths.CONFIG_CHANGES, paths.CONFIG_CHANGE_PREFIX, self._changed, clock
        )

    async def startup(self) -> None:
        await self._configs.zk.create_all_if_missing(["/config", paths.CONFIG_CHANGES])
        await self._listener.startup()
        for entity_type, handler in self._handlers.items():
            await handler.process_config_changes(await self._configs.entity_configs(entity_type))

    async def shutdown(self) -> None:
        await self._listener.shutdown()

    async def _changed(self, raw: bytes | None) -> None:
        try:
            entity_path = data.decode_config_change(raw)
        except data.ZNodeDataError as e:
            log.warning("ignoring a config change notification: %s", e)
            return
        entity_type, _, name = entity_path.partition("/")
        handler = self._handlers.get(entity_type)
        if handler is None or not name:
            return
        config, _ = await self._configs.entity_config(entity_type, name)
        await handler.process_config_changes({name: config})


class UserConfigHandler:
    """Kafka's UserConfigHandler, for credentials: each user's SCRAM credentials replace what
    the cache knew of that user, so a user added, changed or deleted is known at once."""

    def __init__(self, cache: CredentialCache) -> None:
        self.cache = cache
        # The first call is the start-up's read of every user: one line for it, not one a user.
        self._loaded = False

    async def process_config_changes(self, configs: Mapping[str, dict[str, str]]) -> None:
        loading, self._loaded = not self._loaded, True
        for sanitized, config in configs.items():
            if "/" in sanitized:
                continue  # `users/<u>/clients/<c>` is a client quota, which holds no credentials
            self._apply(paths.desanitize(sanitized), config, quiet=loading)
        if loading:
            log.info("SCRAM credentials of %d user(s) loaded", len(self.cache.users()))

    def _apply(self, user: str, config: dict[str, str], *, quiet: bool) -> None:
        before = self.cache.mechanisms(user)
        credentials, problems = scram_credentials(config)
        for mechanism, problem in problems.items():
            log.warning("ignoring the %s credential of user %s: %s", mechanism, user, problem)
        self.cache.update_user(user, credentials)
        after = self.cache.mechanisms(user)
        if (before or after) and not quiet:
            log.info(
                "SCRAM credentials of user %s: %s", user, ", ".join(after) if after else "none (removed)"
            )


def credential_follower(configs: ZkConfigStore, cache: CredentialCache, clock: Clock) -> DynamicConfigManager:
    """A manager that only keeps `cache` current with `/config/users` (the planner's)."""
    return DynamicConfigManager(configs, {USERS: UserConfigHandler(cache)}, clock)
