"""fast_loop's garbage-collector settings: calmer inside the block, the caller's own put back after it."""

from __future__ import annotations

import gc

from evalkit.eventloop import GC_YOUNG_THRESHOLD, calm_gc, fast_loop


def test_fast_loop_freezes_and_raises_the_young_threshold_then_puts_both_back() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with fast_loop():
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
        assert gc.get_freeze_count() > frozen  # what existed is out of the collector's walks
        with calm_gc():  # nested: the outer block's settings stay
            assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
        assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0 or gc.get_freeze_count() == frozen


def test_calm_gc_leaves_a_disabled_collector_alone() -> None:
    before = gc.get_threshold()
    gc.disable()
    try:
        with calm_gc():
            assert gc.get_threshold() == before
    finally:
        gc.enable()
