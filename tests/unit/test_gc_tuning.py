"""The garbage collector's tuning (node/broker/gc_tuning.py): a full collection's survivors
are frozen, and nothing else; frozen objects are still freed when their last reference goes;
every collection's pause is measured and exported."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest

from node.broker.gc_tuning import THRESHOLDS, _FreezeAfterFullCollection, tune_gc
from node.metrics.http import registry_of
from node.metrics.loop_lag import COLLECTIONS, GC_PAUSE_MAX, LoopLagMonitor


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def tuned() -> Iterator[None]:
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    gc.collect()
    gc.unfreeze()
    tune_gc()
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_tuning_twice_installs_one_callback(tuned: None) -> None:
    tune_gc()
    assert sum(isinstance(c, _FreezeAfterFullCollection) for c in gc.callbacks) == 1
    assert gc.get_threshold() == THRESHOLDS


def test_a_full_collection_freezes_what_survived_it_and_reclaims_the_rest(tuned: None) -> None:
    live = Node()
    garbage_a, garbage_b = Node(), Node()
    garbage_a.other, garbage_b.other = garbage_b, garbage_a  # a cycle only a collection frees
    gone = weakref.ref(garbage_a)
    del garbage_a, garbage_b
    gc.collect(2)
    assert gone() is None
    assert gc.get_freeze_count() > 0
    assert not any(o is live for o in gc.get_objects())  # frozen: no generation holds it


def test_a_younger_collection_freezes_nothing(tuned: None) -> None:
    gc.collect(1)
    assert gc.get_freeze_count() == 0


def test_a_frozen_object_is_freed_with_its_last_reference(tuned: None) -> None:
    frozen = Node()
    gc.collect(2)
    assert gc.get_freeze_count() > 0
    ref = weakref.ref(frozen)
    del frozen
    assert ref() is None


def test_the_longest_collection_is_exported(tuned: None) -> None:
    gc.collect(2)
    assert COLLECTIONS.max() > 0
    text = generate_latest(registry_of(LoopLagMonitor())).decode()
    values = {
        line.split()[0]: float(line.split()[1]) for line in text.splitlines() if not line.startswith("#")
    }
    assert values[GC_PAUSE_MAX] == COLLECTIONS.max() > 0
