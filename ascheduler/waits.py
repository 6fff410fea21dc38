"""Waiting for an event with a deadline, without losing a cancellation.

On Python 3.11, `asyncio.wait_for(event.wait(), timeout)` returns normally when the task is
cancelled just as the event is set (the inner wait has finished, so its result wins): the
cancellation is lost, and a loop built on it never stops. A task group cancelling such a
loop then waits for it forever. `asyncio.timeout` keeps every cancellation that is not its
own.
"""

from __future__ import annotations

import asyncio
import contextlib


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `event`; whether it is set."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()
