"""The planner's registration, Keel's own znode: the ephemeral `/keel/planner` that the
active planner holds (a standby waits for it to go), naming where it listens. Brokers read
it to answer DescribePlanner; the console reads it to reach the planner."""

from __future__ import annotations

import logging

from node.zk import data, paths
from node.zk.client import NodeExists, ZooKeeperClient

log = logging.getLogger(__name__)


class ZkPlannerRegistry:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    async def planner(self) -> data.PlannerRegistration | None:
        """The registered planner, or None when no planner holds `/keel/planner`."""
        value = await self.zk.get_or_none(paths.PLANNER)
        if value is None:
            return None
        try:
            return data.decode_planner(value[0])
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable planner registration: %s", e)
            return None

    async def register_planner(self, registration: data.PlannerRegistration) -> bool:
        """Create the ephemeral `/keel/planner`; False when another session holds it."""
        await self.zk.create_all_if_missing([paths.KEEL])
        try:
            await self.zk.create(paths.PLANNER, data.encode_planner(registration), ephemeral=True)
        except NodeExists:
            existing = await self.zk.get_or_none(paths.PLANNER)
            # Our own create whose answer was lost.
            return existing is not None and existing[1].ephemeral_owner == self.zk.session_id
        return True

    async def planner_holder(self) -> int | None:
        """The session id that holds `/keel/planner`, or None."""
        existing = await self.zk.get_or_none(paths.PLANNER)
        return None if existing is None else int(existing[1].ephemeral_owner)
