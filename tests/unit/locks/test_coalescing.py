"""Holds shared by binds: lingering, parking and taking up, and what is never kept."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from ascheduler.locks.hold import HOLD_BUDGET, REUSE_MARGIN
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY
from tests.kit import FakeClock
from tests.unit.locks.fakeapi import FakeNodeApi
from tests.unit.locks.kit import ME, TIMEOUT, WANTED, a_pod, locks_for


async def test_a_hold_cancelled_twice_still_releases() -> None:
    api, clock = FakeNodeApi(patch_delay=0.05), FakeClock()
    locks = locks_for(api, clock)

    async def bind() -> None:
        async with locks.hold("n", a_pod()):
            await asyncio.sleep(10)

    task = asyncio.create_task(bind())
    await asyncio.sleep(0.02)  # the lock patch is in flight
    task.cancel()
    await asyncio.sleep(0.04)  # the lock landed; its release is in flight
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert api.log == [f"lock {ME}", "unlock"]
    assert api.annotations == {}
    assert locks.held == {}
    assert locks.leftovers == {}


async def test_a_hold_lingers_for_the_next_binds_and_goes_when_idle() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", a_pod("p0")) as first:
        assert not first.undisturbed
    assert api.log == [f"lock {ME}"]  # kept, not released
    assert api.annotations[DEFAULT_KEY] == first.value
    clock.advance(5.0)
    async with locks.hold("n", a_pod("p1")) as again:
        assert again is first  # taken up again: no lock, no unlock
        assert again.undisturbed  # held all along: nobody else bound under it
    await locks.tend(sweep=False)
    assert api.log == [f"lock {ME}"]  # idle only since p1's hold ended
    clock.advance(10.0)
    await locks.tend(sweep=False)
    assert api.log == [f"lock {ME}", "unlock"]
    assert DEFAULT_KEY not in api.annotations
    assert locks.held == {}


async def test_a_parked_hold_taken_up_while_another_is_let_go_is_skipped() -> None:
    """The background round lets one parked hold go (a write: other tasks run meanwhile)
    while a bind takes up another parked hold: the round goes on without it."""
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", a_pod()) as first:
        pass
    other = dataclasses.replace(first, node="m")
    locks._held["m"] = other
    locks._parked["m"] = (other, clock())
    locks.observe("n", {**api.annotations, WANTED: "instance-b"})

    def taken_up() -> None:  # a bind to m unparks its hold during n's release
        locks._parked.pop("m", None)

    api.on_patch = taken_up
    await locks.tend(sweep=False)  # never raises
    assert api.log[-1] == "unlock"
    assert "n" not in locks.held
    assert locks.held["m"] is other


async def test_a_spent_or_failed_hold_is_not_kept() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=TIMEOUT)
    with pytest.raises(RuntimeError, match="boom"):
        async with locks.hold("n", a_pod()):
            raise RuntimeError("boom")
    assert api.log == [f"lock {ME}", "unlock"]  # an error releases
    async with locks.hold("n", a_pod()) as first:
        pass
    # Too little write budget left to serve more: released on the next use, then taken anew.
    clock.advance(TIMEOUT * HOLD_BUDGET - REUSE_MARGIN)
    async with locks.hold("n", a_pod()) as second:
        assert second is not first
    assert api.log[2:] == [f"lock {ME}", "unlock", f"lock {ME}"]
    # The background loop lets it go on its own before its budget runs out.
    clock.advance(TIMEOUT * HOLD_BUDGET - REUSE_MARGIN)
    await locks.tend(sweep=False)
    assert api.log[-1] == "unlock"


async def test_hami_holds_and_shutdown_never_leave_a_lingering_lock() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    hami = locks_for(api, clock, key=HAMI_KEY, linger=10.0)
    async with hami.hold("n", a_pod()):
        pass
    assert api.log == ["lock ns,p0", "unlock"]  # one pod per hold: never kept
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", a_pod()):
        pass
    await locks.release_all()
    assert api.log[-1] == "unlock"
    assert locks.held == {}
