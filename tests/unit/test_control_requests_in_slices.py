"""A LeaderAndIsr or UpdateMetadata of many partitions, taken by the replica manager actor,
is applied in slices between which the event loop turns, and comes to the same as applying it
in one go: the same answer, the same partitions, the same metadata, the same state-change
lines."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from actors.base import loop_slices
from actors.base.state_change_log import STATE_CHANGE_LOGGER
from actors.replica.replica_manager import ReplicaManager
from actors.replica.replica_messages import ApplyLeaderAndIsr, ApplyUpdateMetadata
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from tests.support import turns_while
from tests.unit.test_replica_manager import MY_EPOCH, leader_and_isr, state
from wire.api import (
    Endpoint,
    LiveBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

ME = 1
PARTITIONS = 3 * loop_slices.SLICE + 7


def _manager(path: Path) -> ReplicaManager:
    path.mkdir()
    return ReplicaManager(ME, LogManager([path], LogConfig()))


def _roles(manager: ReplicaManager) -> dict[object, tuple[object, ...]]:
    """What each partition became (not when: the leader's clock differs between the two)."""
    return {
        tp: (p.role, p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.replicas)
        for tp, p in manager.state.partitions.items()
    }


@pytest.fixture(autouse=True)
def every_slice_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    # No budget: the loop turns between any two slices, whatever the machine's speed.
    monkeypatch.setattr(loop_slices, "BUDGET_S", 0.0)


async def test_a_large_leader_and_isr_is_applied_in_slices_as_in_one_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    states = [state(p, leader=ME if p % 2 else 2, replicas=[1, 2]) for p in range(PARTITIONS)]
    request = leader_and_isr(*states, live_leaders=(1, 2))
    whole, sliced = _manager(tmp_path / "whole"), _manager(tmp_path / "sliced")
    with caplog.at_level(logging.INFO, logger=STATE_CHANGE_LOGGER):
        expected = whole.become_leader_or_follower(request, MY_EPOCH)
        lines_whole = [line for r in caplog.records for line in r.getMessage().splitlines()]
        caplog.clear()
        answer, turns = await turns_while(sliced.receive(ApplyLeaderAndIsr(request, MY_EPOCH)))
        lines_sliced = [line for r in caplog.records for line in r.getMessage().splitlines()]
    assert answer == expected
    assert turns >= 3
    assert _roles(sliced) == _roles(whole) and len(_roles(whole)) == PARTITIONS
    assert lines_sliced == lines_whole and len(lines_whole) == PARTITIONS


async def test_a_large_update_metadata_is_applied_in_slices_as_in_one_go(tmp_path: Path) -> None:
    request = UpdateMetadataRequest(
        controller_id=9,
        controller_epoch=1,
        broker_epoch=MY_EPOCH,
        partition_states=[
            UpdateMetadataPartitionState(
                topic=f"t{p // 1000}",
                partition=p % 1000,
                controller_epoch=1,
                leader=1 + p % 2,
                leader_epoch=0,
                isr=[1, 2],
                partition_epoch=0,
                replicas=[1, 2],
            )
            for p in range(PARTITIONS)
        ],
        live_brokers=[
            LiveBroker(
                broker_id=b,
                endpoints=[Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9000 + b)],
            )
            for b in (1, 2)
        ],
    )
    whole, sliced = _manager(tmp_path / "whole"), _manager(tmp_path / "sliced")
    expected = whole.update_metadata(request, MY_EPOCH)
    answer, turns = await turns_while(sliced.receive(ApplyUpdateMetadata(request, MY_EPOCH)))
    assert answer == expected
    assert turns >= 3
    assert sliced.state.metadata == whole.state.metadata
    assert sliced.state.controller_epoch == whole.state.controller_epoch == 1
