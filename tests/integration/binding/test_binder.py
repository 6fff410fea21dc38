"""LockedBinder in process against the real API server: binds to one node coalesce under one
hold, each is re-validated against the API server's list plus the binds made in that hold, and
every failure path leaves no lock behind."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from ascheduler.app import build_frameworks
from ascheduler.binding.binder import BindSettings, LockedBinder
from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.framework import CycleState, Status
from ascheduler.framework.runtime import Framework
from ascheduler.kube import KubeClient
from ascheduler.locks import LockSettings, Members
from ascheduler.locks.keys import LockObject, group_key
from ascheduler.locks.memberlease import MEMBER_SELECTOR, parse_member
from ascheduler.locks.values import format_time
from ascheduler.metrics import REST_CLIENT_REQUESTS
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.plugins import IN_TREE
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    LOCK_NAMESPACE,
    create_pods,
    eventually,
    lease_path,
    lock_value,
    pause_pod,
    pods_in,
    set_lock,
)

PHASE = "ascheduler.io/bind-phase"


@pytest.fixture(params=["lease", "node"])
def on(request: pytest.FixtureRequest) -> LockObject:
    """Every test runs with the lock on the node's Lease and on the Node itself."""
    value: LockObject = request.param
    return value


async def setup(
    kube: KubeClient, namespace: str, node: str, count: int, on: LockObject
) -> tuple[Framework, LockedBinder, list[PodInfo]]:
    cache = Cache()
    cache.add_node(parse_node(await kube.get(f"/api/v1/nodes/{node}")))
    fw = build_frameworks(SchedulerConfig(), IN_TREE, cache, kube)[DEFAULT_SCHEDULER_NAME]
    await create_pods(
        kube, namespace, [pause_pod(f"p{i}", scheduler_name="nobody") for i in range(count)]
    )
    listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
    ours = [parse_pod(p) for p in listing["items"] if p["metadata"]["name"][1:].isdigit()]
    pods = sorted(ours, key=lambda p: int(p.name[1:]))
    # Released at once (lingering holds: tests/unit/locks/test_coalescing.py, and the
    # multi-instance tests, whose instances linger by default).
    settings = BindSettings(policy="all", lock=LockSettings(on=on, linger=0.0))
    return fw, LockedBinder(kube, settings), pods


def holds_and_binds() -> tuple[float, float]:
    """(holds, binds) so far, from `ascheduler_node_lock_binds_per_hold`."""
    count = REGISTRY.get_sample_value("ascheduler_node_lock_binds_per_hold_count") or 0.0
    total = REGISTRY.get_sample_value("ascheduler_node_lock_binds_per_hold_sum") or 0.0
    return count, total


def bind_all(
    binder: LockedBinder, fw: Framework, pods: list[PodInfo], node: str
) -> list[asyncio.Task[Status]]:
    return [asyncio.create_task(binder.bind(fw, CycleState(), p, node)) for p in pods]


async def test_binds_to_one_node_share_one_hold(
    kube: KubeClient, namespace: str, nodes: NodeFactory, on: LockObject
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    fw, binder, pods = await setup(kube, namespace, node, 12, on)
    holds, binds = holds_and_binds()
    statuses = await asyncio.gather(*bind_all(binder, fw, pods, node))
    assert all(s.ok for s in statuses), [s.message for s in statuses]
    # The first bind led; the other eleven queued while it took the lock.
    assert holds_and_binds() == (holds + 1, binds + 12)
    assert binder.locks.stats.acquired == 1
    if on == "lease":  # made on first use, owned by the node (gone with it)
        lease = await kube.get(lease_path(node))
        uid = (await kube.get(f"/api/v1/nodes/{node}"))["metadata"]["uid"]
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
        ]
    on_api = await pods_in(kube, namespace)
    assert {p["spec"]["nodeName"] for p in on_api.values()} == {node}
    assert {p["metadata"]["annotations"][PHASE] for p in on_api.values()} == {"success"}
    assert await lock_value(kube, node, on) is None


async def test_each_bind_in_a_hold_counts_the_ones_before_it(
    kube: KubeClient, namespace: str, nodes: NodeFactory, on: LockObject
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", pods=5))
    fw, binder, pods = await setup(kube, namespace, node, 7, on)
    statuses = await asyncio.gather(*bind_all(binder, fw, pods, node))
    assert [s.ok for s in statuses] == [True] * 5 + [False] * 2
    assert all("no longer fits: Too many pods" in s.message for s in statuses[5:])
    on_api = await pods_in(kube, namespace)
    assert sum(1 for p in on_api.values() if p["spec"].get("nodeName")) == 5
    # Refused before their Binding: no phase at all (nothing but a Binding carries it).
    assert not (on_api["p5"]["metadata"].get("annotations") or {}).get(PHASE)
    assert await lock_value(kube, node, on) is None


async def test_a_cancelled_waiter_is_skipped_and_the_rest_served(
    kube: KubeClient, namespace: str, nodes: NodeFactory, on: LockObject
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    fw, binder, pods = await setup(kube, namespace, node, 3, on)
    tasks = bind_all(binder, fw, pods, node)
    await asyncio.sleep(0)  # every task has queued; the leader waits on the API server
    tasks[1].cancel()
    results: list[Any] = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert results[0].ok
    assert results[2].ok
    on_api = await pods_in(kube, namespace)
    assert not on_api["p1"]["spec"].get("nodeName")
    assert on_api["p2"]["spec"]["nodeName"] == node
    assert await lock_value(kube, node, on) is None


async def test_a_contended_lock_fails_the_whole_queue_and_keeps_the_holders_lock(
    kube: KubeClient, namespace: str, nodes: NodeFactory, on: LockObject
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    foreign = f"{format_time(dt.datetime.now(dt.UTC), 0)},instance-elsewhere"
    await set_lock(kube, node, foreign, on)
    fw, binder, pods = await setup(kube, namespace, node, 3, on)
    statuses = await asyncio.gather(*bind_all(binder, fw, pods, node))
    assert not any(s.ok for s in statuses)
    assert all("locked by instance instance-elsewhere" in s.message for s in statuses)
    assert await lock_value(kube, node, on) == foreign
    on_api = await pods_in(kube, namespace)
    assert not any(p["spec"].get("nodeName") for p in on_api.values())
    assert binder._queues == {}  # the node is free for the next leader
    await set_lock(kube, node, None, on)


async def test_the_next_hold_starts_from_our_own_release_not_a_stale_cache(
    kube: KubeClient, namespace: str, nodes: NodeFactory, on: LockObject
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    fw, binder, pods = await setup(kube, namespace, node, 3, on)
    host = kube.server.split("://", 1)[-1]

    def requests(method: str, code: str) -> float:
        return REST_CLIENT_REQUESTS.labels(code=code, method=method, host=host)._value.get()

    def listed() -> float:
        return (
            REGISTRY.get_sample_value(
                "ascheduler_node_lock_revalidations_total", {"source": "list"}
            )
            or 0.0
        )

    # One after the other, three holds; the cache keeps the version it had before the first
    # (kwok may have moved the node on since, so the first lock may meet a 409).
    # Lock writes replace a Lease known whole (PUT) and patch a Node.
    write = "PUT" if on == "lease" else "PATCH"
    assert (await binder.bind(fw, CycleState(), pods[0], node)).ok
    before = {k: requests(*k) for k in ((write, "409"), ("GET", "200"), (write, "200"))}
    lists = listed()
    for pod in pods[1:]:
        status = await binder.bind(fw, CycleState(), pod, node)
        assert status.ok, status.message
    after = {k: requests(*k) - before[k] for k in before}
    # Each later hold: lock and unlock writes (the Binding carries the phase), no 409 and
    # re-read from locking at a version our own release had already replaced, and a LIST
    # only where the object moved since our release (a heartbeat on a Node; never on a Lease,
    # which only lockers write).
    relisted = listed() - lists
    assert after == {(write, "409"): 0, ("GET", "200"): relisted, (write, "200"): 4}
    if on == "lease":
        assert relisted == 0


async def test_the_lease_watch_confirms_a_hold_and_finds_it_taken(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    """Between its batches a hold checks that its lock is still its own: once the Lease
    informer has shown the hold's value, the informer answers without a read, and another
    value written there behind the hold's back loses the hold."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    _, binder, pods = await setup(kube, namespace, node, 1, "lease")
    (key,) = binder.lock_keys(node)
    informer = binder.lease_informer(kube)
    assert informer is not None
    host = kube.server.split("://", 1)[-1]

    def gets() -> float:
        return REST_CLIENT_REQUESTS.labels(code="200", method="GET", host=host)._value.get()

    async def until(done: Callable[[], bool]) -> None:
        for _ in range(300):
            if done():
                return
            await asyncio.sleep(0.1)

    watching = asyncio.create_task(informer.run())
    foreign = f"{format_time(dt.datetime.now(dt.UTC), 1)},instance-elsewhere"
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        async with binder.locks.hold_all([key], pods[0], node=node) as holds:
            (hold,) = holds.holds
            await until(lambda: hold.confirmed)
            assert hold.confirmed
            before = gets()
            assert await binder.locks.still_all_ours(holds)
            assert gets() == before  # the watch answered
            await set_lock(kube, key, foreign, "lease")
            await until(lambda: hold.lost)
            assert hold.lost
            before = gets()
            assert not await binder.locks.still_all_ours(holds)
            assert gets() == before
        # Let go without touching the lock that replaced ours.
        assert await lock_value(kube, key, "lease") == foreign
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await set_lock(kube, key, None, "lease")


async def test_binds_take_their_node_s_lock_under_every_grouping_in_use(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    """This instance shares a lock Lease among 4 groups of nodes; another member keeps a
    Lease per node (an older version, say): a bind takes both locks, the group's and the
    node's, and its hold keeps both."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    cache = Cache()
    cache.add_node(parse_node(await kube.get(f"/api/v1/nodes/{node}")))
    fw = build_frameworks(SchedulerConfig(), IN_TREE, cache, kube)[DEFAULT_SCHEDULER_NAME]
    await create_pods(kube, namespace, [pause_pod("p0", scheduler_name="nobody")])
    listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
    (pod,) = [parse_pod(p) for p in listing["items"]]
    other = Members(kube, LOCK_NAMESPACE, f"{namespace}-other", may_be_alone=False)
    lock = LockSettings(identity=f"{namespace}-me", linger=60.0, when_alone="lock", lease_groups=4)
    binder = LockedBinder(kube, BindSettings(policy="all", lock=lock), register=True)
    assert binder.members is not None
    try:
        await other.join()
        await binder.members.join()
        members = binder.members

        async def acknowledged() -> bool:
            # What a scheduler's Lease informer tells its member view: an instance another
            # test runs beside this one (the session's scheduler) may bind alone, so it
            # must acknowledge ours first.
            listing = await kube.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases",
                params={"labelSelector": MEMBER_SELECTOR},
            )
            for raw in listing.get("items") or []:
                if (member := parse_member(raw)) is not None:
                    members.observe(member)
            return members.ready()

        await eventually(acknowledged, what="every member acknowledging this one", timeout=30)
        # Ours and the other's; that other instance adds its own, and is locked under too.
        in_use = binder.members.groupings()
        assert {0, 4} <= in_use
        status = await binder.bind(fw, CycleState(), pod, node)
        assert status.ok, status.message
        keys = sorted({group_key(node, groups) for groups in in_use})
        assert node in keys
        assert group_key(node, 4) in keys
        assert sorted(binder.locks.held) == keys
        for key in keys:
            value = await lock_value(kube, key)
            assert value is not None
            assert value.endswith(f",{namespace}-me")
        await binder.locks.release_all()
        for key in keys:
            assert await lock_value(kube, key) is None
    finally:
        await binder.locks.release_all()
        await binder.members.leave()
        await other.leave()
