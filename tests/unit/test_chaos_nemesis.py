"""The nemesis's forced re-elections (`delete-controller`) over an in-memory /controller: a
burst deletes each controller as soon as the next one holds /controller at a higher epoch,
stops waiting when none comes, and is recorded as one fault."""

from __future__ import annotations

import asyncio

import pytest

from node.chaos import faults
from node.chaos.faults import Nemesis
from node.chaos.history import History
from node.chaos.schedule import Fault


class ForcedElections:
    """The two ZooKeeper calls the fault makes, over /controller and /controller_epoch held in
    memory. After each deletion a broker takes /controller at the next epoch on the
    `elect_after`-th read, for the first `elections` deletions; after those, none does. Each
    read advances the run's clock by `read_s`, so that a wait for a controller that never
    comes ends after a known number of reads."""

    def __init__(self, *, elections: int, elect_after: int = 2, read_s: float = 0.125) -> None:
        self.session_timeout_s = 4.0
        self.broker_ids = [1, 2, 3]
        self.now = 0.0
        # (broker, epoch, /controller_epoch's version), None while absent.
        self.holder: tuple[int, int, int] | None = (1, 1, 1)
        self.epoch, self.version = 1, 1
        self.elections = elections
        self.elect_after = elect_after
        self.read_s = read_s
        self._reads_since_deletion = 0
        self.deleted: list[tuple[int, int]] = []
        # Set: a broker wins an election between the fault's read and its delete, once.
        self.elect_before_next_delete = False

    def clock(self) -> float:
        return self.now

    def _elect(self) -> None:
        self.epoch += 1
        self.version += 1
        self.holder = (self.epoch % 3 + 1, self.epoch, self.version)

    async def controller_and_epoch(self) -> tuple[int, int, int] | None:
        await asyncio.sleep(0)
        self.now += self.read_s
        if self.holder is None and 0 < len(self.deleted) <= self.elections:
            self._reads_since_deletion += 1
            if self._reads_since_deletion >= self.elect_after:
                self._elect()
        return self.holder

    async def delete_controller(self, epoch_version: int) -> bool | None:
        await asyncio.sleep(0)
        if self.elect_before_next_delete:
            self.elect_before_next_delete = False
            self._elect()
        if self.holder is None or self.holder[2] != epoch_version:
            return False
        self.deleted.append(self.holder[:2])
        self.holder = None
        self._reads_since_deletion = 0
        return True


def nemesis(cluster: ForcedElections, monkeypatch: pytest.MonkeyPatch) -> tuple[Nemesis, History, list[str]]:
    # The run's clock is the fake's, advanced by each read: no wait in between is needed.
    monkeypatch.setattr(faults, "CONTROLLER_POLL_S", 0.0)
    history, said = History(), list[str]()
    return Nemesis(cluster, history, cluster.clock, said.append), history, said  # type: ignore[arg-type]


def fault(variant: str) -> Fault:
    return Fault(5.0, "delete-controller", variant, 25.0, 1)


async def test_a_burst_deletes_each_controller_as_soon_as_the_next_is_elected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = ForcedElections(elections=4)
    chaos, history, said = nemesis(cluster, monkeypatch)
    await chaos._inject(fault("4-times"))
    assert cluster.deleted == [(1, 1), (3, 2), (1, 3), (2, 4)]
    # One fault, counted once; the broker that held /controller is not under a fault.
    assert chaos.injected == {"delete-controller": 1} and not chaos.busy and not chaos.skipped
    assert [e.kind for e in history.events] == ["fault", "fault", "fault", "fault", "heal"]
    assert history.events[0].detail == (
        "delete-controller/4-times /controller deleted (broker 1 at epoch 1), 4 deletion(s) in a row planned"
    )
    # Each deletion follows the election it undoes by one read.
    assert history.events[1].detail == (
        "/controller deleted again (broker 3 at epoch 2, 0.25s after the deletion before)"
    )
    assert history.events[-1].detail.startswith(
        "broker 3 is controller at epoch 5, 0.25s after the last of 4 deletion(s)"
    )
    assert said == [e.line() for e in history.events]
    # Nothing it did is an outage: no broker or ZooKeeper server was taken away.
    assert history.outages == []


async def test_a_burst_stops_when_no_controller_comes_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Re-elected after the first deletion, not after the second: the burst waits the session
    timeout plus the grace (5 s, 40 reads of the fake's clock), makes no third deletion, and
    says so."""
    cluster = ForcedElections(elections=1)
    chaos, history, _said = nemesis(cluster, monkeypatch)
    await chaos._inject(fault("3-times"))
    assert cluster.deleted == [(1, 1), (3, 2)]
    assert chaos.injected == {"delete-controller": 1}
    last = history.events[-1]
    assert last.kind == "fault"
    assert last.detail.startswith("no controller above epoch 2 5.0s after the last of 2 deletion(s)")
    assert last.detail.endswith("(3 planned)")


async def test_a_deletion_that_loses_to_another_election_deletes_the_newer_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = ForcedElections(elections=1)
    cluster.elect_before_next_delete = True
    chaos, _history, _said = nemesis(cluster, monkeypatch)
    await chaos._inject(fault("once"))
    # Read at epoch 1; epoch 2 came before the delete, which was refused; epoch 2's went.
    assert cluster.deleted == [(3, 2)]


async def test_with_no_controller_to_delete_the_fault_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ForcedElections(elections=0)
    cluster.holder = None
    chaos, history, _said = nemesis(cluster, monkeypatch)
    await chaos._inject(fault("twice"))
    assert cluster.deleted == [] and chaos.injected == {}
    assert len(chaos.skipped) == 1 and "no broker holds /controller" in chaos.skipped[0]
    assert [e.kind for e in history.events] == ["fault-skipped"]


async def test_a_burst_cut_short_by_the_end_of_the_run_still_waits_out_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Drawn 1 s before the last fault may start, its burst stops making deletions then; whether
    a controller came back is still waited for, the session timeout plus the grace."""
    cluster = ForcedElections(elections=0)
    chaos, history, _said = nemesis(cluster, monkeypatch)
    await chaos._inject(Fault(55.0, "delete-controller", "twice", 1.0, 1))
    assert cluster.deleted == [(1, 1)]
    assert history.events[-1].detail.startswith(
        "no controller above epoch 1 5.0s after the last of 1 deletion(s)"
    )
