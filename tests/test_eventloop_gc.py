"""fast_loop's garbage-collector settings: no collections inside a command's block (the sim's: fewer), the
caller's own put back after it."""

from __future__ import annotations

import gc

from evalkit.eventloop import GC_YOUNG_THRESHOLD, calm_gc, fast_loop, no_gc_pauses


def test_fast_loop_turns_collection_off_and_freezes_then_puts_both_back() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with fast_loop():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > frozen  # what existed is out of the collector's walks
        with no_gc_pauses():  # nested: the outer block's settings stay
            assert not gc.isenabled()
        assert not gc.isenabled()
        cycle: list = []
        cycle.append(cycle)  # a reference cycle left behind by the block
        del cycle
        assert gc.get_count()[0] > 0
    assert gc.isenabled() and gc.get_threshold() == before
    assert gc.get_freeze_count() == 0 or gc.get_freeze_count() == frozen
    assert gc.collect() >= 1  # the cycle the block left is collected once the block is over


def test_the_sims_loop_keeps_collecting_with_a_higher_young_threshold() -> None:
    before = gc.get_threshold()
    with fast_loop(enabled=False):
        assert gc.isenabled() and gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
        with calm_gc():  # nested: the outer block's settings stay
            assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
    assert gc.get_threshold() == before


def test_both_leave_a_disabled_collector_alone() -> None:
    before = gc.get_threshold()
    gc.disable()
    try:
        with calm_gc():
            assert gc.get_threshold() == before
        with no_gc_pauses():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
