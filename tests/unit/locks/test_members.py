"""Who shares the nodes: an instance alone binds without node locks; one that meets another
stops binding alone and acknowledges it once its binds made alone are over; a newcomer binds
only once every live member acknowledged it; members gone are dropped and the last one left
binds alone again once its cache caught up. Several `Members` share one in-memory Lease
store here (the watch is a call to `observe_all`); the real API server is in
tests/integration/binding/test_alone.py."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import pytest

from ascheduler.kube import ApiError
from ascheduler.locks import Members
from ascheduler.locks.memberlease import (
    GROUPS_KEY,
    MEMBER_KEY,
    PEERS_KEY,
    Member,
    member_lease_name,
    parse_member,
)
from ascheduler.locks.memberview import START
from tests.kit.leases import LeaseClient, LeaseStore

NS = "ascheduler-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


Store = LeaseStore


class Client(LeaseClient):
    def __init__(self, store: LeaseStore) -> None:
        super().__init__(store, LEASES)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Catch:
    """The catch-up: how often it ran, and what it answers."""

    def __init__(self) -> None:
        self.calls = 0
        self.ok = True

    async def __call__(self) -> bool:
        self.calls += 1
        return self.ok


def instance(
    store: Store, name: str, clock: Clock, *, may_be_alone: bool = True, lease_groups: int = 0
) -> tuple[Members, Catch]:
    catch = Catch()
    members = Members(
        Client(store),  # type: ignore[arg-type]
        NS,
        name,
        duration=20.0,
        may_be_alone=may_be_alone,
        catch_up=catch,
        clock=clock,
        lease_groups=lease_groups,
    )
    return members, catch


def observe_all(store: Store, *members: Members) -> None:
    """What each instance's watch would show: every member Lease as it is now."""
    for m in members:
        for raw in store.items.values():
            parsed = parse_member(raw)
            assert parsed is not None
            m.observe(parsed)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def peers(store: Store, name: str) -> str:
    return str(store.items[member_lease_name(name)]["metadata"]["annotations"][PEERS_KEY])


async def joined_pair(store: Store, clock: Clock) -> tuple[Members, Members, Catch]:
    """Two members that acknowledged each other, and the first one's catch-up."""
    a, catch = instance(store, "a", clock)
    b, _ = instance(store, "b", clock)
    await a.join()
    await b.join()
    observe_all(store, a, b)
    await a._round()
    await b._round()
    observe_all(store, a, b)
    assert a.ready()
    assert b.ready()
    return a, b, catch


async def test_alone_from_the_start() -> None:
    store, clock = Store(), Clock()
    a, catch = instance(store, "a", clock)
    assert not a.ready()
    assert not a.alone
    await a.join()
    assert a.ready()
    assert a.alone
    assert a.trusted
    assert catch.calls == 0  # its informers list after this: nothing to catch up with
    lease = store.items[member_lease_name("a")]
    assert lease["metadata"]["annotations"][MEMBER_KEY] == "a"
    assert lease["metadata"]["labels"]["app.kubernetes.io/component"] == "node-lock-member"
    assert peers(store, "a") == ""


async def test_a_newcomer_binds_once_acknowledged_and_the_first_stops_binding_alone() -> None:
    store, clock = Store(), Clock()
    a, _ = instance(store, "a", clock)
    b, b_catch = instance(store, "b", clock)
    await a.join()
    await b.join()
    assert not b.alone
    assert not b.ready()  # a may still bind alone
    observe_all(store, a)
    assert not a.alone  # at once, before acknowledging
    assert not a.ready()  # nor does it bind until b says it binds under locks too
    # a's bind made alone is still under way: no acknowledgement until it ends.
    with a.lockless():
        writes = store.writes
        clock.now += 5.0
        await a._round()
        assert store.writes == writes + 1  # renewed all the same
        assert peers(store, "a") == ""
    await settle()
    assert a._wake.is_set()  # the round after the bind acknowledges at once
    await a._round()
    assert peers(store, "a") == "b"
    observe_all(store, b)
    assert b.ready()
    await settle()
    assert b_catch.calls == 1  # the binds a made alone are in no record: caught up first
    assert b.trusted
    # b acknowledges a too; neither is alone.
    await b._round()
    assert peers(store, "b") == "a"
    observe_all(store, a)
    assert a.ready()
    assert not a.alone
    assert not b.alone


async def test_a_member_unrenewed_for_its_duration_is_gone_and_the_last_binds_alone_again() -> None:
    store, clock = Store(), Clock()
    a, _, a_catch = await joined_pair(store, clock)
    assert not a.alone
    # b stops renewing (killed); a keeps renewing. Its last value was first seen at 1000.
    for _ in range(3):
        clock.now += 6.0
        await a._round()
    assert not a.alone
    assert a.peers() == ["b"]
    clock.now += 6.0
    await a._round()  # 24 s, and a fresh read shows the same value
    assert a.peers() == []
    assert peers(store, "a") == ""
    assert member_lease_name("b") not in store.items  # its Lease is removed
    await settle()
    assert a_catch.calls >= 1
    assert a.alone
    assert a.trusted


async def test_a_renewing_member_is_never_gone_however_stale_the_watch() -> None:
    store, clock = Store(), Clock()
    a, _ = instance(store, "a", clock)
    b, _ = instance(store, "b", clock)
    await a.join()
    await b.join()
    observe_all(store, a)
    for _ in range(10):  # a's watch shows nothing more; b renews all along
        clock.now += 5.0
        await b._round()
        await a._round()
    assert a.peers() == ["b"]
    assert not a.alone


async def test_a_graceful_leave_lets_the_other_bind_alone_after_catching_up() -> None:
    store, clock = Store(), Clock()
    a, a_catch = instance(store, "a", clock)
    b, _ = instance(store, "b", clock)
    await a.join()
    await b.join()
    observe_all(store, a)
    await a._round()
    await b.leave()
    a.observe_gone("b")
    a_catch.ok = False  # the cache has not caught up (yet): not alone
    await a._round()
    await settle()
    assert not a.alone
    a_catch.ok = True
    await a._round()
    await settle()
    assert a.alone


async def test_our_own_lease_late_stops_every_bind() -> None:
    store, clock = Store(), Clock()
    a, _ = instance(store, "a", clock)
    await a.join()
    assert a.remaining() == pytest.approx(15.0)
    store.down = True
    clock.now += START * 20.0
    with pytest.raises(ApiError):
        await a._round()
    assert not a.ready()
    assert not a.alone
    assert a.remaining() == pytest.approx(5.0)  # a bind made alone before is cut off then
    store.down = False
    await a._round()
    assert a.ready()
    assert a.alone


async def test_work_done_alone_is_cut_off_in_time_and_leaves_its_bracket() -> None:
    store, clock = Store(), Clock()
    a, _ = instance(store, "a", clock)
    await a.join()
    assert a.alone
    clock.now += 15.0 - 0.01  # 10 ms before a bind made alone must be over
    never = asyncio.Event()
    inside: list[bool] = []

    async def bind() -> None:
        async with a.alone_for():
            inside.append(a._drained.is_set())  # an acknowledgement would wait for it
            await never.wait()

    with pytest.raises(TimeoutError):
        await bind()
    assert inside == [False]
    assert a._drained.is_set()


async def test_an_instance_that_may_not_bind_alone_still_acknowledges_others() -> None:
    store, clock = Store(), Clock()
    binder, _ = instance(store, "binder", clock, may_be_alone=False)
    await binder.join()
    assert binder.ready()
    assert not binder.alone
    assert binder.trusted  # its cache (if any) listed after joining: re-validation may use it
    a, _ = instance(store, "a", clock)
    await a.join()
    assert not a.alone
    assert a.ready()  # the binder never binds alone: a need not wait for it
    observe_all(store, binder)
    await binder._round()
    observe_all(store, a)
    assert a.ready()
    assert not a.alone
    await binder.leave()
    a.observe_gone("binder")
    await a._round()
    await settle()
    assert a.alone


async def witness_once(members: Members) -> None:
    """One read of `Members.witness` (its loop then sleeps; cancelled here)."""
    task = asyncio.ensure_future(members.witness())
    await settle()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_standby_that_witnessed_the_crashed_leader_binds_at_once_on_taking_over() -> None:
    store, clock = Store(), Clock()
    leader, _ = instance(store, "leader", clock)
    await leader.join()
    assert leader.alone
    # The standby reads the members while it waits to lead; the leader is killed at 1000 and
    # its Lease is never renewed again.
    standby, catch = instance(store, "standby", clock)
    await witness_once(standby)
    assert member_lease_name("standby") not in store.items  # witnessing is not joining
    clock.now += 21.0  # the leader election's wait
    await witness_once(standby)  # the same value: still first seen at 1000
    await standby.join()
    assert not standby.ready()  # the dead leader may be binding alone, for all it knows
    await standby._round()  # ... but its Lease has stood still 21 s, and a fresh read agrees
    assert standby.peers() == []
    assert member_lease_name("leader") not in store.items
    await settle()
    assert catch.calls == 1
    assert standby.alone
    assert standby.ready()


async def test_without_witnessing_the_successor_waits_the_member_duration() -> None:
    store, clock = Store(), Clock()
    leader, _ = instance(store, "leader", clock)
    await leader.join()
    clock.now += 21.0  # killed at 1000; the successor joins only now
    successor, _ = instance(store, "successor", clock)
    await successor.join()
    await successor._round()
    assert successor.peers() == ["leader"]  # first seen now: 20 s more on its own clock
    assert not successor.ready()
    clock.now += 20.0
    await successor._round()
    assert successor.peers() == []


async def test_a_leader_renewing_while_witnessed_is_not_counted_gone() -> None:
    store, clock = Store(), Clock()
    leader, _ = instance(store, "leader", clock)
    await leader.join()
    standby, _ = instance(store, "standby", clock)
    await witness_once(standby)
    clock.now += 15.0
    await leader._round()  # renewed: a new value, first seen by the next read
    await witness_once(standby)
    clock.now += 10.0  # 25 s since the first read, 10 s since the renewal
    await standby.join()
    await standby._round()
    assert standby.peers() == ["leader"]
    assert member_lease_name("leader") in store.items


async def test_a_member_counted_gone_while_alive_comes_back_as_a_newcomer() -> None:
    store, clock = Store(), Clock()
    a, b, _ = await joined_pair(store, clock)
    # b is cut off from the API server for longer than the duration: a counts it gone.
    clock.now += 21.0
    await a._round()
    assert a.peers() == []
    assert member_lease_name("b") not in store.items
    assert not b.ready()  # its own Lease is late: it started no bind meanwhile
    # b is back. Its renewal finds no Lease: it registers anew, under a new identity.
    await b._round()
    assert b.identity == "b~1"
    assert member_lease_name("b~1") in store.items
    assert member_lease_name("b") not in store.items
    # Even a stale view of a's Lease, naming "b" among its peers, does not make b ready:
    # that acknowledgement was of the identity counted gone.
    assert b.peers() == ["a"]
    b._others["a"] = dataclasses.replace(b._others["a"], peers=frozenset({"b"}))
    assert not b.ready()
    observe_all(store, a)
    assert not a.alone  # a newcomer: a stops binding alone
    await a._round()
    assert peers(store, "a") == "b~1"
    observe_all(store, b)
    assert b.ready()


async def test_a_member_that_renewed_just_before_its_removal_stays() -> None:
    store, clock = Store(), Clock()
    a, _, _ = await joined_pair(store, clock)
    clock.now += 21.0  # a's view of b: unrenewed for 21 s, and a fresh read agrees ...

    def renewed() -> None:  # ... but b's renewal lands just before a's delete
        lease = store.items[member_lease_name("b")]
        store.stamp({**lease, "metadata": dict(lease["metadata"])})

    store.before_delete = renewed
    await a._round()
    assert member_lease_name("b") in store.items
    assert a.peers() == ["b"]  # not counted gone: no binding alone beside it
    assert not a.alone


async def test_each_member_s_lease_groups_are_known_to_the_others() -> None:
    store, clock = Store(), Clock()
    a, _ = instance(store, "a", clock, lease_groups=32)
    b, _ = instance(store, "b", clock)
    await a.join()
    assert a.groupings() == {32}
    await b.join()
    assert store.items[member_lease_name("a")]["metadata"]["annotations"][GROUPS_KEY] == "32"
    assert store.items[member_lease_name("b")]["metadata"]["annotations"][GROUPS_KEY] == "0"
    assert b.groupings() == {0, 32}  # found by its list, before its first bind
    observe_all(store, a)
    assert a.groupings() == {0, 32}
    # A member gone takes its grouping with it.
    a.observe_gone("b")
    assert a.groupings() == {32}


def lease_of(store: Store, name: str) -> Member:
    member = parse_member(store.items[member_lease_name(name)])
    assert member is not None
    return member


async def test_a_member_back_under_a_new_identity_lists_the_members_before_binding() -> None:
    """c joined while b was counted gone, listing before b's Lease was back: c does not know
    b. b must know c (and take c's locks too) before its next bind."""
    store, clock = Store(), Clock()
    a, b, _ = await joined_pair(store, clock)
    clock.now += 21.0
    await a._round()  # b counted gone, its Lease removed
    c, _ = instance(store, "c", clock, lease_groups=4)
    await c.join()
    assert c.peers() == ["a"]
    b.observe(lease_of(store, "a"))  # a renewed: alive to b

    original_get = b.kube.get
    failing = True

    async def get(path: str, *, params: Any = None) -> dict[str, Any]:
        if failing:
            raise ApiError(503, "ServiceUnavailable", "down", method="GET", path=path)
        return await original_get(path, params=params)

    b.kube.get = get  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        await b._round()  # its Lease is made again; the list that follows fails
    assert b.identity == "b~1"
    assert member_lease_name("b~1") in store.items
    # Acknowledged by a, b still does not bind: it has not listed the members since.
    observe_all(store, a)
    await a._round()
    b.observe(lease_of(store, "a"))
    assert "b~1" in lease_of(store, "a").peers
    assert b.peers() == ["a"]
    assert not b.ready()
    failing = False
    await b._round()
    assert b.peers() == ["a", "c"]
    assert b.groupings() == {0, 4}
    observe_all(store, a, c)
    await a._round()
    await c._round()
    observe_all(store, b)
    assert b.ready()
