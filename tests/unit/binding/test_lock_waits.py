"""Another instance's lock is a wait, not an error; a stopping instance lets every lock go.

With the in-memory API of `fakeapi` (the same paths run on the real plane in
tests/integration/binding/test_lock_waits.py): a pod that meets another instance's lock is
reported `Unschedulable` (never `SchedulerError`), waits out its backoff, and is retried as
soon as the lock object shows the lock let go; `release_all` clears held, parked and leftover
locks at once, leaves the record of the pods bound under them, and gives up within its bound.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from ascheduler.binding.binder import BindSettings, LockedBinder
from ascheduler.framework import Code, Status
from ascheduler.locks import LockContended, LockSettings, NodeLocks
from ascheduler.locks.keys import DEFAULT_KEY
from ascheduler.locks.values import format_time
from ascheduler.scheduler import Scheduler
from tests.kit import FakeClock, pod_info
from tests.kit.scheduling import Env, make_node, make_pod, pop
from tests.unit.locks.fakeapi import FakeNodeApi, Fault

ME = "instance-a"
OTHER = "instance-b"
BOUND = DEFAULT_KEY + "-bound"


def foreign_value() -> str:
    return f"{format_time(dt.datetime.now(dt.UTC), 1)},{OTHER}"


def locks_for(api: FakeNodeApi, clock: FakeClock, *, linger: float = 0.0) -> NodeLocks:
    settings = LockSettings(identity=ME, timeout=60.0, linger=linger, handover_wait=0.0)
    return NodeLocks(api, settings, clock=clock)  # type: ignore[arg-type]


async def test_release_all_lets_held_parked_and_leftover_locks_go_with_their_record() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", pod_info("p0", namespace="ns", uid="p0")) as hold:
        hold.bound_after = ("p0",)
    assert api.annotations[DEFAULT_KEY] == hold.value  # parked for the next binds
    assert await locks.release_all() == {}
    # Gone, and beside it the pods bound under it, for whoever takes it next.
    assert api.annotations == {BOUND: "p0"}
    assert locks.held == {}
    assert locks.leftovers == {}
    # A release that failed earlier (a leftover) goes too.
    locks = locks_for(api, clock)
    async with locks.hold("n", pod_info("p1", namespace="ns", uid="p1")) as hold:
        api.faults += [Fault("PATCH", "503", setting=False), Fault("GET", "503")] * 6
    assert locks.leftovers == {"n": hold.value}
    api.faults.clear()
    assert await locks.release_all() == {}
    assert DEFAULT_KEY not in api.annotations
    assert locks.leftovers == {}


async def test_release_all_gives_up_within_its_bound_and_names_what_it_left() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", pod_info("p0", namespace="ns", uid="p0")) as hold:
        pass
    api.patch_delay = 3600.0  # the API server stops answering writes
    async with asyncio.timeout(30):  # a bug fails the test instead of hanging it
        left = await locks.release_all(timeout=0.05)
    assert left == {"n": hold.value}
    assert locks.held == {}


async def test_release_all_clears_a_release_under_way_even_if_that_one_is_cut_short() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", pod_info("p0", namespace="ns", uid="p0")) as hold:
        pass
    # The background round lets the parked hold go; its write conflicts (a heartbeat) and
    # its read of the object is still out when the process starts to stop.
    api.faults.append(Fault("PATCH", "bump", setting=False))
    api.gate = asyncio.Event()
    releasing = asyncio.create_task(locks.release(hold))
    for _ in range(10):
        await asyncio.sleep(0)
    assert api.faults == []  # the conflicting write went out
    assert not releasing.done()  # and its read waits at the gate
    assert locks.held == {}  # out of the table while its release is under way
    stopping = asyncio.create_task(locks.release_all())
    await asyncio.sleep(0)
    releasing.cancel()  # the process stops: the background round is cancelled
    with pytest.raises(asyncio.CancelledError):
        await releasing
    api.gate.set()
    async with asyncio.timeout(30):
        assert await stopping == {}
    assert DEFAULT_KEY not in api.annotations
    assert api.log[-1] == "unlock"


async def test_a_pod_that_met_another_instances_lock_is_told_once_it_is_let_go() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    foreign = foreign_value()
    api.annotations[DEFAULT_KEY] = foreign
    locks = locks_for(api, clock)
    freed: list[str] = []
    locks.on_free = freed.extend
    with pytest.raises(LockContended) as met:
        await locks.acquire("n", pod_info("p1", namespace="ns", uid="p1"))
    assert met.value.value == foreign
    locks.observe("n", {DEFAULT_KEY: foreign}, watched=True)
    assert freed == []  # still held
    locks.observe("n", {}, watched=True)
    assert freed == ["p1"]
    locks.observe("n", {}, watched=True)
    assert freed == ["p1"]  # told once


def scheduler_with_binder(api: FakeNodeApi) -> tuple[Env, Scheduler]:
    env = Env(make_node("n", cpu="4"))
    settings = BindSettings(
        policy="all", lock=LockSettings(identity=ME, on="node", linger=0.0, handover_wait=0.0)
    )
    binder = LockedBinder(api, settings)  # type: ignore[arg-type]
    scheduler = Scheduler(
        frameworks=env.frameworks,
        cache=env.cache,
        queue=env.queue,
        writer=env.writer,
        binder=binder,
    )
    return env, scheduler


async def test_another_instances_lock_makes_the_pod_wait_unschedulable_then_retried_at_once() -> (
    None
):
    api = FakeNodeApi()
    foreign = foreign_value()
    api.annotations[DEFAULT_KEY] = foreign
    env, scheduler = scheduler_with_binder(api)
    pod = make_pod("p", cpu="1")
    env.queue.add(pod)
    qp = await pop(env.queue)
    assert qp is not None
    job = await scheduler.schedule_pod(qp)
    assert job is not None
    await scheduler.binding_cycle(job)
    # A wait, not an error: reported Unschedulable, saying who holds the node and that the
    # pod will be retried.
    conditions = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert [c.reason for c in conditions] == ["Unschedulable"]
    assert f"node n is locked by instance {OTHER}" in conditions[0].message
    assert "will be retried" in conditions[0].message
    assert scheduler.stats.errors == 0
    assert scheduler.stats.unschedulable == 1
    assert not env.cache.has_pod(pod.uid)
    # Back with backoff (not parked until the flush, not retried in a loop).
    assert env.queue.where(pod.uid) == "backoff"
    env.queue.flush_backoff_completed()
    assert env.queue.where(pod.uid) == "backoff"
    # The node's watch shows the lock let go: the pod is tried again now.
    assert api.annotations[DEFAULT_KEY] == foreign
    scheduler.binder.locks.observe("n", {}, watched=True)  # type: ignore[union-attr]
    assert env.queue.where(pod.uid) == "active"


def test_pending_is_a_rejection_not_an_error() -> None:
    status = Status.pending("waiting")
    assert status.code is Code.PENDING
    assert status.rejected
    assert not status.ok
