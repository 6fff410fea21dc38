"""The background round: failed releases retried, parked holds let go, stale locks of
others cleared."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from ascheduler.locks.keys import DEFAULT_KEY
from tests.kit import FakeClock
from tests.unit.locks.fakeapi import FakeNodeApi, Fault
from tests.unit.locks.kit import ME, TIMEOUT, a_pod, locks_for


async def test_a_failed_release_is_retried_in_the_background() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    async with locks.hold("n", a_pod()) as hold:
        api.faults += [Fault("PATCH", "503", setting=False), Fault("GET", "503")] * 6
    assert api.annotations == {DEFAULT_KEY: hold.value}  # the release did not land...
    assert locks.leftovers == {"n": hold.value}  # ...and is not forgotten
    api.faults.clear()
    await locks.tend(sweep=False)  # not due yet: backing off
    assert locks.leftovers == {"n": hold.value}
    clock.advance(1)
    await locks.tend(sweep=False)
    assert api.annotations == {}
    assert locks.leftovers == {}
    assert locks.stats.released_late == 1


async def test_the_sweep_clears_stale_locks_of_others_only() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    value = "2026-11-23T00:00:00Z,instance-b"
    api.annotations[DEFAULT_KEY] = value
    locks = locks_for(api, clock)
    locks.observe("n", {DEFAULT_KEY: value})
    await locks.tend()
    assert api.annotations == {DEFAULT_KEY: value}  # not stale yet
    clock.advance(TIMEOUT)
    await locks.tend()
    assert api.annotations == {}
    assert locks.stats.stale_cleared == 1
    # Our own lock, however long we have held it, is never swept.
    hold = await locks.acquire("n", a_pod())
    clock.advance(TIMEOUT * 2)
    await locks.tend()
    assert api.annotations == {DEFAULT_KEY: hold.value}


async def test_a_node_deleted_while_its_leftover_is_retried() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    async with locks.hold("n", a_pod()):
        api.faults += [Fault("PATCH", "503", setting=False), Fault("GET", "503")] * 6
    api.faults.clear()
    clock.advance(1)
    api.gate = asyncio.Event()
    retry = asyncio.create_task(locks.tend(sweep=False))
    await asyncio.sleep(0.01)  # the retry is reading the node
    locks.forget_node("n")  # the informer saw the node deleted
    api.faults.append(Fault("GET", "404"))
    api.gate.set()
    await asyncio.wait_for(retry, 10)  # no KeyError, nothing re-armed for a forgotten node
    assert locks.leftovers == {}
    assert locks._retry_at == {}


async def test_parking_a_hold_wakes_the_background_loop_only_when_due_sooner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hold parked after its binds wakes `run()` only when it is due before the round that
    loop waits for: not once per bind (each round goes over every parked hold)."""
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    rounds = 0
    tend = locks.tend

    async def counted(*, sweep: bool = True) -> None:
        nonlocal rounds
        rounds += 1
        await tend(sweep=sweep)

    monkeypatch.setattr(locks, "tend", counted)
    runner = asyncio.create_task(locks.run())
    await asyncio.sleep(0)
    for _ in range(20):
        async with locks.hold("n", a_pod()):
            pass
        for _ in range(3):
            await asyncio.sleep(0)
        clock.advance(0.1)
    runner.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    assert api.log == [f"lock {ME}"]  # one hold served all twenty, parked between them
    assert rounds == 1  # the first park: due before the sweep the loop waited for
