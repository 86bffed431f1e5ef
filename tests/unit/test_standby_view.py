"""The warm standby's view (actors/controller/standby.py): records applied in order supersede
what came before them per partition, one already applied is not applied again, a broken
version chain is counted, a view knows when records may have gone unread, and what the
records after a mark of acknowledged changes changed (or that it cannot tell)."""

from __future__ import annotations

import msgpack
import pytest

from actors.base.ports import (
    AcknowledgedChanges,
    ChangeRecord,
    LeaderAndIsr,
    LeadershipInfo,
    PartitionChange,
    TopicPartition,
)
from actors.controller import standby
from actors.controller.standby import Changed, StandbyView
from node.zk import data

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def state(leader: int, epoch: int, version: int) -> LeadershipInfo:
    return LeadershipInfo(LeaderAndIsr(leader, epoch, (1, 2), version), 3)


def test_records_applied_in_order_leave_zookeepers_states() -> None:
    view = StandbyView()
    assert not view.loaded
    view.load({A: state(1, 0, 0)}, applied=10)
    assert view.apply(
        11, ChangeRecord(3, (PartitionChange(A, 0, state(2, 1, 1)), PartitionChange(B, -1, state(1, 0, 0))))
    )
    assert view.apply(12, ChangeRecord(3, (PartitionChange(A, 1, None),)))
    assert view.leadership == {B: state(1, 0, 0)} and view.applied == 12 and view.chain_breaks == 0
    assert view.partitions == {"t": {1}}, "the ids by topic follow the states"
    assert not view.apply(12, ChangeRecord(3, (PartitionChange(B, 0, None),))), "applied twice"
    assert view.leadership == {B: state(1, 0, 0)}


def test_a_missed_record_is_superseded_by_the_next_change_and_counted() -> None:
    view = StandbyView()
    view.load({A: state(1, 0, 0)}, applied=1)
    # The record that took A to version 1 was missed: version 2's state is whole.
    view.apply(3, ChangeRecord(4, (PartitionChange(A, 1, state(3, 2, 2)),)))
    assert view.leadership[A] == state(3, 2, 2) and view.chain_breaks == 1


def test_records_gone_unread_are_known_by_the_last_applied_no_longer_listed() -> None:
    view = StandbyView()
    assert view.missed([1, 2], 7), "a view never loaded has missed everything"
    view.load({}, applied=5, generation=7)
    assert not view.missed([3, 4, 5], 7) and not view.missed([5], 7)
    assert not view.missed([5, 9, 10], 7), "the last applied is listed: nothing after it went"
    assert view.missed([9, 10], 7), "5 went, and what came between may have"
    assert view.missed([], 7), "every record went, 5 among them"
    assert view.missed([0, 1, 2], 7), "numbered from 0 again: the parent was made again"
    assert view.missed([5, 9], 8), "another parent: a new numbering that may reach 5 again"
    assert view.unapplied([3, 5, 9, 7]) == [7, 9]
    empty = StandbyView()
    empty.load({}, applied=-1, generation=7)
    assert not empty.missed([], 7) and not empty.missed([0, 1], 7)
    assert empty.missed([1, 2], 7), "record 0 went unread"


def test_a_change_record_round_trips_and_anything_else_is_refused_in_one_line() -> None:
    recovering = LeadershipInfo(LeaderAndIsr(2, 7, (2,), 4, True), 5)
    changes = (
        PartitionChange(A, 3, recovering),
        PartitionChange(B, -1, state(1, 0, 0)),
        PartitionChange(A, 4, None),
    )
    record = ChangeRecord(5, changes)
    assert data.decode_change_record("c", data.encode_change_record(record)) == record
    assigned = ChangeRecord(5, (), ("t", "u"))
    assert data.decode_change_record("c", data.encode_change_record(assigned)) == assigned
    assert not assigned.starts_epoch and ChangeRecord(5, ()).starts_epoch
    many = ChangeRecord(
        5,
        tuple(
            PartitionChange(TopicPartition(f"topic-{i // 50:04d}", i % 50), i, state(1, 9, i + 1))
            for i in range(500)
        ),
    )
    assert len(data.encode_change_record(many)) < 40_000, "a multi-op's record stays far under jute.maxbuffer"
    bad_records = (
        b"",
        b"\x01",
        msgpack.packb([2, 5, []]),
        msgpack.packb([1, 5, [["t", 0, "x", None]]]),
        msgpack.packb([1, 5, [["t", 0, 1, [1, 2, [1], 3, "no", 5]]]]),
        msgpack.packb([1, 5, [], [7]]),
        msgpack.packb([1, 5, [], ["t"], "more"]),
    )
    for bad in bad_records:
        with pytest.raises(data.ZNodeDataError, match=r"^change-1: not a change record"):
            data.decode_change_record("change-1", bad)


def test_a_view_covers_an_epoch_only_if_every_controller_since_its_load_recorded() -> None:
    view = StandbyView()
    assert not view.covers(2), "never loaded"
    view.load({}, applied=0, controller_epoch=4, recorded=False)
    assert not view.covers(5), "loaded under a controller that did not record"
    view.apply(1, ChangeRecord(4, ()))
    assert view.covers(5), "it said so after the load: elected as the view loaded"
    view.load({}, applied=0, controller_epoch=4, recorded=True)
    assert view.covers(5), "the controller it was loaded under recorded, and none since"
    assert not view.covers(7), "epochs 5 and 6 went by without saying they record"
    view.apply(1, ChangeRecord(5, ()))
    view.apply(2, ChangeRecord(6, ()))
    assert view.covers(7) and view.epochs_started == {5, 6}
    fresh = StandbyView()
    fresh.load({}, applied=-1)
    assert fresh.covers(1), "no controller yet when it loaded: the first one's records are all"


def mark(sequence: int, generation: int = 7) -> AcknowledgedChanges:
    return AcknowledgedChanges(3, generation, sequence, {1: 10, 2: 20})


def test_a_view_tells_what_the_records_after_a_mark_changed() -> None:
    view = StandbyView()
    assert view.changed_after(mark(0)) is None, "never loaded"
    view.load({}, applied=5, generation=7)
    view.apply(6, ChangeRecord(3, (PartitionChange(A, -1, state(1, 0, 0)),)))
    view.apply(8, ChangeRecord(3, (), ("u",)))
    view.apply(9, ChangeRecord(3, (PartitionChange(B, -1, state(1, 0, 0)),)))
    assert view.changed_after(mark(9)) == Changed(set(), set())
    assert view.changed_after(mark(6)) == Changed({B}, {"u"})
    assert view.changed_after(mark(5)) == Changed({A, B}, {"u"})
    assert view.changed_after(mark(4)) is None, "loaded after the mark: what came between is unknown"
    assert view.changed_after(mark(9, generation=8)) is None, "another parent's numbering"


def test_a_view_forgets_the_oldest_records_beyond_what_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standby, "RECENT_PARTITIONS_KEPT", 2)
    view = StandbyView()
    view.load({}, applied=0, generation=7)
    for sequence in range(1, 4):
        tp = TopicPartition("t", sequence)
        view.apply(sequence, ChangeRecord(3, (PartitionChange(tp, -1, state(1, 0, 0)),)))
    assert view.recent_after == 1, "record 1 forgotten: two partitions are kept"
    assert view.changed_after(mark(0)) is None
    assert view.changed_after(mark(1)) == Changed({TopicPartition("t", 2), TopicPartition("t", 3)}, set())


def test_a_mark_of_acknowledged_changes_round_trips_and_anything_else_is_refused() -> None:
    assert data.decode_acknowledged_changes(data.encode_acknowledged_changes(mark(9))) == mark(9)
    assert data.encode_acknowledged_changes(None) == b"" and data.decode_acknowledged_changes(b"") is None
    for bad in (b"\x01", msgpack.packb([2, 3, 7, 9, []]), msgpack.packb([1, 3, 7, 9, [[1, "x"]]])):
        with pytest.raises(data.ZNodeDataError, match=r"^not a mark of acknowledged changes"):
            data.decode_acknowledged_changes(bad)
