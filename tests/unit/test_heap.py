"""The collector settings of a long-lived process."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from ascheduler import heap


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector as it was after the test; no automatic collection during it, so only the
    collections the test makes run (one falls due whenever the young generation's count
    crosses its threshold, wherever earlier tests left that count, and would free the test's
    garbage before `freeze` does)."""
    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    gc.disable()
    yield
    gc.enable()
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()


@pytest.mark.usefixtures("collector")
def test_tune_raises_the_young_threshold_and_keeps_the_older_ratios() -> None:
    gc.set_threshold(700, 10, 5)
    heap.tune()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 10, 5)


@pytest.mark.usefixtures("collector")
def test_tune_never_lowers_a_higher_threshold() -> None:
    gc.set_threshold(10 * heap.YOUNG_THRESHOLD, 10, 10)
    heap.tune()
    assert gc.get_threshold()[0] == 10 * heap.YOUNG_THRESHOLD


@pytest.mark.usefixtures("collector")
def test_freeze_collects_garbage_first_and_hides_the_survivors() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    gc.unfreeze()
    # No automatic collection until freeze() runs its own: one triggered by what earlier
    # tests allocated would free the dropped cycles first.
    gc.disable()
    try:
        kept = [Cycle() for _ in range(10)]
        dropped = [weakref.ref(Cycle()) for _ in range(10)]  # cycles only the collector frees
        assert all(ref() is not None for ref in dropped)
        heap.freeze()
    finally:
        gc.enable()
    assert all(ref() is None for ref in dropped)
    assert gc.get_freeze_count() > len(kept)
    assert not any(isinstance(o, Cycle) for o in gc.get_objects())  # the kept ones are frozen
    assert all(k.me is k for k in kept)
