"""The collector settings of a long-lived process."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from ascheduler import heap


@pytest.fixture
def collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


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
    # No automatic collection may free the dropped cycles before `freeze` does (when one
    # runs depends on what the tests before this one allocated).
    gc.disable()
    try:
        kept = [Cycle() for _ in range(10)]
        dropped = [weakref.ref(Cycle()) for _ in range(10)]  # cycles only the collector frees
        assert all(ref() is not None for ref in dropped)
    finally:
        gc.enable()
    heap.freeze()
    assert all(ref() is None for ref in dropped)
    assert gc.get_freeze_count() > len(kept)
    assert not any(isinstance(o, Cycle) for o in gc.get_objects())  # the kept ones are frozen
    assert all(k.me is k for k in kept)
