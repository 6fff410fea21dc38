"""Lock writes against an in-memory lock object: acquire, take over (stale, dangling),
release, and the leftovers a failed write leaves."""

from __future__ import annotations

import pytest

from ascheduler.kube import KubeError
from ascheduler.locks import Known, LockContended
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY
from tests.kit import FakeClock
from tests.unit.locks.fakeapi import FakeNodeApi, Fault
from tests.unit.locks.kit import LEASES, ME, TIMEOUT, a_pod, lease_locks, locks_for


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
