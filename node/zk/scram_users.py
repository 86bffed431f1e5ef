"""SCRAM users where Kafka keeps them, as `kafka-configs --zookeeper ... --entity-type users`
writes them: `/config/users/<sanitized name>` holds `{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096"}}` beside any client quotas, and each
change writes a `/config/changes/config_change_<seq>` naming `users/<name>` in the same
multi-op, which every broker's DynamicConfigManager follows into its credential cache.

A credential is computed from the password by `scramp` (RFC 5802's SaltedPassword, StoredKey
and ServerKey); the password itself is never written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable

import scramp

from actors.admin.config_admin import USERS
from actors.security.credential_cache import scram_credentials
from node.zk import paths
from node.zk.client import NotEmpty
from node.zk.config_store import ZkConfigStore
from wire.credentials import MIN_SCRAM_ITERATIONS, SCRAM_MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

# Kafka's default for kafka-configs' `iterations` (ScramMechanism's minimum too).
DEFAULT_ITERATIONS = 4096
# Read-modify-write attempts when another admin changes the same user at the same time.
_ATTEMPTS = 5
_CONFIG_PATHS = ("/config", paths.CONFIG_CHANGES, paths.entity_configs(USERS))


class ScramUserError(ValueError):
    """A user, mechanism or iteration count that cannot be written; nothing was."""


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    check_mechanism(mechanism)
    if iterations < MIN_SCRAM_ITERATIONS:
        raise ScramUserError(
            f"iterations {iterations} is less than the minimum {MIN_SCRAM_ITERATIONS} of {mechanism}"
        )
    if not password:
        raise ScramUserError("the password is empty")
    salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations
    )
    return ScramCredential(salt=salt, stored_key=stored_key, server_key=server_key, iterations=count)


def check_mechanism(mechanism: str) -> None:
    if mechanism not in SCRAM_MECHANISMS:
        raise ScramUserError(f"unknown SCRAM mechanism {mechanism!r} (one of {', '.join(SCRAM_MECHANISMS)})")


def check_user(user: str) -> None:
    if not user:
        raise ScramUserError("the user name is empty")
    if user == "<default>":
        # Kafka's default entity holds default quotas; nobody logs in as it.
        raise ScramUserError("SCRAM credentials cannot be set for the default user <default>")


@dataclasses.dataclass(frozen=True)
class UserCredentials:
    """What may be shown of a user's credentials: mechanisms and iteration counts, no secrets."""

    user: str
    iterations: dict[str, int]


class ScramUsers:
    def __init__(self, configs: ZkConfigStore) -> None:
        self._configs = configs

    async def upsert(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """Set these mechanisms' credentials of `user`, keeping its other config."""
        check_user(user)
        for mechanism in credentials:
            check_mechanism(mechanism)
        await self._configs.zk.create_all_if_missing(_CONFIG_PATHS)
        sanitized = paths.sanitize(user)
        for _ in range(_ATTEMPTS):
            current, version = await self._configs.entity_config(USERS, sanitized)
            updated = {**current, **{m: c.to_kafka() for m, c in credentials.items()}}
            if await self._configs.change_entity_config(USERS, sanitized, updated, version):
                log.info("SCRAM credentials of user %s set: %s", user, ", ".join(sorted(credentials)))
                return
        raise ScramUserError(f"user {user} kept changing while it was written; try again")

    async def delete(self, user: str, mechanisms: Iterable[str] = SCRAM_MECHANISMS) -> list[str]:
        """Remove these mechanisms' credentials of `user`; the mechanisms it had. The znode
        goes when nothing else is left in it (Kafka's tool leaves an empty config; a user
        deleted should not linger in listings)."""
        check_user(user)
        doomed = list(mechanisms)
        for mechanism in doomed:
            check_mechanism(mechanism)
        sanitized = paths.sanitize(user)
        for _ in range(_ATTEMPTS):
            current, version = await self._configs.entity_config(USERS, sanitized)
            removed = [m for m in doomed if m in current]
            if version is None or not removed:
                return []
            remaining = {k: v for k, v in current.items() if k not in removed}
            if await self._write(sanitized, remaining, version):
                log.info("SCRAM credentials of user %s removed: %s", user, ", ".join(removed))
                return removed
        raise ScramUserError(f"user {user} kept changing while it was written; try again")

    async def _write(self, sanitized: str, config: dict[str, str], version: int) -> bool:
        if not config:
            # A znode with children (client quotas, `/config/users/<u>/clients`) stays.
            with contextlib.suppress(NotEmpty):
                return await self._configs.delete_entity_config(USERS, sanitized, version)
        return await self._configs.change_entity_config(USERS, sanitized, config, version)

    async def describe(self) -> list[UserCredentials]:
        """Every user with at least one SCRAM credential, by name."""
        users = []
        for sanitized, config in (await self._configs.entity_configs(USERS)).items():
            credentials, _ = scram_credentials(config)
            if credentials:
                users.append(
                    UserCredentials(
                        paths.desanitize(sanitized), {m: c.iterations for m, c in credentials.items()}
                    )
                )
        return sorted(users, key=lambda u: u.user)
