"""The authorizer of a broker or planner (Kafka's AclAuthorizer with its ZooKeeper side):
the ACL cache of actors/security/authorizer.py, loaded from ZooKeeper at start-up and kept current
by the change notifications, so an ACL added or removed by `keel acl` (or Kafka's own
kafka-acls) applies within moments and without a restart.

As Kafka does, the listeners are armed before the ACLs are read, so a change made while
they load is never missed. A notification names one resource pattern; its znode is read
again and replaces what the cache held. An unreadable znode is logged and leaves the cache
as it was for that pattern.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from actors.base.clock import Clock
from actors.security.authorizer import AclAuthorizer, AuthorizerConfig
from node.zk import data, paths
from node.zk.acl_store import ZkAclStore
from node.zk.change_listener import ChangeNotificationListener
from node.zk.client import ZooKeeperClient

log = logging.getLogger(__name__)


def authorizer_config(values: Mapping[str, object]) -> AuthorizerConfig | None:
    """The authorizer's settings from parsed properties; None without `authorizer.class.name`."""
    if not values.get("authorizer.class.name"):
        return None
    super_users = values.get("super.users")
    return AuthorizerConfig(
        super_users=super_users if isinstance(super_users, frozenset) else frozenset(),
        allow_everyone_if_no_acl_found=values.get("allow.everyone.if.no.acl.found") is True,
    )


class ZkAclAuthorizer:
    def __init__(self, zk: ZooKeeperClient, config: AuthorizerConfig, clock: Clock) -> None:
        self.authorizer = AclAuthorizer(config)
        self.store = ZkAclStore(zk)
        self._listeners = [
            ChangeNotificationListener(
                zk,
                paths.acl_changes(prefixed),
                paths.ACL_CHANGE_PREFIX,
                functools.partial(self._changed, prefixed=prefixed),
                clock,
            )
            for prefixed in (False, True)
        ]

    async def startup(self) -> None:
        await self.store.create_acl_paths()
        for listener in self._listeners:
            await listener.startup()
        loaded = await self.store.all_acls()
        for pattern, entries in loaded.items():
            self.authorizer.set_acls(pattern, entries)
        log.info(
            "authorizer started: %d ACLs on %d resource patterns, super users %s",
            sum(len(e) for e in loaded.values()),
            len(loaded),
            ", ".join(sorted(self.authorizer.config.super_users)) or "none",
        )

    async def shutdown(self) -> None:
        for listener in self._listeners:
            await listener.shutdown()

    async def _changed(self, raw: bytes | None, *, prefixed: bool) -> None:
        try:
            pattern = data.decode_acl_change(raw, prefixed=prefixed)
            entries, _ = await self.store.resource_acls(pattern)
        except data.ZNodeDataError as e:
            log.error("ignoring an ACL change: %s", e)
            return
        self.authorizer.set_acls(pattern, entries)
        log.info("ACLs of %s now: %s", pattern, "; ".join(sorted(str(e) for e in entries)) or "none")
