"""The PlanRecord contract, run against the record in memory and `/keel/plan` in a real
ZooKeeper: the summary, and the whole plan in parts that a planner taking the plan over reads
back, or refuses when they do not make the plan their header names."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from node.planner.plan_state import PLAN_DOCUMENT_ZNODE, MemoryPlanRecord, ZkPlanRecord, pack, part_names
from node.zk.client import ZooKeeperClient

# Small parts, so that a plan of a few hundred moves takes several.
PART_BYTES = 2048


def plan(plan_id: str, moves: int, revision: int = 1) -> dict[str, object]:
    rng = random.Random(moves)
    return {
        "version": 1,
        "plan_id": plan_id,
        "state": "running",
        "revision": revision,
        "moves": [
            {
                "topic": f"t{rng.randrange(10**6)}",
                "partition": i,
                "target": [rng.randrange(100) for _ in range(3)],
            }
            for i in range(moves)
        ],
    }


@pytest.fixture(params=["memory", "zookeeper"])
async def record(request: pytest.FixtureRequest) -> AsyncIterator[MemoryPlanRecord | ZkPlanRecord]:
    if request.param == "memory":
        yield MemoryPlanRecord(part_bytes=PART_BYTES)
        return
    client = ZooKeeperClient(
        request.getfixturevalue("zk_connect"), session_timeout_s=6, connection_timeout_s=10
    )
    await client.start()
    try:
        yield ZkPlanRecord(client, part_bytes=PART_BYTES)
    finally:
        await client.close()


async def test_nothing_is_read_before_anything_is_written(record: MemoryPlanRecord | ZkPlanRecord) -> None:
    assert await record.read() is None
    assert await record.read_plan() is None


async def test_the_summary_reads_back_as_written(record: MemoryPlanRecord | ZkPlanRecord) -> None:
    await record.write({"plan_id": "p1", "state": "running", "moves_total": 3})
    await record.write({"plan_id": "p1", "state": "complete", "moves_total": 3})
    assert await record.read() == {"version": 1, "plan_id": "p1", "state": "complete", "moves_total": 3}


async def test_a_plan_in_many_parts_reads_back_whole_and_a_shorter_one_replaces_it(
    record: MemoryPlanRecord | ZkPlanRecord,
) -> None:
    large, small = plan("p1", 600), plan("p2", 5)
    await record.write_plan(large)
    assert await record.read_plan() == large
    await record.write_plan(small)
    assert await record.read_plan() == small
    if isinstance(record, ZkPlanRecord):
        # The parts of the longer plan are gone, not left behind.
        header = await record._header()
        assert header is not None and header["parts"] == 1
        assert await record._zk.children(PLAN_DOCUMENT_ZNODE) == part_names(header)


async def test_a_writer_that_dies_before_its_header_leaves_the_previous_copy_whole(
    record: MemoryPlanRecord | ZkPlanRecord,
) -> None:
    """The new copy's parts go under names of their own: the header still names the old
    ones, untouched. (The copy in memory is replaced at once.)"""
    old = plan("p1", 600)
    await record.write_plan(old)
    if isinstance(record, ZkPlanRecord):
        _, parts = pack(plan("p1", 600, revision=2), PART_BYTES)
        for i, part in enumerate(parts):
            await record._zk.create(f"{PLAN_DOCUMENT_ZNODE}/part-dying-{i}", part)
    assert await record.read_plan() == old


async def test_parts_that_do_not_make_the_plan_their_header_names_are_refused(
    record: MemoryPlanRecord | ZkPlanRecord,
) -> None:
    """A part changed behind the header's back (by hand, or a second writer): not used."""
    await record.write_plan(plan("p1", 600))
    if isinstance(record, ZkPlanRecord):
        header = await record._header()
        assert header is not None
        await record._zk.set(f"{PLAN_DOCUMENT_ZNODE}/{part_names(header)[1]}", b"not the plan")
    else:
        assert record.plan is not None
        header, parts = record.plan
        record.plan = header, [parts[0], b"not the plan", *parts[2:]]
    assert await record.read_plan() is None


async def test_the_journal_reads_back_as_written_and_is_replaced_whole(
    record: MemoryPlanRecord | ZkPlanRecord,
) -> None:
    assert await record.read_journal() is None
    entry = {"revision": 3, "move": {"topic": "a", "partition": 0, "state": "in_flight"}}
    await record.write_journal({"version": 1, "plan_id": "p1", "entries": [entry, entry]})
    await record.write_journal({"version": 1, "plan_id": "p1", "entries": [entry]})
    assert await record.read_journal() == {"version": 1, "plan_id": "p1", "entries": [entry]}
    await record.write_plan(plan("p1", 300))  # the copy's parts leave the journal be
    assert await record.read_journal() == {"version": 1, "plan_id": "p1", "entries": [entry]}
