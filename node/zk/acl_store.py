"""ACLs in ZooKeeper as Kafka keeps them (ZkAclStore, KafkaZkClient's ACL operations).

One znode per resource pattern holds all its entries: `/kafka-acl/<ResourceType>/<name>`
for a literal pattern, `/kafka-acl-extended/prefixed/<ResourceType>/<name>` for a prefixed
one. Every change writes the znode conditionally on the version read and a notification
naming the pattern (`/kafka-acl-changes` or `/kafka-acl-extended-changes`) in one multi-op,
so a broker that sees the notification reads the new entries; Kafka writes the two one
after the other. A znode left with no entries is deleted, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from actors.security.acl import AclEntry, AclError, PatternType, ResourcePattern, ResourceType, parse_name
from node.zk import data, paths
from node.zk.client import BadVersion, NodeExists, NoNode, ZooKeeperClient, multi_failure

log = logging.getLogger(__name__)

# Kafka's AclAuthorizer.maxUpdateRetries: another writer won each of this many races.
MAX_UPDATE_RETRIES = 10


class AclUpdateConflict(Exception):
    """The ACLs of a resource kept changing under this update."""


def _prefixed(pattern_type: PatternType) -> bool:
    return pattern_type is PatternType.PREFIXED


def resource_path(pattern: ResourcePattern) -> str:
    return paths.acl_resource(_prefixed(pattern.pattern_type), pattern.resource_type.kafka_name, pattern.name)


class ZkAclStore:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    async def create_acl_paths(self) -> None:
        """The roots, a child per resource type under each, and the change paths (Kafka's
        createAclPaths), each only if missing."""
        wanted = [paths.KAFKA_ACL_EXTENDED, paths.KAFKA_ACL_CHANGES, paths.KAFKA_ACL_EXTENDED_CHANGES]
        for prefixed in (False, True):
            wanted.append(paths.acl_root(prefixed))
            wanted.extend(paths.acl_resource_type(prefixed, t.kafka_name) for t in ResourceType)
        await self.zk.create_all_if_missing(wanted)

    async def resource_acls(self, pattern: ResourcePattern) -> tuple[frozenset[AclEntry], int | None]:
        """The pattern's entries and its znode's version (None: no znode)."""
        path = resource_path(pattern)
        value = await self.zk.get_or_none(path)
        if value is None:
            return frozenset(), None
        return data.decode_acls(path, value[0]), value[1].version

    async def all_acls(self) -> dict[ResourcePattern, frozenset[AclEntry]]:
        """Every stored pattern's entries (Kafka's loadAllAcls). Unknown resource types are
        skipped with a warning; an unreadable znode too, with an error naming it."""
        found: dict[ResourcePattern, frozenset[AclEntry]] = {}
        for pattern_type in PatternType:
            prefixed = _prefixed(pattern_type)
            for type_name in await self._children(paths.acl_root(prefixed)):
                try:
                    resource_type = parse_name(ResourceType, type_name)
                except AclError:
                    log.warning("ignoring unknown ACL resource type %s", type_name)
                    continue
                names = await self._children(paths.acl_resource_type(prefixed, type_name))
                patterns = [ResourcePattern(resource_type, n, pattern_type) for n in names]
                values = await self.zk.get_many([resource_path(p) for p in patterns])
                for pattern, value in zip(patterns, values, strict=True):
                    if value is None:
                        continue
                    try:
                        entries = data.decode_acls(resource_path(pattern), value[0])
                    except data.ZNodeDataError as e:
                        log.error("ignoring unreadable ACLs: %s", e)
                        continue
                    if entries:
                        found[pattern] = entries
        return found

    async def _children(self, path: str) -> list[str]:
        try:
            return sorted(await self.zk.children(path))
        except NoNode:
            return []

    async def update_acls(
        self, pattern: ResourcePattern, change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]]
    ) -> tuple[frozenset[AclEntry], frozenset[AclEntry]]:
        """Apply `change` to the pattern's entries, read-modify-write, retried when another
        writer got there first (Kafka's updateResourceAcls); (before, after). Nothing is
        written, and no notification, when the entries stay the same."""
        for _ in range(MAX_UPDATE_RETRIES + 1):
            current, version = await self.resource_acls(pattern)
            wanted = change(current)
            if wanted == current:
                return current, current
            if await self._write(pattern, wanted, version):
                return current, wanted
        raise AclUpdateConflict(
            f"the ACLs of {pattern} kept changing; gave up after {MAX_UPDATE_RETRIES} retries"
        )

    async def _write(
        self, pattern: ResourcePattern, entries: frozenset[AclEntry], version: int | None
    ) -> bool:
        """False when the znode moved since it was read."""
        path = resource_path(pattern)
        if version is None:
            write = self.zk.create_op(path, data.encode_acls(entries))
        elif entries:
            write = self.zk.set_op(path, data.encode_acls(entries), version)
        else:
            write = self.zk.delete_op(path, version)
        prefixed = _prefixed(pattern.pattern_type)
        notify = self.zk.create_op(
            f"{paths.acl_changes(prefixed)}/{paths.ACL_CHANGE_PREFIX}",
            data.encode_acl_change(pattern),
            sequential=True,
        )
        results = await self.zk.multi([write, notify])
        error = multi_failure(results)
        if isinstance(error, NodeExists | BadVersion | NoNode):
            return False
        if error is not None:
            raise error
        return True
