"""The Node-annotation lock against the real API server."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from ascheduler.binding.nodelock import DEFAULT_KEY, LockContended, LockSettings, NodeLocks
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.kube import KubeClient
from ascheduler.model import PodInfo, parse_pod
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import create_pods, pause_pod


async def annotation(kube: KubeClient, node: str) -> str | None:
    obj = await kube.get(f"/api/v1/nodes/{node}")
    value = (obj["metadata"].get("annotations") or {}).get(DEFAULT_KEY)
    return None if value is None else str(value)


async def set_annotation(kube: KubeClient, node: str, value: str | None) -> None:
    await kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {DEFAULT_KEY: value}}})


async def real_pod(kube: KubeClient, namespace: str, name: str) -> PodInfo:
    await create_pods(kube, namespace, [pause_pod(name, scheduler_name="nobody")])
    body: dict[str, Any] = await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return parse_pod(body)


async def test_acquire_release_and_ownership(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    a = await real_pod(kube, namespace, "a")
    b = await real_pod(kube, namespace, "b")
    locks = NodeLocks(kube)

    await locks.acquire(node, a)
    value = await annotation(kube, node)
    assert value is not None
    assert value.endswith(f",{namespace},a")
    await locks.acquire(node, a)  # the same pod again: fine

    with pytest.raises(LockContended, match=f"{namespace}/a"):
        await locks.acquire(node, b)  # a is alive and the lock is fresh
    assert locks.stats.contended == 1

    assert await locks.release(node, b) is False  # b never releases a's lock
    assert await annotation(kube, node) == value
    assert await locks.release(node, a) is True
    assert await annotation(kube, node) is None


async def test_dangling_stale_and_garbage_locks_are_taken_over(
    kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    b = await real_pod(kube, namespace, "b")
    locks = NodeLocks(kube, LockSettings(timeout=60))
    fresh = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    await set_annotation(kube, node, f"{fresh},{namespace},gone")  # owner pod does not exist
    await locks.acquire(node, b)
    assert locks.stats.dangling_recovered == 1
    await locks.release(node, b)

    alive = await real_pod(kube, namespace, "alive")
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await set_annotation(kube, node, f"{old},{namespace},{alive.name}")  # older than 60 s
    await locks.acquire(node, b)
    assert locks.stats.stale_recovered == 1
    await locks.release(node, b)

    await set_annotation(kube, node, "this is not a lock")
    await locks.acquire(node, b)
    assert locks.stats.stale_recovered == 2
    assert (await annotation(kube, node) or "").endswith(f",{namespace},b")
    await locks.release(node, b, force=True)
    assert await annotation(kube, node) is None


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
