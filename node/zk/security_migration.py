"""Set Kafka's ACLs on an existing cluster's znodes (Kafka's ZkSecurityMigrator, the
`zookeeper-security-migration` tool): the chroot's root on its own, then every znode under
each of Kafka's secure root paths, each to what Keel would give it if it created it now
(`node.zk.acls.default_acls`). `secure=False` opens them all again.

ZooKeeper checks a znode's ACL when it is read, written or gets children; deleting a child is
its parent's DELETE permission. So the root gets the ACL too: without it anyone could delete
`/controller`. Run it with the chroot the brokers use; without one, the ZooKeeper root of a
shared ensemble is secured as Kafka's tool does.

A znode deleted while the walk runs is skipped, one created meanwhile by a broker already has
its ACLs. Levels are walked breadth first, each level's requests pipelined.
"""

from __future__ import annotations

import asyncio
import logging

from node.zk.acls import SECURE_ROOT_PATHS, default_acls
from node.zk.client import NoNode, ZooKeeperClient

log = logging.getLogger(__name__)

# Requests in flight at once, so that a cluster of many thousands of znodes neither waits on
# one round trip each nor queues them all.
_BATCH = 500


async def migrate(zk: ZooKeeperClient, *, secure: bool) -> int:
    """Set the ACLs; the number of znodes set."""
    count = await _set_acls(zk, ["/"], secure)
    level = [path for path in SECURE_ROOT_PATHS if await zk.exists(path) is not None]
    while level:
        children: list[str] = []
        for start in range(0, len(level), _BATCH):
            batch = level[start : start + _BATCH]
            count += await _set_acls(zk, batch, secure)
            found = await asyncio.gather(*(_children(zk, path) for path in batch))
            children.extend(child for below in found for child in below)
        level = children
    log.info("set %s ACLs on %d znodes", "secure" if secure else "open", count)
    return count


async def _set_acls(zk: ZooKeeperClient, batch: list[str], secure: bool) -> int:
    async def one(path: str) -> bool:
        try:
            await zk.set_acl(path, default_acls(path, secure))
        except NoNode:
            log.info("%s is gone; skipped", path)
            return False
        return True

    return sum(await asyncio.gather(*(one(path) for path in batch)))


async def _children(zk: ZooKeeperClient, path: str) -> list[str]:
    try:
        names = await zk.children(path)
    except NoNode:
        return []
    return [f"{path.rstrip('/')}/{name}" for name in names]
