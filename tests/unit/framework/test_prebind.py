"""The registry of pods in PreBind: cancellation while PreBind runs, after it, and the
binding cycle's own cancellation."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from ascheduler.framework import Code, Status
from ascheduler.framework.prebind import PodInPreBind, PodsInPreBind


async def test_a_cancelled_pre_bind_fails_as_the_plugin_it_stopped() -> None:
    entry = PodInPreBind("uid-v")
    started, stopped = asyncio.Event(), asyncio.Event()

    async def pre_bind() -> Status:
        entry.plugin = "VolumeBinding"
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()  # the plugin's own cleanup runs
        return Status()

    running = asyncio.create_task(entry.run(pre_bind()))
    await started.wait()
    assert entry.cancel_pod("preempted by DefaultPreemption")
    status = await asyncio.wait_for(running, 5)
    assert stopped.is_set()
    assert (status.code, status.message) == (
        Code.ERROR,
        'running PreBind plugin "VolumeBinding": preempted by DefaultPreemption',
    )
    assert not entry.mark_prebound()
    # Cancelled twice: still true, the first cause kept.
    assert entry.cancel_pod("preempted by Other")
    assert entry.cause == "preempted by DefaultPreemption"


async def test_a_pre_bind_that_finishes_anyway_fails_with_the_cause() -> None:
    """A plugin that does not stop (kube-scheduler's PreBind ignoring its context) ends,
    but `MarkPrebound` refuses it: the cycle fails with the cause alone."""
    entry = PodInPreBind("uid-v")
    started = asyncio.Event()

    async def stubborn() -> Status:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return Status()

    running = asyncio.create_task(entry.run(stubborn()))
    await started.wait()
    assert entry.cancel_pod("preempted by DefaultPreemption")
    status = await asyncio.wait_for(running, 5)
    assert (status.code, status.message) == (Code.ERROR, "preempted by DefaultPreemption")


async def test_a_pod_past_pre_bind_cannot_be_cancelled() -> None:
    entry = PodInPreBind("uid-v")

    async def quick() -> Status:
        return Status()

    assert (await entry.run(quick())).ok
    assert entry.finished
    assert not entry.cancel_pod("preempted by DefaultPreemption")
    assert entry.cause is None


async def test_a_failed_pre_bind_keeps_its_status() -> None:
    entry = PodInPreBind("uid-v")

    async def failing() -> Status:
        return Status.error("binding volumes: boom")

    status = await entry.run(failing())
    assert status.message == "binding volumes: boom"
    assert not entry.finished  # never prebound: a preemptor may still cancel it (no-op)


async def test_the_binding_cycles_own_cancellation_still_propagates() -> None:
    """Shutdown cancels the binding cycle: PreBind stops and the cycle sees CancelledError,
    not a failed status, even when a preemption cancelled the pod as well."""
    for also_preempted in (False, True):
        entry = PodInPreBind("uid-v")
        started = asyncio.Event()

        async def blocked(started: asyncio.Event) -> Status:
            started.set()
            await asyncio.Event().wait()
            return Status()

        cycle = asyncio.create_task(entry.run(blocked(started)))
        await started.wait()
        if also_preempted:
            entry.cancel_pod("preempted by DefaultPreemption")
        cycle.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cycle


async def test_the_registry_keeps_a_later_cycles_entry() -> None:
    pods = PodsInPreBind()
    first = pods.add("uid-v")
    second = pods.add("uid-v")  # the pod's next cycle
    pods.remove(first)
    assert pods.get("uid-v") is second
    pods.remove(second)
    assert pods.get("uid-v") is None
    assert len(pods) == 0
