"""`uninterruptible`: a lock write runs to completion whatever happens to its caller, and the
caller still learns it was cancelled, also when the cancellation and the write's end come in
one turn of the loop (its cleanup, releasing a lock that landed, depends on it)."""

from __future__ import annotations

import asyncio

import pytest

from ascheduler.locks.state import uninterruptible


async def test_a_cancelled_caller_waits_for_the_task_then_is_cancelled() -> None:
    inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    outer = asyncio.create_task(uninterruptible(inner))
    await asyncio.sleep(0)
    outer.cancel()
    await asyncio.sleep(0)
    assert not outer.done()  # still waiting for the write
    inner.set_result("landed")
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not inner.cancelled()


async def test_a_cancellation_arriving_as_the_task_finishes_is_not_swallowed() -> None:
    inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    outer = asyncio.create_task(uninterruptible(inner))
    await asyncio.sleep(0)
    inner.set_result("landed")  # the write ends ...
    outer.cancel()  # ... and its caller is cancelled in the same turn
    with pytest.raises(asyncio.CancelledError):
        await outer


async def test_without_a_cancellation_the_outcome_is_the_tasks() -> None:
    inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    outer = asyncio.create_task(uninterruptible(inner))
    await asyncio.sleep(0)
    inner.set_result("landed")
    assert await outer == "landed"
    failing: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    failing.set_exception(RuntimeError("refused"))
    with pytest.raises(RuntimeError, match="refused"):
        await uninterruptible(failing)
