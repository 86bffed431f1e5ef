"""Where the executor keeps its plan across restarts.

The whole plan (every move, its state and step) is a JSON file under `planner.state.dir`,
written whole to a temporary file and renamed over the old one, so that a crash leaves the
old or the new version and never half of one. A small ZooKeeper node, `/keel/plan`, names
the plan being executed and its state, so that a planner starting (on this machine or
another) knows whether the plan in its state dir is still the cluster's current one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import orjson

from node.zk.client import NodeExists, NoNode, ZooKeeperClient

log = logging.getLogger(__name__)

PLAN_FILE = "executing-plan.json"
PLAN_ZNODE = "/keel/plan"
PLAN_DOCUMENT_ZNODE = "/keel/plan-document"
# What changed in the plan since its copy was last written (moves handed to the controller,
# found done, failed), written before a move is handed over: the copy lags by seconds.
PLAN_JOURNAL_ZNODE = f"{PLAN_DOCUMENT_ZNODE}/journal"
# ZooKeeper refuses a znode over jute.maxbuffer (1 MiB by default): a plan goes in parts of at
# most this many compressed bytes, `/keel/plan-document/part-N`.
PART_BYTES = 512 * 1024


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


def pack(document: dict[str, object], part_bytes: int = PART_BYTES) -> tuple[dict[str, object], list[bytes]]:
    """A plan document as a header and the parts of its compressed JSON. The header names
    the parts by a token of this write (`part-<token>-<i>`): a new copy's parts never
    overwrite those the current header names, so a writer that dies half-way leaves the
    previous copy whole."""
    data = zlib.compress(orjson.dumps(document), 6)
    parts = [data[i : i + part_bytes] for i in range(0, len(data), part_bytes)] or [b""]
    header = {
        "version": 1,
        "plan_id": document.get("plan_id"),
        "revision": document.get("revision", 0),
        "token": uuid.uuid4().hex[:16],
        "parts": len(parts),
        "bytes": len(data),
        "crc32": zlib.crc32(data),
    }
    return header, parts


def part_names(header: Mapping[str, object]) -> list[str]:
    """The children of the copy's znode that hold the parts `header` names."""
    count = header.get("parts")
    if type(count) is not int or count < 0:
        return []
    return [f"part-{header.get('token')}-{i}" for i in range(count)]


def unpack(header: dict[str, object], parts: list[bytes]) -> dict[str, object] | None:
    """The document back, or None when the parts do not make the one the header names (a
    writer that was overwriting them, a part missing)."""
    data = b"".join(parts)
    if len(data) != header.get("bytes") or zlib.crc32(data) != header.get("crc32"):
        return None
    try:
        document = orjson.loads(zlib.decompress(data))
    except (zlib.error, orjson.JSONDecodeError):
        return None
    if not isinstance(document, dict) or document.get("plan_id") != header.get("plan_id"):
        return None
    return document


class PlanRecord(Protocol):
    """The cluster-wide record of the plan being executed: its id and state, and the whole
    plan, for the planner that takes it over."""

    async def read(self) -> dict[str, object] | None: ...

    async def write(self, summary: dict[str, object]) -> None: ...

    async def read_plan(self) -> dict[str, object] | None: ...

    async def write_plan(self, document: dict[str, object]) -> None: ...

    async def read_journal(self) -> dict[str, object] | None: ...

    async def write_journal(self, journal: dict[str, object]) -> None: ...


class ZkPlanRecord:
    """`/keel/plan`: {"version": 1, "plan_id", "state", "origin", "moves_total", "moves_done",
    "updated_ms"}, a persistent znode that the active planner overwrites."""

    def __init__(self, zk: ZooKeeperClient, part_bytes: int = PART_BYTES) -> None:
        self._zk = zk
        self._part_bytes = part_bytes

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

    async def read_plan(self) -> dict[str, object] | None:
        header = await self._header()
        if header is None:
            return None
        # One read a part: a multi-read of them would make a reply over ZooKeeper's limit.
        found = [await self._zk.get_or_none(f"{PLAN_DOCUMENT_ZNODE}/{name}") for name in part_names(header)]
        parts = [b"" if value is None or value[0] is None else value[0] for value in found]
        document = await asyncio.to_thread(unpack, header, parts)
        if document is None:
            log.warning("%s does not hold the plan its header names; not using it", PLAN_DOCUMENT_ZNODE)
        return document

    async def write_plan(self, document: dict[str, object]) -> None:
        """The new parts first, then the header that names them, then the parts of the copy
        it replaces: a reader sees the old plan whole or the new one."""
        header, parts = await asyncio.to_thread(pack, document, self._part_bytes)
        await self._zk.create_all_if_missing(["/keel", PLAN_DOCUMENT_ZNODE])
        previous = await self._header()
        names = part_names(header)
        await asyncio.gather(
            *(self._put(f"{PLAN_DOCUMENT_ZNODE}/{n}", p) for n, p in zip(names, parts, strict=True))
        )
        await self._put(PLAN_DOCUMENT_ZNODE, orjson.dumps(header))
        if previous is not None:
            for name in part_names(previous):
                with contextlib.suppress(NoNode):
                    await self._zk.delete(f"{PLAN_DOCUMENT_ZNODE}/{name}")

    async def _header(self) -> dict[str, object] | None:
        value = await self._zk.get_or_none(PLAN_DOCUMENT_ZNODE)
        if value is None or not value[0]:
            return None
        try:
            header = orjson.loads(value[0])
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or not part_names(header):
            log.warning("ignoring an unreadable %s", PLAN_DOCUMENT_ZNODE)
            return None
        return header

    async def read_journal(self) -> dict[str, object] | None:
        value = await self._zk.get_or_none(PLAN_JOURNAL_ZNODE)
        if value is None or not value[0]:
            return None
        try:
            journal = orjson.loads(value[0])
        except orjson.JSONDecodeError:
            log.warning("ignoring an unreadable %s", PLAN_JOURNAL_ZNODE)
            return None
        return journal if isinstance(journal, dict) else None

    async def write_journal(self, journal: dict[str, object]) -> None:
        await self._zk.create_all_if_missing(["/keel", PLAN_DOCUMENT_ZNODE])
        await self._put(PLAN_JOURNAL_ZNODE, orjson.dumps(journal))

    async def _put(self, path: str, data: bytes) -> None:
        try:
            await self._zk.set(path, data)
        except NoNode:
            try:
                await self._zk.create(path, data)
            except NodeExists:
                await self._zk.set(path, data)


class MemoryPlanRecord:
    """A PlanRecord in memory, for a planner without ZooKeeper and for tests."""

    def __init__(self, part_bytes: int = PART_BYTES) -> None:
        self.value: dict[str, object] | None = None
        # The plan as ZooKeeper would hold it: a header and parts.
        self.plan: tuple[dict[str, object], list[bytes]] | None = None
        self.journal: dict[str, object] | None = None
        self._part_bytes = part_bytes

    async def read(self) -> dict[str, object] | None:
        return None if self.value is None else dict(self.value)

    async def write(self, summary: dict[str, object]) -> None:
        self.value = {"version": 1, **summary}

    async def read_plan(self) -> dict[str, object] | None:
        return None if self.plan is None else unpack(*self.plan)

    async def write_plan(self, document: dict[str, object]) -> None:
        self.plan = pack(document, self._part_bytes)

    async def read_journal(self) -> dict[str, object] | None:
        return None if self.journal is None else orjson.loads(orjson.dumps(self.journal))

    async def write_journal(self, journal: dict[str, object]) -> None:
        self.journal = orjson.loads(orjson.dumps(journal))
