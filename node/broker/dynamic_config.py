"""The broker's side of dynamic configs (Kafka's DynamicConfigManager with its
ZkNodeChangeNotificationListener): read every config at start-up, then follow the change
notifications under `/config/changes` and re-read the entity each one names.

The watch callback only wakes the task that does the reading. Notifications are processed
in sequence order, each once; ones older than 15 minutes are deleted, as Kafka purges them
(`changeExpirationMs`). What applies here are the replication throttles: this broker's rates
(its own `/config/brokers/<id>`, else `/config/brokers/<default>`) and each topic's
throttled-replicas lists, handed to the replica manager; and the SCRAM credentials of
`/config/users/<name>`, kept in the credential cache that the SASL server asks (Kafka's
UserConfigHandler): a user added, changed or deleted is known without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from actors.broker.handle import ReplicaManagerHandle
from actors.broker.replication_quota import FOLLOWER_REPLICAS, LEADER_REPLICAS
from actors.clock import Clock
from actors.config_admin import BROKERS, DEFAULT_ENTITY, TOPICS, USERS, throttle_rates
from actors.credential_cache import CredentialCache, scram_credentials
from node.zk.paths import CONFIG_CHANGE_PREFIX, desanitize
from node.zk.store import ZkClusterStore

log = logging.getLogger(__name__)

# Kafka's ZkNodeChangeNotificationListener purges notifications older than this.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def _sequence(name: str) -> int:
    return int(name[len(CONFIG_CHANGE_PREFIX) :])


class DynamicConfigManager:
    def __init__(
        self,
        broker_id: int,
        store: ZkClusterStore,
        replica_manager: ReplicaManagerHandle,
        clock: Clock,
        credentials: CredentialCache | None = None,
    ) -> None:
        self._broker_id = broker_id
        self.credentials = credentials or CredentialCache()
        self._store = store
        self._replica_manager = replica_manager
        self._clock = clock
        self._wake = asyncio.Event()
        self._last_seen = -1
        self._task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        """Arm the watch and note the newest notification first, then read everything: a
        change written after the listing fires the watch, one before it is read anyway."""
        self._store.watch_config_changes(self._wake.set)
        self._store.watch_session(self)
        existing = await self._store.config_changes(watch=True)
        if existing:
            self._last_seen = _sequence(existing[-1])
        await self._apply_broker_rates()
        topics = await self._store.entity_configs(TOPICS)
        throttled = {t: c for t, c in topics.items() if LEADER_REPLICAS in c or FOLLOWER_REPLICAS in c}
        if throttled:
            await self._replica_manager.set_throttles(topic_configs=throttled)
        for name, config in (await self._store.entity_configs(USERS)).items():
            self._apply_user(name, config)
        self._task = asyncio.create_task(self._run(), name="dynamic-config")
        await self._purge(existing)

    # --- SessionWatcher: a new session has lost the old one's watches ---

    async def before_new_session(self) -> None:
        return None

    def after_new_session(self) -> None:
        """Re-list (which re-arms the watch) and catch up on what the gap missed."""
        self._wake.set()

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._process_new()
            except Exception:
                # A ZooKeeper hiccup: the next notification (or this one, re-listed) retries.
                log.exception("processing config change notifications failed")
                self._wake.set()
                await asyncio.sleep(1.0)

    async def _process_new(self) -> None:
        names = await self._store.config_changes(watch=True)
        fresh = [n for n in names if _sequence(n) > self._last_seen]
        for name in fresh:
            notification = await self._store.config_change(name)
            if notification is not None and notification[0] is not None:
                await self._apply(notification[0])
            # Only once applied: a failed apply leaves it to be retried on the next pass.
            self._last_seen = _sequence(name)
        await self._purge(names)

    async def _apply(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == BROKERS and name in (DEFAULT_ENTITY, str(self._broker_id)):
            await self._apply_broker_rates()
        elif entity_type == TOPICS and name:
            config, _ = await self._store.entity_config(TOPICS, name)
            await self._replica_manager.set_throttles(topic_configs={name: config})
            log.info("applied the config of topic %s", name)
        elif entity_type == USERS and name and "/" not in name:
            # `users/<u>/clients/<c>` names a client quota, which holds no credentials.
            config, _ = await self._store.entity_config(USERS, name)
            self._apply_user(name, config)

    async def _apply_broker_rates(self) -> None:
        defaults, _ = await self._store.entity_config(BROKERS, DEFAULT_ENTITY)
        own, _ = await self._store.entity_config(BROKERS, str(self._broker_id))
        await self._replica_manager.set_throttles(rates=throttle_rates(own, defaults))

    def _apply_user(self, sanitized: str, config: dict[str, str]) -> None:
        user = desanitize(sanitized)
        before = self.credentials.mechanisms(user)
        credentials, problems = scram_credentials(config)
        for mechanism, problem in problems.items():
            log.warning("ignoring the %s credential of user %s: %s", mechanism, user, problem)
        self.credentials.update_user(user, credentials)
        after = self.credentials.mechanisms(user)
        if before or after:
            log.info(
                "SCRAM credentials of user %s: %s", user, ", ".join(after) if after else "none (removed)"
            )

    async def _purge(self, names: list[str]) -> None:
        """Delete notifications older than CHANGE_EXPIRATION_MS that this broker has seen
        (any broker may; a lost race is a missing node)."""
        horizon = self._clock.wall_ms() - CHANGE_EXPIRATION_MS
        for name in names:
            if _sequence(name) > self._last_seen:
                break
            notification = await self._store.config_change(name)
            if notification is None or notification[1] >= horizon:
                break  # names are in creation order: the rest are newer
            await self._store.delete_config_change(name)
