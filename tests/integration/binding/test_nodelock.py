"""The Node-annotation lock against the real API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.kube import KubeClient
from ascheduler.locks import LockContended, LockSettings, NodeLocks
from ascheduler.locks.keys import DEFAULT_KEY, HAMI_KEY, WANTED_SUFFIX
from ascheduler.model import PodInfo, parse_pod
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import create_pods, eventually, pause_pod


async def annotation(kube: KubeClient, node: str, key: str = DEFAULT_KEY) -> str | None:
    obj = await kube.get(f"/api/v1/nodes/{node}")
    value = (obj["metadata"].get("annotations") or {}).get(key)
    return None if value is None else str(value)


async def set_annotation(
    kube: KubeClient, node: str, value: str | None, key: str = DEFAULT_KEY
) -> None:
    await kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {key: value}}})


async def real_pod(kube: KubeClient, namespace: str, name: str) -> PodInfo:
    await create_pods(kube, namespace, [pause_pod(name, scheduler_name="nobody")])
    body: dict[str, Any] = await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return parse_pod(body)


async def test_acquire_release_and_ownership(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    pod = await real_pod(kube, namespace, "a")
    mine = NodeLocks(kube, LockSettings(identity="instance-a"))
    # An instance that does not wait for a hand-over: it fails at its first look.
    theirs = NodeLocks(kube, LockSettings(identity="instance-b", handover_wait=0.0))

    hold = await mine.acquire(node, pod)
    assert await annotation(kube, node) == hold.value
    assert hold.value.endswith(",instance-a")

    with pytest.raises(LockContended, match="instance instance-a"):
        await theirs.acquire(node, pod)  # fresh, and held by another instance
    assert theirs.stats.contended == 1

    await mine.release(hold)
    assert await annotation(kube, node) is None
    other = await theirs.acquire(node, pod)
    await mine.release(hold)  # a second release of an old hold leaves the new lock alone
    assert await annotation(kube, node) == other.value
    await theirs.release(other)
    assert await annotation(kube, node) is None


async def test_an_instance_meeting_the_lock_waits_for_the_hand_over(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    """With the default wait, a bind that meets another instance's lock asks for it, and takes
    it once the holder lets it go, instead of failing."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    pod = await real_pod(kube, namespace, "a")
    mine = NodeLocks(kube, LockSettings(identity="instance-a"))
    theirs = NodeLocks(kube, LockSettings(identity="instance-b"))
    hold = await mine.acquire(node, pod)
    taking = asyncio.create_task(theirs.acquire(node, pod))
    wanted = DEFAULT_KEY + WANTED_SUFFIX

    async def asked() -> bool:
        return await annotation(kube, node, wanted) == "instance-b"

    await eventually(asked, what="instance-b asking for the lock")
    assert not taking.done()
    await mine.release(hold)
    other = await taking
    assert other.value.endswith(",instance-b")
    assert await annotation(kube, node) == other.value
    assert await annotation(kube, node, wanted) is None  # the take clears the request
    await theirs.release(other)


async def test_hami_locks_dangling_stale_and_garbage(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    b = await real_pod(kube, namespace, "b")
    alive = await real_pod(kube, namespace, "alive")
    timeout = 2.0
    locks = NodeLocks(kube, LockSettings(key=HAMI_KEY, timeout=timeout))

    # HAMi's own format, naming a pod that does not exist: dangling, taken over at once.
    await set_annotation(kube, node, f"2026-11-23T00:00:00Z,{namespace},gone", HAMI_KEY)
    hold = await locks.acquire(node, b)
    assert locks.stats.dangling_recovered == 1
    assert hold.value.endswith(f",{namespace},b")  # HAMi's format, naming our pod
    await locks.release(hold)

    # Naming a live pod, with a time long past: respected (we do not trust the time inside
    # a value) until this instance has seen it for the timeout.
    for value in (f"2000-01-01T00:00:00Z,{namespace},{alive.name}", "2000-01-01T00:00:00Z"):
        await set_annotation(kube, node, value, HAMI_KEY)
        with pytest.raises(LockContended):
            await locks.acquire(node, b)

        async def taken() -> bool:
            try:
                await locks.release(await locks.acquire(node, b))
            except LockContended:
                return False
            return True

        await eventually(taken, what=f"{value!r} taken over once stale", interval=0.5)
    assert locks.stats.stale_recovered == 2
    assert await annotation(kube, node, HAMI_KEY) is None


async def test_hold_releases_on_error_and_on_cancellation(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    a = await real_pod(kube, namespace, "a")
    locks = NodeLocks(kube)

    async def failing_bind() -> None:
        async with locks.hold(node, a):
            assert await annotation(kube, node) is not None
            raise RuntimeError("bind failed")

    with pytest.raises(RuntimeError, match="bind failed"):
        await failing_bind()
    assert await annotation(kube, node) is None

    entered = asyncio.Event()

    async def bind_forever() -> None:
        async with locks.hold(node, a):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(bind_forever())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await annotation(kube, node) is None
    assert locks.held == {}


async def test_graceful_release_all(kube: KubeClient, namespace: str, nodes: NodeFactory) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    a = await real_pod(kube, namespace, "a")
    locks = NodeLocks(kube)
    for node in names:
        await locks.acquire(node, a)
    await locks.release_all()
    assert [await annotation(kube, n) for n in names] == [None, None]
    assert locks.held == {}
