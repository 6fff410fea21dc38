"""LockedBinder's coordination of one node's binds, with an in-memory stand-in for the API
server's Node and pod writes (the same paths run against the real plane in
tests/integration/binding/test_binder.py); here the failures that plane will not produce on
demand: a connection dropped mid-Binding, a first pod whose own bind fails, a hold that runs
out of time, a cancellation while the lock patch is in flight."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from ascheduler.binding.binder import BindSettings, LockedBinder
from ascheduler.binding.leases import LEASE_GROUP, LEASE_NODE, LockLease, parse_lock_lease
from ascheduler.cache import Cache
from ascheduler.framework import CycleState, Status
from ascheduler.framework.interface import BINDING_ANNOTATIONS
from ascheduler.locks import LockSettings, Members, NodeLocks
from ascheduler.locks.keys import (
    DEFAULT_KEY,
    HAMI_KEY,
    LockObject,
    group_key,
    lock_keys,
    lock_lease_name,
    node_lease_name,
)
from ascheduler.model import PodInfo, parse_pod
from tests.kit import FakeClock, make_cache, node, on, pod_info
from tests.kit import pod as raw_pod
from tests.unit.locks.fakeapi import FakeNodeApi
from tests.unit.locks.test_members import NS, Client, Store, observe_all

ME = "instance-a"


class FakeFramework:
    handle = SimpleNamespace(nodes=SimpleNamespace(node=lambda name: None))

    def __init__(
        self,
        api: FakeNodeApi,
        fail: dict[str, BaseException | Status],
        *,
        during_bind: Callable[[str], None] | None = None,
        gates: dict[str, asyncio.Event] | None = None,
    ) -> None:
        self.api = api
        self.fail = fail
        self.during_bind = during_bind
        #: Binds of these pods wait until their event is set (in flight for as long as a
        #: test needs, whatever the machine's load).
        self.gates = gates or {}

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if self.during_bind is not None:
            self.during_bind(pod.name)
        gate = self.gates.get(pod.name)
        if gate is not None:
            await gate.wait()
        else:
            await asyncio.sleep(0.01 if pod.name in self.fail else 0.03)
        outcome = self.fail.get(pod.name)
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            return outcome
        self.api.log.append(f"bound {pod.name}")
        return Status()


def node_info_raw(name: str) -> dict[str, Any]:
    return node(name, cpu="10", pods="10")


def bound_pod(uid: str) -> PodInfo:
    """A pod of another instance's, bound to node n (seen by the cache's watch)."""
    return parse_pod(on("n", raw_pod(uid, namespace="ns", uid=uid, cpu="1")))


def pod(name: str) -> PodInfo:
    return pod_info(name, namespace="ns", uid=name, resource_version="1", cpu="1")


def binder_for(
    api: FakeNodeApi,
    *,
    key: str = DEFAULT_KEY,
    clock: FakeClock | None = None,
    prefix: str = "ascheduler.io",
    on: LockObject = "node",
    linger: float = 0.0,
    cache: Cache | None = None,
    groups: int = 0,
) -> LockedBinder:
    lock = LockSettings(
        key=key, identity=ME, on=on, linger=linger, lease_groups=groups, handover_wait=0.0
    )
    settings = BindSettings(policy="all", lock=lock, annotation_prefix=prefix)
    binder = LockedBinder(api, settings, cache=cache)  # type: ignore[arg-type]
    if clock is not None:
        binder.locks = NodeLocks(api, settings.lock, clock=clock)  # type: ignore[arg-type]
    return binder


async def bind_all(binder: LockedBinder, fw: FakeFramework, names: list[str]) -> list[Status]:
    tasks = [
        asyncio.create_task(binder.bind(fw, CycleState(), pod(n), "n"))  # type: ignore[arg-type]
        for n in names
    ]
    return list(await asyncio.gather(*tasks))


async def test_a_dropped_binding_fails_alone_and_the_hold_outlasts_the_others() -> None:
    api = FakeNodeApi()
    binder = binder_for(api)
    fw = FakeFramework(api, {"p1": aiohttp.ClientConnectionError("reset")})
    statuses = await bind_all(binder, fw, ["p0", "p1", "p2"])
    assert [s.ok for s in statuses] == [True, False, True]
    assert "reset" in statuses[1].message
    # Both other binds landed while the node was still locked, under this instance's name.
    assert api.log == [f"lock {ME}", "bound p0", "bound p2", "unlock"]
    # The lock is gone; beside it, the pods bound under it (p1's Binding may have landed).
    assert api.annotations == {f"{DEFAULT_KEY}-bound": "p0,p1,p2"}


async def test_the_hold_serves_every_bind_it_covers_when_its_first_pod_fails() -> None:
    """The lock names this instance's hold, not its first pod: that pod failing (or being
    deleted) leaves the lock valid for the binds that joined it."""
    api = FakeNodeApi()
    binder = binder_for(api)
    gate = asyncio.Event()
    fw = FakeFramework(api, {"p0": Status.error("rejected", "DefaultBinder")}, gates={"p0": gate})
    lead = asyncio.create_task(
        binder.bind(fw, CycleState(), pod("p0"), "n")  # type: ignore[arg-type]
    )
    for _ in range(100):
        if api.log:
            break
        await asyncio.sleep(0)
    assert api.log == [f"lock {ME}"]
    # Queued while p0's Binding is in flight (it waits on the gate until they have joined).
    others = asyncio.create_task(bind_all(binder, fw, ["p1", "p2"]))
    for _ in range(20):
        await asyncio.sleep(0)
    gate.set()
    rest = await others
    assert not (await lead).ok
    assert [s.ok for s in rest] == [True, True]
    assert api.log == [f"lock {ME}", "bound p1", "bound p2", "unlock"]


async def serve_two_batches(
    binder: LockedBinder, api: FakeNodeApi, while_p0_binds: Callable[[], None]
) -> list[Status]:
    """p0 alone in its hold's first batch; p1 and p2 queue behind it and form the second,
    which the hold serves only if its lock is still ours. `while_p0_binds` runs while p0's
    Binding is in flight."""
    gate = asyncio.Event()
    started: list[str] = []
    fw = FakeFramework(api, {}, gates={"p0": gate}, during_bind=started.append)
    lead = asyncio.create_task(binder.bind(fw, CycleState(), pod("p0"), "n"))  # type: ignore[arg-type]
    for _ in range(100):
        if started:
            break
        await asyncio.sleep(0)
    assert started == ["p0"]
    others = asyncio.create_task(bind_all(binder, fw, ["p1", "p2"]))
    for _ in range(20):
        await asyncio.sleep(0)
    while_p0_binds()
    api.reads.clear()
    gate.set()
    return [await lead, *await others]


async def test_a_hold_the_watch_confirmed_serves_its_next_batch_without_a_read() -> None:
    api = FakeNodeApi()
    binder = binder_for(api)

    def watch_shows_our_lock() -> None:
        binder.observe_node("n", dict(api.annotations))

    statuses = await serve_two_batches(binder, api, watch_shows_our_lock)
    assert [s.ok for s in statuses] == [True, True, True]
    assert api.log == [f"lock {ME}", "bound p0", "bound p1", "bound p2", "unlock"]
    assert "/api/v1/nodes/n" not in api.reads


async def test_a_hold_the_watch_shows_taken_serves_nothing_more() -> None:
    api = FakeNodeApi()
    binder = binder_for(api)
    theirs = "2026-01-01T00:00:00.000000000Z,instance-b"

    def watch_shows_our_lock_then_theirs() -> None:
        binder.observe_node("n", dict(api.annotations))
        api.annotations[DEFAULT_KEY] = theirs  # cleared and taken behind our back
        api.rv += 1
        binder.observe_node("n", dict(api.annotations))

    statuses = await serve_two_batches(binder, api, watch_shows_our_lock_then_theirs)
    assert [s.ok for s in statuses] == [True, False, False]
    # Nothing more under the lost lock: the next hold meets theirs, and asks for it.
    assert api.log == [f"lock {ME}", "bound p0", "asked"]
    assert "instance-b" in statuses[1].message
    assert api.annotations[DEFAULT_KEY] == theirs  # theirs is left alone


async def test_under_hamis_key_a_hold_names_and_serves_one_pod() -> None:
    api = FakeNodeApi()
    binder = binder_for(api, key=HAMI_KEY)
    statuses = await bind_all(binder, FakeFramework(api, {}), ["p0", "p1"])
    assert [s.ok for s in statuses] == [True, True]
    assert api.log == ["lock ns,p0", "bound p0", "unlock", "lock ns,p1", "bound p1", "unlock"]


async def test_a_hold_out_of_time_hands_the_rest_to_a_new_hold() -> None:
    api = FakeNodeApi()
    clock = FakeClock()
    binder = binder_for(api, clock=clock)

    first_out = asyncio.Event()

    def slow_first_bind(name: str) -> None:
        if name == "p0":  # p0's Binding takes longer than the hold's write budget
            clock.advance(binder.settings.lock.timeout * 0.6)
            first_out.set()

    fw = FakeFramework(api, {}, during_bind=slow_first_bind)
    lead = asyncio.create_task(
        binder.bind(fw, CycleState(), pod("p0"), "n")  # type: ignore[arg-type]
    )
    await first_out.wait()  # p1 and p2 queue behind p0's batch
    rest = await bind_all(binder, fw, ["p1", "p2"])
    assert (await lead).ok
    assert [s.ok for s in rest] == [True, True]
    first_hold = [f"lock {ME}", "bound p0", "unlock"]
    assert api.log == [*first_hold, f"lock {ME}", "bound p1", "bound p2", "unlock"]


async def test_a_hold_that_finds_its_lock_gone_writes_nothing_more() -> None:
    api = FakeNodeApi()
    binder = binder_for(api)

    def robbed(name: str) -> None:
        if name == "p0":
            api.annotations[DEFAULT_KEY] = "2026-11-23T00:00:00.000000000Z,someone-else"
            api.rv += 1

    # p0's Binding stays in flight until p1 has queued behind it (whatever the machine's
    # load): p1 is then the hold's second batch.
    gate = asyncio.Event()
    started: list[str] = []
    fw = FakeFramework(
        api, {}, during_bind=lambda name: (started.append(name), robbed(name)), gates={"p0": gate}
    )
    lead = asyncio.create_task(
        binder.bind(fw, CycleState(), pod("p0"), "n")  # type: ignore[arg-type]
    )
    for _ in range(100):
        if started:
            break
        await asyncio.sleep(0)
    assert started == ["p0"]
    second = asyncio.create_task(bind_all(binder, fw, ["p1"]))
    for _ in range(20):
        await asyncio.sleep(0)
    gate.set()
    rest = await second
    assert (await lead).ok
    # The second batch checks the lock first, finds another holder's value, and stops; the
    # next hold meets that holder's lock and fails, without writing.
    assert not rest[0].ok
    assert "locked by instance someone-else" in rest[0].message
    # It asks the holder for the lock (a request beside the lock, not the lock).
    assert api.log == [f"lock {ME}", "bound p0", "asked"]
    assert api.annotations[DEFAULT_KEY].endswith("someone-else")  # not ours to release


async def test_cancelled_while_the_lock_patch_is_in_flight_still_releases() -> None:
    api = FakeNodeApi(patch_delay=0.05)
    locks = NodeLocks(api, LockSettings(identity=ME))  # type: ignore[arg-type]

    async def hold() -> None:
        async with locks.hold("n", pod("p0")):
            await asyncio.sleep(10)

    task = asyncio.create_task(hold())
    await asyncio.sleep(0.02)  # the lock patch has been sent, not answered
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert api.log == [f"lock {ME}", "unlock"]
    assert DEFAULT_KEY not in api.annotations
    assert locks.held == {}


async def test_under_hamis_key_a_lock_never_covers_a_pod_it_does_not_name() -> None:
    """p1 waits behind p0's hold, then leads the next one; its binding cycle is cancelled as
    its lock (naming p1) lands. That lock is let go, and p2's bind gets a lock naming p2."""
    api = FakeNodeApi()
    binder = binder_for(api, key=HAMI_KEY)
    fw = FakeFramework(api, {})
    tasks = {
        name: asyncio.create_task(
            binder.bind(fw, CycleState(), pod(name), "n")  # type: ignore[arg-type]
        )
        for name in ("p0", "p1", "p2")
    }

    def cancel_p1_as_its_lock_lands() -> None:
        if api.annotations.get(HAMI_KEY, "").endswith(",ns,p1"):
            tasks["p1"].cancel()

    api.on_patch = cancel_p1_as_its_lock_lands
    outcomes = await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert outcomes[0].ok  # type: ignore[union-attr]
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert outcomes[2].ok  # type: ignore[union-attr]
    assert api.log == [
        *("lock ns,p0", "bound p0", "unlock"),
        *("lock ns,p1", "unlock"),
        *("lock ns,p2", "bound p2", "unlock"),
    ]


class RecordingFramework(FakeFramework):
    """Keeps the annotations each Binding would carry."""

    def __init__(self, api: FakeNodeApi) -> None:
        super().__init__(api, {})
        self.carried: dict[str, dict[str, str]] = {}

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.carried[pod.name] = dict(state.read(BINDING_ANNOTATIONS) or {})
        return await super().bind(state, pod, node)


@pytest.mark.parametrize(
    ("prefix", "phase"), [("ascheduler.io", "success"), ("hami.io", "allocating")]
)
async def test_the_binding_carries_the_bind_phase_and_the_pod_is_never_written(
    prefix: str, phase: str
) -> None:
    """One write per pod, its Binding, which carries the phase: `success`, or under HAMi's
    prefix `allocating` (HAMi's device plugin writes the outcome)."""
    api = FakeNodeApi()
    fw = RecordingFramework(api)
    statuses = await bind_all(binder_for(api, prefix=prefix), fw, ["p0", "p1"])
    assert all(s.ok for s in statuses)
    for name in ("p0", "p1"):
        assert fw.carried[name][f"{prefix}/bind-phase"] == phase
        assert int(fw.carried[name][f"{prefix}/bind-time"]) > 0
    assert api.pod_patches == []


async def test_a_failed_bind_writes_no_phase_on_the_pod() -> None:
    """A refused Binding binds nothing and carries nothing onto the pod; no `failed` write
    follows (the failure is reported by event and condition, as any other)."""
    api = FakeNodeApi()
    fw = FakeFramework(api, {"p0": Status.error("binding refused", "DefaultBinder")})
    (status,) = await bind_all(binder_for(api, prefix="hami.io"), fw, ["p0"])
    assert not status.ok
    assert api.pod_patches == []


async def test_a_lease_lock_is_made_once_owned_by_the_node_and_leaves_the_node_alone() -> None:
    api = FakeNodeApi()
    binder = binder_for(api, on="lease")
    binder._node_uids["n"] = "node-uid"
    assert all(s.ok for s in await bind_all(binder, FakeFramework(api, {}), ["p0", "p1"]))
    (made,) = api.created
    assert made["kind"] == "Lease"
    assert made["metadata"]["name"] == node_lease_name("n") == "ascheduler-node-n"
    assert made["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "node-uid"}
    ]
    assert api.log == [f"lock {ME}", "bound p0", "bound p1", "unlock"]
    lease = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{made['metadata']['name']}"
    assert lease in api.reads
    # Not in the cache: the node is read for its allocatable, never written.
    assert "/api/v1/nodes/n" in api.reads
    # The next hold finds the Lease: no second create.
    assert (await bind_all(binder, FakeFramework(api, {}), ["p2"]))[0].ok
    assert len(api.created) == 1
    # A Node annotation seen by the informer is not this lock's concern.
    binder.observe_node("n", {DEFAULT_KEY: "2026-01-01T00:00:00.000000000Z,someone"})
    assert binder.locks._seen == {}


def test_a_long_node_name_gets_a_digest_and_hami_s_key_stays_on_the_node() -> None:
    long = "x" * 250
    name = node_lease_name(long)
    assert len(name) <= 253
    assert name.startswith("ascheduler-node-")
    assert node_lease_name(long + "y") != name
    assert LockSettings(key=HAMI_KEY).lock_object == "node"
    assert LockSettings().lock_object == "lease"
    with pytest.raises(ValueError, match="HAMi's Node annotation"):
        LockSettings(key=HAMI_KEY, on="lease")


def lists(api: FakeNodeApi) -> int:
    return sum(1 for path in api.reads if path == "/api/v1/pods")


async def test_a_hold_after_our_own_undisturbed_release_revalidates_from_its_record() -> None:
    api = FakeNodeApi()
    binder = binder_for(api)
    fw = FakeFramework(api, {})
    assert (await binder.bind(fw, CycleState(), pod("p0"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 1
    # Nobody wrote the node since our release: the record stands in for the list.
    assert (await binder.bind(fw, CycleState(), pod("p1"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 1
    assert [p.name for p in binder._records["n"][2].usage.counted.values()] == ["p0", "p1"]
    # Someone else took and released the lock meanwhile (the version moved): list again.
    api.rv += 1
    assert (await binder.bind(fw, CycleState(), pod("p2"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 2


async def test_a_record_that_refuses_a_bind_is_read_again_before_refusing() -> None:
    api = FakeNodeApi()  # room for 10 pods
    binder = binder_for(api)
    fw = FakeFramework(api, {})
    statuses = await bind_all(binder, fw, [f"p{i}" for i in range(10)])
    assert all(s.ok for s in statuses)
    assert lists(api) == 1
    # The record counts 10 pods (full); the API server lists none now (all deleted): the
    # refusal is checked against a fresh list, and the bind goes through.
    assert (await binder.bind(fw, CycleState(), pod("p10"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 2
    # A refusal a fresh list confirms stands.
    api.listed = [
        {
            "metadata": {"uid": f"x{i}", "name": f"x{i}", "namespace": "ns"},
            "spec": {"nodeName": "n", "containers": []},
        }
        for i in range(10)
    ]
    api.rv += 1
    status = await binder.bind(fw, CycleState(), pod("p11"), "n")  # type: ignore[arg-type]
    assert not status.ok
    assert "Too many pods" in status.message


async def test_a_lease_the_informer_shows_unlocked_is_locked_without_reading_it() -> None:
    api = FakeNodeApi(lease_exists=True)
    binder = binder_for(api, on="lease")
    lease = LockLease(node_lease_name("n"), "n", str(api.rv), {LEASE_NODE: "n"})
    binder._lease_events.on_add(lease)
    assert (await binder.bind(FakeFramework(api, {}), CycleState(), pod("p0"), "n")).ok  # type: ignore[arg-type]
    assert not [path for path in api.reads if "/leases/" in path]
    assert api.log == [f"lock {ME}", "bound p0", "unlock"]
    # A stale copy costs a conflict and a read, nothing more.
    binder._lease_events.on_add(LockLease(lease.name, "n", "1", {LEASE_NODE: "n"}))
    binder.locks._released.clear()
    assert (await binder.bind(FakeFramework(api, {}), CycleState(), pod("p1"), "n")).ok  # type: ignore[arg-type]
    assert [path for path in api.reads if "/leases/" in path]


async def test_a_lease_the_informer_keeps_whole_is_locked_by_replacing_it() -> None:
    """The lock write sends the Lease back whole (a PUT at the informer's version): its
    owner and labels stay, its managedFields are the API server's to keep."""
    api = FakeNodeApi(lease_exists=True)
    binder = binder_for(api, on="lease")
    owner = [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u-n"}]
    api.annotations[LEASE_NODE] = "n"
    raw = {
        "metadata": {
            "name": node_lease_name("n"),
            "resourceVersion": str(api.rv),
            "labels": {"app.kubernetes.io/managed-by": "ascheduler"},
            "ownerReferences": owner,
            "annotations": {LEASE_NODE: "n"},
            "managedFields": [{"manager": "ascheduler"}],
        },
        "spec": {},
    }
    binder._lease_events.on_add(parse_lock_lease(raw))
    assert (await binder.bind(FakeFramework(api, {}), CycleState(), pod("p0"), "n")).ok  # type: ignore[arg-type]
    assert api.log == [f"lock {ME}", "bound p0", "unlock"]
    assert not [path for path in api.reads if "/leases/" in path]
    taken = api.puts[0]["metadata"]
    assert taken["ownerReferences"] == owner
    assert taken["labels"] == {"app.kubernetes.io/managed-by": "ascheduler"}
    assert "managedFields" not in taken
    assert len(api.puts) == 2  # the release too
    # A Lease that stands for no node (a member's, say) is not kept whole.
    assert parse_lock_lease({"metadata": {"name": "m", "annotations": {}}}).raw is None


async def test_a_fresh_holder_whose_cache_has_seen_the_recorded_pods_does_not_list() -> None:
    api = FakeNodeApi()
    cache = make_cache([node_info_raw("n")])
    binder = binder_for(api, cache=cache)
    fw = FakeFramework(api, {})
    # Another instance's hold left its record: x0 and x1 bound here.
    api.annotations[f"{DEFAULT_KEY}-bound"] = "x0,x1"
    cache.add_pod(bound_pod("x0"))
    assert (await binder.bind(fw, CycleState(), pod("p0"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 1  # x1 is not in the cache yet: list
    assert api.annotations[f"{DEFAULT_KEY}-bound"] == "x0,x1,p0"
    # Someone else holds and releases the lock, recording x2, which the cache has seen.
    api.annotations[f"{DEFAULT_KEY}-bound"] = "x0,x1,p0,x2"
    api.rv += 1
    for uid in ("x1", "x2"):
        cache.add_pod(bound_pod(uid))
    cache.add_pod(bound_pod("p0"))
    assert (await binder.bind(fw, CycleState(), pod("p1"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 1  # the cache has caught up: no list
    # A cache that would refuse a bind is checked against a list first.
    for i in range(3, 10):
        cache.add_pod(bound_pod(f"x{i}"))
    api.annotations[f"{DEFAULT_KEY}-bound"] = "x9"
    api.rv += 1
    assert (await binder.bind(fw, CycleState(), pod("p2"), "n")).ok  # type: ignore[arg-type]
    assert lists(api) == 2


async def test_a_hold_counts_its_own_binds_once_on_a_view_from_the_cache() -> None:
    """The cache holds this hold's pods as assumed; a bind that fits joins the view without
    being counted a second time, so a node filled exactly by the batch is not read again."""
    api = FakeNodeApi()  # cpu 10
    others = [on("n", raw_pod(f"x{i}", namespace="ns", uid=f"x{i}", cpu="1")) for i in range(8)]
    cache = make_cache([node_info_raw("n")], others)
    binder = binder_for(api, cache=cache)
    for name in ("p0", "p1"):
        cache.assume(pod(name), "n")
    statuses = await bind_all(binder, FakeFramework(api, {}), ["p0", "p1"])
    assert all(s.ok for s in statuses)
    assert api.log == [f"lock {ME}", "bound p0", "bound p1", "unlock"]  # one hold
    assert lists(api) == 0
    # The node's record counts each pod once: a third pod does not fit, and a list the
    # API server answers with the ten confirms it.
    counted = binder._records["n"][2].usage.counted
    api.listed = [on("n", raw_pod(u, namespace="ns", uid=u, cpu="1")) for u in counted]
    status = await binder.bind(FakeFramework(api, {}), CycleState(), pod("p2"), "n")  # type: ignore[arg-type]
    assert not status.ok
    assert "Insufficient cpu" in status.message
    assert lists(api) == 1


async def test_alone_binds_skip_the_lock_but_not_a_node_someone_else_has_locked() -> None:
    api = FakeNodeApi()
    binder = binder_for(api, on="lease")
    store = Store()
    binder.members = members = Members(Client(store), NS, ME)  # type: ignore[arg-type]
    await members.join()
    assert members.alone
    fw = FakeFramework(api, {})
    assert all(s.ok for s in await bind_all(binder, fw, ["p0", "p1"]))
    assert api.log == ["bound p0", "bound p1"]  # no lock, no unlock
    assert api.created == []
    # A lock not ours on the node's Lease (a scheduler that does not register, say): it is
    # respected as ever.
    binder.locks.observe("n", {DEFAULT_KEY: "2026-01-01T00:00:00.000000000Z,someone"})
    api.lease_exists = True
    api.annotations[DEFAULT_KEY] = "2026-01-01T00:00:00.000000000Z,someone"
    (status,) = await bind_all(binder, fw, ["p2"])
    assert not status.ok
    assert "someone" in status.message
    # Another member: every bind takes the lock again.
    binder.locks.observe("n", {})
    api.annotations.clear()
    other = Members(Client(store), NS, "other")  # type: ignore[arg-type]
    await other.join()
    observe_all(store, members)
    assert not members.alone
    await members._round()  # acknowledges it
    observe_all(store, other)
    await other._round()
    observe_all(store, members)
    assert members.ready()
    assert (await bind_all(binder, fw, ["p3"]))[0].ok
    assert api.log[-3:] == [f"lock {ME}", "bound p3", "unlock"]


async def bind_to(binder: LockedBinder, fw: FakeFramework, name: str, node: str) -> Status:
    return await binder.bind(fw, CycleState(), pod(name), node)  # type: ignore[arg-type]


async def test_with_lease_groups_one_lock_serves_every_node_of_the_group() -> None:
    """One group (the fake API server keeps one lock object): binds to two nodes take one
    lock write; the group's Lease names the group and belongs to no node."""
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=1, linger=10.0)
    binder._node_uids["n"] = "node-uid"
    fw = FakeFramework(api, {})
    assert binder.lock_keys("n") == binder.lock_keys("m") == ["0/1"]
    assert (await bind_to(binder, fw, "p0", "n")).ok
    assert (await bind_to(binder, fw, "p1", "m")).ok
    assert api.log == [f"lock {ME}", "bound p0", "bound p1"]  # the hold lingers: no unlock
    (made,) = api.created
    assert made["metadata"]["name"] == "ascheduler-nodes-1-0"
    assert made["metadata"]["annotations"] == {LEASE_GROUP: "0/1"}
    assert "ownerReferences" not in made["metadata"]
    assert parse_lock_lease(made).node == "0/1"  # the informer keys it by its lock
    await binder.locks.release_all()
    assert api.log[-1] == "unlock"


async def test_with_lease_groups_a_record_is_void_once_another_holder_took_the_group() -> None:
    """A hold of ours on n, then someone else's on the group (binding on n, perhaps), then
    ours on m: our next hold on n is undisturbed (the lock is as our release left it), but
    what we recorded for n is older than the other holder's binds: list again."""
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=1)
    fw = FakeFramework(api, {})
    assert (await bind_to(binder, fw, "p0", "n")).ok
    assert lists(api) == 1
    api.rv += 1  # another instance took and let go of the group's lock
    assert (await bind_to(binder, fw, "p1", "m")).ok
    assert lists(api) == 2
    assert (await bind_to(binder, fw, "p2", "n")).ok
    assert lists(api) == 3  # not from n's record
    assert (await bind_to(binder, fw, "p3", "m")).ok
    assert lists(api) == 3  # m's record is as current as the lock


async def test_a_group_hold_taken_from_another_holder_serves_from_records_while_held() -> None:
    """The group's lock was last someone else's, so our hold lists each node once; while we
    hold it on (binds to m keep it), nobody else can bind under it: n's next hold joins it
    and re-validates from n's record, without listing again."""
    api = FakeNodeApi()
    api.rv += 1  # another instance held the group before us
    binder = binder_for(api, on="lease", groups=1)
    gates = {"p0": asyncio.Event(), "p1": asyncio.Event()}
    started = Started()
    fw = FakeFramework(api, {}, during_bind=started, gates=gates)
    first = asyncio.create_task(bind_to(binder, fw, "p0", "n"))
    await started.wait("p0")
    second = asyncio.create_task(bind_to(binder, fw, "p1", "m"))
    await started.wait("p1")
    assert lists(api) == 2  # n and m, once each
    gates["p0"].set()
    assert (await first).ok  # n's hold is over, its record kept; m's holds the group on
    assert "n" in binder._records
    assert (await bind_to(binder, fw, "p2", "n")).ok
    assert lists(api) == 2
    gates["p1"].set()
    assert (await second).ok
    assert api.log.count(f"lock {ME}") == 1
    # Once the group was someone else's again, n's record is void.
    api.rv += 1
    assert (await bind_to(binder, fw, "p3", "n")).ok
    assert lists(api) == 3


async def test_our_own_recorded_binds_count_before_the_cache_sees_them_bound() -> None:
    """The group's record names p0, which our own Binding put on n; the cache still has it
    assumed there (its watch is behind). Taken afresh after another holder, the group's
    lock serves m from the cache: p0 counts where it is. A recorded pod the cache has
    elsewhere, or not at all, still sends the hold to the API server's list."""
    api = FakeNodeApi()
    cache = make_cache([node_info_raw("n"), node_info_raw("m")])
    binder = binder_for(api, on="lease", groups=1, cache=cache)
    fw = FakeFramework(api, {})
    cache.assume(pod("p0"), "n")  # as the scheduling cycle does before the bind
    assert (await bind_to(binder, fw, "p0", "n")).ok
    assert lists(api) == 0  # an empty record: the cache stands in
    assert api.annotations[f"{DEFAULT_KEY}-bound"] == "p0"
    assert not cache.bound("p0")
    api.rv += 1  # another instance took and let go of the group, binding nothing
    cache.assume(pod("p1"), "m")
    assert (await bind_to(binder, fw, "p1", "m")).ok
    assert lists(api) == 0
    # p1's bind is unknown to the cache (forgotten, say): the record is not all counted.
    cache.forget(pod("p1"))
    api.rv += 1
    assert (await bind_to(binder, fw, "p2", "n")).ok
    assert lists(api) == 1
    # Nor is a pod the cache has on another node than our Binding's.
    cache.assume(pod("p1"), "n")
    api.annotations[f"{DEFAULT_KEY}-bound"] = "p0,p1"
    api.rv += 1
    assert (await bind_to(binder, fw, "p3", "m")).ok
    assert lists(api) == 2


async def test_binds_take_the_lock_of_every_grouping_the_members_use() -> None:
    """Another member groups the nodes its own way (or has a Lease per node): a bind takes
    both locks, in the same order as every instance."""
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=4)
    assert binder.lock_keys("n") == [group_key("n", 4)]
    store = Store()
    binder.members = Members(Client(store), NS, ME, lease_groups=4)  # type: ignore[arg-type]
    other = Members(Client(store), NS, "instance-b")  # type: ignore[arg-type]
    await other.join()
    await binder.members.join()
    assert (
        sorted(binder.lock_keys("n")) == binder.lock_keys("n") == sorted(["n", group_key("n", 4)])
    )


def test_group_keys_and_lease_names() -> None:
    counts = Counter(group_key(f"node-{i}", 8) for i in range(800))
    assert set(counts) == {f"{i}/8" for i in range(8)}
    assert min(counts.values()) > 50  # spread over the groups
    assert group_key("node-1", 8) == group_key("node-1", 8)
    assert group_key("node-1", 0) == "node-1"
    assert lock_keys("n", [0, 4, 4, 2]) == sorted({"n", group_key("n", 4), group_key("n", 2)})
    assert lock_lease_name("3/8") == "ascheduler-nodes-8-3"
    assert lock_lease_name("n") == node_lease_name("n") == "ascheduler-node-n"
    # No node's Lease is named like a group's, whatever the node's name.
    for name in ("s-8-3", "s", "nodes-8-3", "-8-3"):
        assert lock_lease_name(name) != "ascheduler-nodes-8-3"
    with pytest.raises(ValueError, match="need the locks on Leases"):
        LockSettings(on="node", lease_groups=4)
    with pytest.raises(ValueError, match="need the locks on Leases"):
        LockSettings(key=HAMI_KEY, lease_groups=4)
    with pytest.raises(ValueError, match="0 to"):
        LockSettings(lease_groups=-1)


class Started:
    """Which binds have gone out (FakeFramework's `during_bind`), to wait for."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._events: dict[str, asyncio.Event] = {}

    def __call__(self, name: str) -> None:
        self.names.append(name)
        self._events.setdefault(name, asyncio.Event()).set()

    async def wait(self, name: str) -> None:
        await self._events.setdefault(name, asyncio.Event()).wait()


async def test_binds_to_two_nodes_of_a_group_share_its_hold_at_once() -> None:
    """While binds to n hold the group's lock, binds to m join that hold instead of waiting
    for it: one lock write, both in flight together."""
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=1)
    gate = asyncio.Event()
    started = Started()
    fw = FakeFramework(api, {}, during_bind=started, gates={"p0": gate})
    first = asyncio.create_task(bind_to(binder, fw, "p0", "n"))
    await started.wait("p0")
    second = asyncio.create_task(bind_to(binder, fw, "p1", "m"))
    await started.wait("p1")
    assert not first.done()  # p0's bind still holds the lock; p1's went out beside it
    gate.set()
    assert (await first).ok
    assert (await second).ok
    assert api.log[0] == f"lock {ME}"
    assert sorted(api.log[1:3]) == ["bound p0", "bound p1"]
    assert api.log[3:] == ["unlock"]
    assert binder.locks._sharing == {}


async def test_a_group_hold_another_instance_asked_for_is_not_joined() -> None:
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=1, linger=10.0)
    gate = asyncio.Event()
    started = Started()
    fw = FakeFramework(api, {}, during_bind=started, gates={"p0": gate})
    first = asyncio.create_task(bind_to(binder, fw, "p0", "n"))
    await started.wait("p0")
    binder.locks.observe("0/1", {f"{DEFAULT_KEY}-wanted": "instance-b"})
    second = asyncio.create_task(bind_to(binder, fw, "p1", "m"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert started.names == ["p0"]  # p1 waits for the hold to be let go
    gate.set()
    assert (await first).ok
    assert (await second).ok
    # Let go (not parked: asked for), then taken afresh for p1.
    assert api.log[:4] == [f"lock {ME}", "bound p0", "unlock", f"lock {ME}"]


async def test_a_shared_group_hold_is_let_go_when_its_last_user_is_cancelled() -> None:
    api = FakeNodeApi()
    binder = binder_for(api, on="lease", groups=1)
    gates = {"p0": asyncio.Event(), "p1": asyncio.Event()}
    started = Started()
    fw = FakeFramework(api, {}, during_bind=started, gates=gates)
    tasks = [
        asyncio.create_task(bind_to(binder, fw, "p0", "n")),
        asyncio.create_task(bind_to(binder, fw, "p1", "m")),
    ]
    await started.wait("p0")
    await started.wait("p1")
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert api.log == [f"lock {ME}", "unlock"]
    assert binder.locks.held == {}
    assert binder.locks._sharing == {}


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        BindSettings(policy="sometimes")
