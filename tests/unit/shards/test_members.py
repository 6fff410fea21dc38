"""Shard members: a member is live while its Lease is renewed in time (counted on the watcher's
clock), gone at once when its Lease is deleted; an instance whose own renewals fail stops
counting itself; dead members' Leases are collected, renewed ones never; every change of the
live members is told. Several `ShardMembers` share one in-memory Lease store here; the real
API server is in tests/integration/test_sharding.py."""

from __future__ import annotations

import asyncio

import pytest

from ascheduler.kube import ApiError
from ascheduler.shards import ShardMembers, ShardSettings, Split
from ascheduler.shards.members import (
    COLLECT,
    GROUP_LABEL,
    parse_shard_lease,
    shard_lease_name,
)
from tests.kit.leases import LeaseClient, LeaseStore

NS = "ascheduler-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
DURATION = 10.0


Store = LeaseStore


class Client(LeaseClient):
    def __init__(self, store: LeaseStore) -> None:
        super().__init__(store, LEASES)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def member(
    store: Store, identity: str, clock: Clock, group: str = "ascheduler"
) -> tuple[ShardMembers, list[Split]]:
    settings = ShardSettings(enabled=True, group=group, member_duration=DURATION)
    members = ShardMembers(
        Client(store),  # type: ignore[arg-type]
        NS,
        settings,
        identity=identity,
        clock=clock,
    )
    told: list[Split] = []
    members.on_change = told.append
    return members, told


async def test_joining_members_find_each_other() -> None:
    store, clock = Store(), Clock()
    a, _ = member(store, "a", clock)
    b, _ = member(store, "b", clock)
    await a.join()
    assert a.split.members == ("a",)
    await b.join()
    assert b.split.members == ("a", "b")  # b listed after a wrote its Lease
    await a._round()  # a reads the Leases again (its watch would show b sooner)
    assert a.split.members == ("a", "b")
    lease = store.items[shard_lease_name("ascheduler", "a")]
    assert lease["metadata"]["labels"][GROUP_LABEL] == "ascheduler"
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == DURATION


async def test_another_group_is_not_a_member() -> None:
    store, clock = Store(), Clock()
    a, _ = member(store, "a", clock)
    other, _ = member(store, "x", clock, group="team-b")
    await other.join()
    await a.join()
    assert a.split.members == ("a",)


async def test_a_member_unrenewed_for_its_duration_is_gone_and_back_when_renewed() -> None:
    store, clock = Store(), Clock()
    a, told = member(store, "a", clock)
    b, _ = member(store, "b", clock)
    await b.join()
    await a.join()
    assert a.split.members == ("a", "b")
    clock.now += DURATION - 1
    await a._round()
    assert a.split.members == ("a", "b")  # still within its duration
    clock.now += 1
    await a._round()
    assert a.split.members == ("a",)
    assert told[-1].members == ("a",)
    await b._round()  # b renews: a new renewTime seen, live again
    await a._round()
    assert a.split.members == ("a", "b")


async def test_a_deleted_lease_is_gone_at_once() -> None:
    store, clock = Store(), Clock()
    a, told = member(store, "a", clock)
    b, _ = member(store, "b", clock)
    await a.join()
    await b.join()
    await a._round()
    raw = store.items[b.name]
    await b.leave()
    assert b.name not in store.items
    a.on_delete(parse_shard_lease(raw))  # what a's watch shows
    assert a.split.members == ("a",)
    assert told[-1] == Split.of("a", ["a"])


async def test_an_instance_whose_renewals_fail_stops_counting_itself() -> None:
    store, clock = Store(), Clock()
    a, told = member(store, "a", clock)
    await a.join()
    assert a.split.live
    store.down = True
    clock.now += DURATION
    with pytest.raises(ApiError):
        await a._round()
    a.update()
    assert not a.split.live
    assert told[-1].members == ()
    store.down = False
    await a._round()
    assert a.split.live


async def test_a_lease_removed_while_alive_is_written_again() -> None:
    store, clock = Store(), Clock()
    a, _ = member(store, "a", clock)
    await a.join()
    store.items.clear()  # collected by another member that counted us dead
    await a._round()
    assert a.name in store.items
    assert a.split.live


async def test_a_dead_members_lease_is_collected_after_twice_its_duration() -> None:
    store, clock = Store(), Clock()
    a, _ = member(store, "a", clock)
    b, _ = member(store, "b", clock)
    await b.join()
    await a.join()
    clock.now += COLLECT * DURATION - 1
    await a._round()
    assert b.name in store.items  # gone from the split, but not collected yet
    assert a.split.members == ("a",)
    clock.now += 1
    await a._round()
    assert b.name not in store.items
    assert a.name in store.items


async def test_a_lease_renewed_just_before_collection_stays() -> None:
    store, clock = Store(), Clock()
    a, _ = member(store, "a", clock)
    b, _ = member(store, "b", clock)
    await b.join()
    await a.join()
    clock.now += COLLECT * DURATION
    await a._list()  # a has seen it unrenewed for long enough ...
    await b._round()  # ... and b renews before a's delete goes out
    stale = a._others["b"]
    await a._collect(stale)
    assert b.name in store.items


def test_leases_that_are_not_members_are_ignored() -> None:
    assert (
        parse_shard_lease({"metadata": {"name": "ascheduler-node-n1"}, "spec": {}}).identity == ""
    )
    no_duration = {
        "metadata": {"name": shard_lease_name("g", "a")},
        "spec": {"holderIdentity": "a"},
    }
    assert parse_shard_lease(no_duration).identity == ""
    assert parse_shard_lease({"metadata": [], "spec": None}).identity == ""


@pytest.mark.parametrize("group", ["", "Team", "-a", "a" * 41, "a_b"])
def test_a_group_must_name_leases_and_labels(group: str) -> None:
    with pytest.raises(ValueError, match="group must be"):
        ShardSettings(group=group)


def test_the_member_duration_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        ShardSettings(member_duration=0)


async def test_an_instance_stops_counting_itself_the_moment_its_lease_runs_out() -> None:
    """Not at its next round: a timer recomputes the split when the last renewal's duration
    is over (here a real clock and a short duration; the sleep outlasts it)."""
    store = Store()
    settings = ShardSettings(enabled=True, member_duration=0.05)
    a = ShardMembers(Client(store), NS, settings, identity="a")  # type: ignore[arg-type]
    told: list[Split] = []
    a.on_change = told.append
    await a.join()
    assert a.split.live
    await asyncio.sleep(0.2)  # no round runs meanwhile
    assert not a.split.live
    assert told[-1].members == ()
