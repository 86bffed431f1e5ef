"""Where the executor keeps its plan across restarts.

The whole plan (every move, its state and step) is a JSON file under `planner.state.dir`,
written whole to a temporary file and renamed over the old one, so that a crash leaves the
old or the new version and never half of one. A small ZooKeeper node, `/keel/plan`, names
the plan being executed and its state, so that a planner starting (on this machine or
another) knows whether the plan in its state dir is still the cluster's current one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol

import orjson

from node.zk.client import NodeExists, ZooKeeperClient

log = logging.getLogger(__name__)

PLAN_FILE = "executing-plan.json"
PLAN_ZNODE = "/keel/plan"


class PlanStateError(Exception):
    """The saved plan cannot be read; the message says why."""


class PlanFile:
    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / PLAN_FILE

    def load(self) -> dict[str, object] | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise PlanStateError(f"{self.path}: {e}") from e
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise PlanStateError(f"{self.path}: not JSON: {e}") from e
        if not isinstance(value, dict) or value.get("version") != 1:
            raise PlanStateError(f"{self.path}: not a saved plan of version 1")
        return value

    def save(self, document: dict[str, object]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        with temporary.open("wb") as f:
            f.write(orjson.dumps(document))
            f.flush()
            os.fsync(f.fileno())
        temporary.replace(self.path)


class PlanRecord(Protocol):
    """The cluster-wide record of the plan being executed: its id and state."""

    async def read(self) -> dict[str, object] | None: ...

    async def write(self, summary: dict[str, object]) -> None: ...


class ZkPlanRecord:
    """`/keel/plan`: {"version": 1, "plan_id", "state", "origin", "moves_total", "moves_done",
    "updated_ms"}, a persistent znode that the active planner overwrites."""

    def __init__(self, zk: ZooKeeperClient) -> None:
        self._zk = zk

    async def read(self) -> dict[str, object] | None:
        value = await self._zk.get_or_none(PLAN_ZNODE)
        if value is None or value[0] is None:
            return None
        try:
            record = orjson.loads(value[0])
        except orjson.JSONDecodeError:
            log.warning("ignoring an unreadable %s", PLAN_ZNODE)
            return None
        return record if isinstance(record, dict) else None

    async def write(self, summary: dict[str, object]) -> None:
        data = orjson.dumps({"version": 1, **summary})
        if await self._zk.exists(PLAN_ZNODE) is not None:
            await self._zk.set(PLAN_ZNODE, data)
            return
        await self._zk.create_all_if_missing(["/keel"])
        try:
            await self._zk.create(PLAN_ZNODE, data)
        except NodeExists:
            await self._zk.set(PLAN_ZNODE, data)


class MemoryPlanRecord:
    """A PlanRecord in memory, for a planner without ZooKeeper and for tests."""

    def __init__(self) -> None:
        self.value: dict[str, object] | None = None

    async def read(self) -> dict[str, object] | None:
        return None if self.value is None else dict(self.value)

    async def write(self, summary: dict[str, object]) -> None:
        self.value = {"version": 1, **summary}
