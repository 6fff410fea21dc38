"""What an instance sees of its lock objects (the staleness clock, the watch confirming a
hold) and the hand-over between instances."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascheduler.locks import LockContended, acquire, handover
from ascheduler.locks.keys import DEFAULT_KEY
from tests.kit import FakeClock
from tests.unit.locks.fakeapi import FakeNodeApi
from tests.unit.locks.kit import ME, TIMEOUT, WANTED, a_pod, locks_for


async def test_the_informer_starts_the_staleness_clock() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    value = "2026-11-23T00:00:00Z,instance-b"
    api.annotations[DEFAULT_KEY] = value
    locks = locks_for(api, clock)
    locks.observe("n", {DEFAULT_KEY: value})
    clock.advance(TIMEOUT)
    await locks.acquire("n", a_pod())  # stale at the first try: seen a timeout ago


async def test_a_hold_the_watch_has_confirmed_is_checked_by_the_watch_alone() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    hold = await locks.acquire("n", a_pod())
    locks.observe("n", {}, watched=True)  # the watch is behind: the state before our lock
    api.reads.clear()
    assert await locks.still_ours(hold)
    assert api.reads == ["/api/v1/nodes/n"]  # not confirmed yet: read
    locks.observe("n", {DEFAULT_KEY: hold.value}, watched=True)
    api.reads.clear()
    assert await locks.still_ours(hold)
    assert api.reads == []  # confirmed: the watch tells from now on
    # Someone clears the lock, and our own read (not the watch) is what shows it first:
    # a read proves nothing about order, so the hold is only lost once a read checks it.
    api.annotations.clear()
    locks.observe("n", {}, watched=False)
    assert not hold.lost
    locks.observe("n", {DEFAULT_KEY: "2026-11-22T05:00:01Z,instance-b"}, watched=True)
    assert hold.lost  # the watch showed another value after ours
    assert not await locks.still_ours(hold)
    assert api.reads == []
    assert not hold.reusable()


async def test_a_watch_showing_our_value_before_the_write_answers_confirms_the_hold() -> None:
    """The watch event of our lock write can be handled before the write's own answer is
    read: the hold, made only then, is confirmed at once, not left to read forever."""
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    patch = api.patch

    async def patch_then_watch(path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        answer = await patch(path, body, content_type)
        locks.observe("n", dict(api.annotations), watched=True)  # the event comes first
        return answer

    api.patch = patch_then_watch  # type: ignore[method-assign]
    hold = await locks.acquire("n", a_pod())
    assert hold.confirmed
    api.reads.clear()
    assert await locks.still_ours(hold)
    assert api.reads == []
    # Our own read showing the value first is no such proof: the next hold reads.
    await locks.release(hold)
    api.patch = patch  # type: ignore[method-assign]
    locks.observe("n", {}, watched=True)
    second = await locks.acquire("n", a_pod("p1"))
    locks.observe("n", {DEFAULT_KEY: second.value}, watched=False)
    assert not second.confirmed


async def test_a_watch_showing_another_value_before_ours_leaves_the_hold_alone() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    first = await locks.acquire("n", a_pod())
    await locks.release(first)
    hold = await locks.acquire("n", a_pod("p1"))
    # The watch catches up in order: our earlier hold, its release, then this one.
    locks.observe("n", {DEFAULT_KEY: first.value}, watched=True)
    locks.observe("n", {}, watched=True)
    assert not hold.lost
    assert not hold.confirmed
    locks.observe("n", {DEFAULT_KEY: hold.value}, watched=True)
    assert hold.confirmed
    assert not hold.lost
    api.reads.clear()
    assert await locks.still_ours(hold)
    assert api.reads == []


async def test_another_instance_asking_ends_a_lingering_hold_at_once() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    other = locks_for(api, clock, identity="instance-b")
    async with locks.hold("n", a_pod()):
        pass
    # The other instance meets our lock, and asks for it beside it.
    with pytest.raises(LockContended, match="instance instance-a"):
        await other.acquire("n", a_pod())
    assert api.annotations[WANTED] == "instance-b"
    # Our informer shows the request: the parked hold is let go without waiting.
    locks.observe("n", dict(api.annotations))
    await locks.tend(sweep=False)
    assert api.log[-2:] == ["asked", "unlock"]
    assert WANTED not in api.annotations  # the release clears the request
    hold = await other.acquire("n", a_pod())
    assert api.annotations == {DEFAULT_KEY: hold.value}


async def test_a_bind_meeting_another_instances_lock_waits_for_the_hand_over() -> None:
    """It asks for the lock, and takes it once the holder lets it go (the informer shows the
    release), instead of failing back to the queue."""
    api, clock = FakeNodeApi(), FakeClock()
    holder = locks_for(api, clock, identity="instance-b", linger=10.0)
    waiter = locks_for(api, clock, handover_wait=30.0)
    async with holder.hold("n", a_pod("theirs")):
        pass  # parked: lingering for its next binds
    taking = asyncio.create_task(waiter.acquire("n", a_pod()))
    for _ in range(100):  # until it has read the lock and asked
        if api.annotations.get(WANTED) == ME:
            break
        await asyncio.sleep(0)
    assert api.annotations.get(WANTED) == ME
    assert not taking.done()
    # The holder's informer shows the request: the parked hold is let go; the waiter's
    # informer shows the release.
    holder.observe("n", dict(api.annotations))
    await holder.tend(sweep=False)
    waiter.observe("n", dict(api.annotations))
    hold = await taking
    assert api.annotations == {DEFAULT_KEY: hold.value}
    assert api.log[-3:] == ["asked", "unlock", f"lock {ME}"]


async def test_a_hand_over_that_never_comes_fails_after_the_attempts() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    api.annotations[DEFAULT_KEY] = "2026-11-23T00:00:00Z,instance-b"
    waiter = locks_for(api, clock, handover_wait=0.001)
    with pytest.raises(LockContended, match="instance instance-b"):
        await waiter.acquire("n", a_pod())
    assert api.log == ["asked"] * acquire.ATTEMPTS  # it looked, and asked, each time
    assert api.annotations[DEFAULT_KEY].endswith("instance-b")


async def test_a_request_seen_while_the_hold_serves_releases_it_after() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", a_pod()):
        locks.observe("n", {**api.annotations, WANTED: "instance-b"})
    assert api.log == [f"lock {ME}", "unlock"]  # not parked
    locks.observe("n", {WANTED: ME})  # our own request is not one to answer
    clock.advance(handover.YIELD_SECONDS)  # (and the other instance has had its turn)
    async with locks.hold("n", a_pod()):
        pass
    assert api.log[-1] == f"lock {ME}"  # parked


async def test_after_letting_go_for_another_instance_holds_do_not_linger_for_a_while() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock, linger=10.0)
    async with locks.hold("n", a_pod()):
        pass
    locks.observe("n", {**api.annotations, WANTED: "instance-b"})
    await locks.tend(sweep=False)
    assert api.log == [f"lock {ME}", "unlock"]
    locks.observe("n", {})  # the request went with our release
    async with locks.hold("n", a_pod()):
        pass
    assert api.log[-1] == "unlock"  # released at once: the other instance's turn comes
    clock.advance(handover.YIELD_SECONDS)
    await locks.tend(sweep=False)
    async with locks.hold("n", a_pod()):
        pass
    assert api.log[-1] == f"lock {ME}"  # lingering again
