"""Lock values, durations, settings from the environment, and the fit re-validation."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
from typing import Any

import pytest

from ascheduler.binding.binder import BindSettings
from ascheduler.binding.revalidation import NodeView
from ascheduler.durations import parse_seconds
from ascheduler.kube import KubeError
from ascheduler.locks import Known, LockContended, LockSettings, NodeLocks, acquire, handover, hold
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY
from ascheduler.locks.settings import DEFAULT_TIMEOUT, EXPIRE_ENV
from ascheduler.locks.values import Holder, format_time, parse_time
from ascheduler.model import PodInfo
from tests.kit import FakeClock, pod_info
from tests.unit.binding.fakeapi import FakeNodeApi, Fault


def test_values_parse_in_each_format() -> None:
    when = dt.datetime(2026, 11, 22, 5, 0, 1, tzinfo=dt.UTC)
    assert Holder.parse("2026-11-22T05:00:01Z,ns,pod-a") == Holder(when, "ns", "pod-a")
    assert Holder.parse("2026-11-22T05:00:01Z,inst-1") == Holder(when, instance="inst-1")
    assert Holder.parse("2026-11-22T05:00:01Z") == Holder(when)  # HAMi's legacy value
    offset = Holder.parse("2026-11-22T07:00:01+02:00,ns,p")
    assert offset is not None
    assert offset.time == when
    # Go's RFC 3339 reading: up to nine fraction digits, which HAMi parses as well.
    nanos = Holder.parse("2026-11-22T05:00:01.123456789Z,inst")
    assert nanos is not None
    assert nanos.time == when.replace(microsecond=123456)


def test_written_values_are_unique_and_parse_back() -> None:
    when = dt.datetime(2026, 11, 22, 5, 0, 1, 250000, tzinfo=dt.UTC)
    stamp = format_time(when, 7)
    assert stamp == "2026-11-22T05:00:01.250000007Z"
    assert parse_time(stamp) == when
    assert len({format_time(when, n) for n in range(1000)}) == 1000


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "garbage",
        "yesterday,ns,pod",
        "2026-11-22T05:00:01,ns,pod",
        "2026-11-22T05:00:01Z,,pod",
        "2026-11-22T05:00:01Z,",
        "2026-11-22T05:00:01Z,ns,pod,extra",
        "2026-13-40T05:00:01Z,ns,pod",
    ],
)
def test_garbage_values_do_not_parse(garbage: str) -> None:
    assert Holder.parse(garbage) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300.0),
        ("2.5", 2.5),
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
    ],
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("bad", ["", "five", "5x", "m5", "1m30"])
def test_parse_seconds_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(bad)


def test_timeout_from_env_and_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXPIRE_ENV, raising=False)
    assert LockSettings.from_env().timeout == DEFAULT_TIMEOUT
    monkeypatch.setenv(EXPIRE_ENV, "2m")
    assert LockSettings.from_env().timeout == 120.0
    assert LockSettings.from_env(timeout=7.0).timeout == 7.0  # the flag wins
    monkeypatch.setenv(EXPIRE_ENV, "soon")
    with pytest.raises(ValueError, match="not a duration"):
        LockSettings.from_env()


@pytest.mark.parametrize("bad", ["0", "0s", "0.0"])
def test_a_timeout_of_zero_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(EXPIRE_ENV, bad)
    with pytest.raises(ValueError, match="must be positive"):
        LockSettings.from_env()
    with pytest.raises(ValueError, match="must be positive"):
        LockSettings(timeout=-1.0)


@pytest.mark.parametrize("bad", ["-5", "-5s"])
def test_a_negative_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(EXPIRE_ENV, bad)
    with pytest.raises(ValueError, match=r"must be positive|not a duration"):
        LockSettings.from_env()


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        BindSettings(policy="sometimes")


def _pod(uid: str, requests: dict[str, str], phase: str = "Running") -> Any:
    cpu = requests.get("cpu")
    extra = {k: v for k, v in requests.items() if k != "cpu"}
    return pod_info(uid, namespace="x", uid=uid, cpu=cpu, extra=extra, phase=phase)


def shortfall(pod: PodInfo, allocatable: dict[str, int], on_node: list[PodInfo]) -> list[str]:
    """What a hold's re-validation finds `pod` short of, on a view of `on_node`."""
    return NodeView.of(on_node, fresh=True).usage.shortfall(pod, allocatable)


def test_shortfall_counts_the_pods_already_on_the_node() -> None:
    alloc = {"cpu": 4000, "memory": 8 << 30, "pods": 3, "nvidia.com/gpu": 2}
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    incoming = _pod("new", gpu)
    assert shortfall(incoming, alloc, [_pod("a", gpu)]) == []
    assert shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu)]) == ["nvidia.com/gpu"]
    # Finished pods and the pod itself do not count.
    assert (
        shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu, "Succeeded"), _pod("new", gpu)])
        == []
    )
    crowded = [_pod(f"p{i}", {"cpu": "1500m"}) for i in range(3)]
    assert shortfall(incoming, alloc, crowded) == ["pods", "cpu"]
    # A pod seen twice (the cache's assumed copy and the bind's own) counts once.
    twice = _pod("a", gpu)
    assert shortfall(incoming, alloc, [twice, _pod("a", gpu)]) == []


# -- NodeLocks against an in-memory node -----------------------------------------------------


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry pauses of a millisecond: these tests count attempts, not time."""
    monkeypatch.setattr(acquire, "RETRY_DELAY", 0.001)


ME = "instance-a"
TIMEOUT = 60.0


def a_pod(name: str = "p0", namespace: str = "ns") -> PodInfo:
    return pod_info(name, namespace=namespace, uid=name)


def locks_for(
    api: FakeNodeApi,
    clock: FakeClock,
    *,
    key: str = DEFAULT_KEY,
    identity: str = ME,
    linger: float = 0.0,
    handover_wait: float = 0.0,
) -> NodeLocks:
    """Locks as an instance keeps them; a bind meeting another's lock fails at once unless
    `handover_wait` is given."""
    settings = LockSettings(
        key=key, timeout=TIMEOUT, identity=identity, linger=linger, handover_wait=handover_wait
    )
    return NodeLocks(api, settings, clock=clock)  # type: ignore[arg-type]


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


async def test_the_next_hold_takes_over_its_own_leftover_at_once() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    async with locks.hold("n", a_pod()):
        api.faults += [Fault("PATCH", "503", setting=False), Fault("GET", "503")] * 6
    api.faults.clear()
    async with locks.hold("n", a_pod("p1")) as second:
        assert api.annotations == {DEFAULT_KEY: second.value}
        assert locks.leftovers == {}
    assert api.annotations == {}
    assert locks.stats.contended == 0


async def test_an_acquire_whose_answer_was_lost_knows_its_own_lock() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    api.faults.append(Fault("PATCH", "lost", setting=True))  # lands, answer lost
    hold = await locks.acquire("n", a_pod())
    assert api.annotations == {DEFAULT_KEY: hold.value}
    assert api.log == [f"lock {ME}"]  # written once, then recognised on the read
    assert hold.version == str(api.rv)
    await locks.release(hold)
    assert api.annotations == {}


async def test_a_heartbeat_between_read_and_patch_is_read_again() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    api.faults += [Fault("PATCH", "bump", setting=True), Fault("PATCH", "bump", setting=True)]
    hold = await locks.acquire("n", a_pod())
    assert api.annotations == {DEFAULT_KEY: hold.value}
    assert locks.stats.contended == 0


async def test_a_heartbeat_before_the_release_is_read_again() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    hold = await locks.acquire("n", a_pod())
    api.faults.append(Fault("PATCH", "bump", setting=False))
    await locks.release(hold)
    assert api.annotations == {}
    assert locks.leftovers == {}


async def test_another_instances_lock_is_respected_until_seen_stale() -> None:
    """An ancient time inside the value is not believed (clocks may disagree): staleness is
    counted on our clock from when we first saw the value."""
    api, clock = FakeNodeApi(), FakeClock()
    api.annotations[DEFAULT_KEY] = "2000-01-01T00:00:00Z,instance-b"
    locks = locks_for(api, clock)
    with pytest.raises(LockContended, match="instance instance-b"):
        await locks.acquire("n", a_pod())
    clock.advance(TIMEOUT - 1)
    with pytest.raises(LockContended):
        await locks.acquire("n", a_pod())
    clock.advance(1)
    hold = await locks.acquire("n", a_pod())
    assert api.annotations == {DEFAULT_KEY: hold.value}
    assert locks.stats.stale_recovered == 1


async def test_a_new_value_restarts_the_staleness_clock() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    api.annotations[DEFAULT_KEY] = "2026-11-23T00:00:00Z,instance-b"
    locks = locks_for(api, clock)
    with pytest.raises(LockContended):
        await locks.acquire("n", a_pod())
    clock.advance(TIMEOUT * 0.9)
    api.annotations[DEFAULT_KEY] = "2026-11-23T00:00:05Z,instance-b"  # its next hold
    with pytest.raises(LockContended):
        await locks.acquire("n", a_pod())
    clock.advance(TIMEOUT * 0.9)
    with pytest.raises(LockContended):
        await locks.acquire("n", a_pod())


async def test_the_informer_starts_the_staleness_clock() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    value = "2026-11-23T00:00:00Z,instance-b"
    api.annotations[DEFAULT_KEY] = value
    locks = locks_for(api, clock)
    locks.observe("n", {DEFAULT_KEY: value})
    clock.advance(TIMEOUT)
    await locks.acquire("n", a_pod())  # stale at the first try: seen a timeout ago


async def test_a_lock_naming_an_instance_is_never_dangling() -> None:
    """The coalesced-hold case: whatever happens to any pod, another instance does not take
    the lock over (there is no pod to look up)."""
    api, clock = FakeNodeApi(), FakeClock()
    a = locks_for(api, clock, identity="instance-a")
    b = locks_for(api, clock, identity="instance-b")
    await a.acquire("n", a_pod("first"))
    assert api.pods == {}  # the first pod is gone
    with pytest.raises(LockContended, match="instance instance-a"):
        await b.acquire("n", a_pod("other"))
    assert b.stats.dangling_recovered == 0


@pytest.mark.parametrize(
    ("pod_state", "taken"),
    [(None, True), ({"status": {"phase": "Succeeded"}}, True), ({"status": {}}, False)],
)
async def test_a_lock_naming_a_pod_is_dangling_once_the_pod_is_gone(
    pod_state: dict[str, object] | None, taken: bool
) -> None:
    api, clock = FakeNodeApi(), FakeClock()
    api.annotations[HAMI_KEY] = "2026-11-23T00:00:00Z,team,trainer-0"
    if pod_state is not None:
        api.pods[("team", "trainer-0")] = {"metadata": {}, **pod_state}
    locks = locks_for(api, clock, key=HAMI_KEY)
    if taken:
        hold = await locks.acquire("n", a_pod())
        assert hold.value.endswith(",ns,p0")  # HAMi's format, naming the pod it binds
        assert locks.stats.dangling_recovered == 1
    else:
        with pytest.raises(LockContended, match="pod team/trainer-0"):
            await locks.acquire("n", a_pod())


@pytest.mark.parametrize("value", ["2026-11-23T00:00:00Z", "not a lock at all"])
async def test_legacy_and_unparseable_values_are_respected_until_stale(value: str) -> None:
    api, clock = FakeNodeApi(), FakeClock()
    api.annotations[HAMI_KEY] = value
    locks = locks_for(api, clock, key=HAMI_KEY)
    with pytest.raises(LockContended):
        await locks.acquire("n", a_pod())
    clock.advance(TIMEOUT)
    await locks.acquire("n", a_pod())
    assert locks.stats.stale_recovered == 1


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


async def test_a_hold_knows_its_write_budget() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    hold = await locks.acquire("n", a_pod())
    assert hold.writable()
    assert await locks.still_ours(hold)
    clock.advance(TIMEOUT * 0.5)
    assert not hold.writable()
    assert not await locks.still_ours(hold)
    assert hold.remaining() == pytest.approx(TIMEOUT * 0.25)


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


async def test_an_acquire_that_gives_up_after_its_patch_landed_leaves_no_orphan() -> None:
    """The patch lands, its answer is lost, and every read after it fails: acquire gives up,
    but the value it may have written is kept as a leftover and cleared in the background."""
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    api.faults += [Fault("PATCH", "lost", setting=True)] + [Fault("GET", "503")] * 20
    with pytest.raises(KubeError):
        # The cache shows the node unlocked: the patch goes out first, then only reads fail.
        await locks.acquire("n", a_pod(), known=Known(str(api.rv), {}))
    value = api.annotations[DEFAULT_KEY]
    assert locks.leftovers == {"n": value}
    api.faults.clear()
    clock.advance(1)
    await locks.tend(sweep=False)
    assert api.annotations == {}
    assert locks.leftovers == {}


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


async def test_a_release_never_raises_whatever_fails() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = locks_for(api, clock)
    hold = await locks.acquire("n", a_pod())
    api.crash = RuntimeError("a bug below the client")
    await locks.release(hold)
    assert locks.leftovers == {"n": hold.value}
    await locks.tend()  # neither does the background work
    api.crash = None
    clock.advance(1)
    await locks.tend()
    assert api.annotations == {}


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


# -- lingering holds ----------------------------------------------------------------------------

WANTED = DEFAULT_KEY + "-wanted"


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
    clock.advance(TIMEOUT * hold.HOLD_BUDGET - hold.REUSE_MARGIN)
    async with locks.hold("n", a_pod()) as second:
        assert second is not first
    assert api.log[2:] == [f"lock {ME}", "unlock", f"lock {ME}"]
    # The background loop lets it go on its own before its budget runs out.
    clock.advance(TIMEOUT * hold.HOLD_BUDGET - hold.REUSE_MARGIN)
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


LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


def lease_locks(api: FakeNodeApi, clock: FakeClock, *, replace: bool = False) -> NodeLocks:
    """Locks on Leases (made on first use), written as the binder writes them with `replace`."""

    async def create(name: str) -> None:
        await api.post(LEASES, {"metadata": {"name": name}})

    settings = LockSettings(timeout=TIMEOUT, identity=ME, linger=0.0, handover_wait=0.0)
    return NodeLocks(
        api,  # type: ignore[arg-type]
        settings,
        clock=clock,
        path=lambda name: f"{LEASES}/{name}",
        create=create,
        replace=replace,
    )


async def test_a_hint_for_a_lock_object_not_made_yet_makes_it_and_locks() -> None:
    api, clock = FakeNodeApi(), FakeClock()
    locks = lease_locks(api, clock)
    # A hint (the Node's version, say) for a Lease that does not exist: its patch meets 404.
    hold = await locks.acquire("n", a_pod(), known=Known("7", {}))
    assert api.lease_exists
    assert api.annotations[DEFAULT_KEY] == hold.value


async def test_lock_writes_on_a_lease_known_whole_replace_it() -> None:
    """With `replace`, a lock write whose object is known whole at the version it is guarded
    by sends that object back with the lock set (its other fields kept, managedFields left to
    the API server); one known at another version, or not whole, is patched; a replaced write
    that conflicts reads the object and replaces what it read."""
    api, clock = FakeNodeApi(lease_exists=True), FakeClock()
    api.annotations["other"] = "kept"
    locks = lease_locks(api, clock, replace=True)
    whole = {
        "metadata": {
            "name": "n",
            "resourceVersion": str(api.rv),
            "labels": {"app.kubernetes.io/managed-by": "ascheduler"},
            "annotations": {"other": "kept"},
            "managedFields": [{"manager": "ascheduler"}],
        },
        "spec": {},
    }
    hold = await locks.acquire("n", a_pod(), known=Known(str(api.rv), {"other": "kept"}, whole))
    (sent,) = api.puts
    assert sent["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "ascheduler"}
    assert sent["spec"] == {}
    assert "managedFields" not in sent["metadata"]
    assert sent["metadata"]["annotations"] == {"other": "kept", DEFAULT_KEY: hold.value}
    assert api.annotations == {"other": "kept", DEFAULT_KEY: hold.value}

    # The release replaces the object as the lock write returned it.
    await locks.release(hold)
    assert len(api.puts) == 2
    assert api.annotations == {"other": "kept"}
    clock.advance(60)  # past the release's own hint

    # Known at another version than the write is guarded by: a merge patch.
    stale = {**whole, "metadata": {**whole["metadata"], "resourceVersion": "1"}}
    hold = await locks.acquire("n", a_pod(), known=Known(str(api.rv), {}, stale))
    assert len(api.puts) == 2
    assert api.annotations[DEFAULT_KEY] == hold.value
    await locks.release(hold)  # a PUT again: the hold knows its own write's answer
    assert len(api.puts) == 3
    clock.advance(60)

    # Known whole but behind: the PUT conflicts, the read object is replaced.
    behind = str(api.rv - 1)
    old = {**whole, "metadata": {**whole["metadata"], "resourceVersion": behind}}
    hold = await locks.acquire("n", a_pod(), known=Known(behind, {}, old))
    assert [p["metadata"]["resourceVersion"] for p in api.puts[3:]] == [behind, str(api.rv - 1)]
    assert api.annotations[DEFAULT_KEY] == hold.value
    assert api.reads == [f"{LEASES}/n"]


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
