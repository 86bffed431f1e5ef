import random

from actors.base.ports import TopicPartition
from actors.replica.backlog import Backlog


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in partitions]


def test_a_backlog_hands_out_its_smallest_members_a_slice_at_a_time() -> None:
    backlog = Backlog(tps(5, 3, 9))
    backlog.update(tps(1, 3, 7))
    backlog.add(TopicPartition("t", 2))
    assert len(backlog) == 6
    assert backlog.take(2) == tps(1, 2)
    assert backlog.take(3) == tps(3, 5, 7)
    assert backlog.take(10) == tps(9)
    assert not backlog and backlog.take(1) == []


def test_a_discarded_member_is_not_handed_out_unless_added_again() -> None:
    backlog = Backlog(tps(1, 2, 3))
    backlog.discard(TopicPartition("t", 1))
    backlog.discard(TopicPartition("t", 2))
    backlog.add(TopicPartition("t", 2))
    assert TopicPartition("t", 1) not in backlog
    assert backlog.take(5) == tps(2, 3)


def test_a_backlog_hands_out_what_a_sorted_set_would_under_any_mix_of_changes() -> None:
    rng = random.Random(7)
    backlog, model = Backlog(), set()
    for _ in range(20_000):
        tp = TopicPartition(f"t{rng.randrange(3)}", rng.randrange(300))
        match rng.randrange(4):
            case 0 | 1:
                backlog.add(tp)
                model.add(tp)
            case 2:
                backlog.discard(tp)
                model.discard(tp)
            case 3:
                limit = rng.randrange(1, 20)
                expected = sorted(model)[:limit]
                assert backlog.take(limit) == expected
                model.difference_update(expected)
        assert len(backlog) == len(model)
    # Leftovers of discarded members do not pile up.
    assert len(backlog._heap) <= 2 * len(model) + 1024
