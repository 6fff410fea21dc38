"""wait_event: a deadline on an event that never loses a cancellation (asyncio.wait_for on
Python 3.11 does, when the task is cancelled just as the event is set)."""

from __future__ import annotations

import asyncio

import pytest

from ascheduler.waits import wait_event


async def test_it_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert not await wait_event(event, 0.001)
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_event(event, 5.0)
    assert await wait_event(event, 0.0)  # already set: no wait


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
async def test_a_loop_cancelled_as_its_event_is_set_stops(steps: int) -> None:
    """The cancellation lands `steps` loop iterations after the event is set: whichever
    moment, the loop ends cancelled instead of going on."""
    event = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await wait_event(event, 10.0)
            event.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    for _ in range(3):
        await asyncio.sleep(0)
    event.set()
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5.0):  # a guard: a lost cancellation would loop forever
            await asyncio.shield(task)
    assert task.cancelled()
