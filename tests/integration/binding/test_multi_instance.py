"""Several ascheduler instances sharing nodes through node locks, on the real plane."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from ascheduler.binding.nodelock import DEFAULT_KEY, format_time
from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    lock_annotations,
    node_of,
    pause_pod,
    pods_in,
    scheduler,
    set_lock,
    wait_bound,
)

GPU = "nvidia.com/gpu"


def gpu_pod(name: str, scheduler_name: str) -> dict[str, object]:
    return pause_pod(name, scheduler_name=scheduler_name, extra={GPU: "1"})


async def test_two_instances_never_overcommit_shared_gpu_nodes(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    per_node = 2
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-g", extended={GPU: str(per_node)}))
    shared = f"{namespace}-shared"
    # Locks on the Node here (three instances on Leases below).
    node_locks = ("--node-lock-object", "node")
    with (
        scheduler(plane, plane_state, "ascheduler-a", shared, *node_locks),
        scheduler(plane, plane_state, "ascheduler-b", shared, *node_locks),
    ):
        await create_pods(kube, namespace, [gpu_pod(f"g{i}", shared) for i in range(10)])

        async def six_bound() -> dict[str, str] | None:
            pods = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in pods.items() if node_of(p)}
            return placed if len(placed) == 6 else None

        placed = await eventually(six_bound, what="6 of 10 GPU pods bound", timeout=90)
        # Both instances keep trying the 4 that do not fit; none may land anywhere.
        pods = await pods_in(kube, namespace)
        assert sum(1 for p in pods.values() if node_of(p)) == 6
        assert Counter(placed.values()) == {n: per_node for n in names}
        for name in placed:
            annotations = pods[name]["metadata"].get("annotations") or {}
            assert annotations.get("ascheduler.io/bind-phase") == "success"
            assert annotations.get("ascheduler.io/bind-time", "").isdigit()

        # Room for exactly the other 4 appears: both instances race for it, all are bound.
        (extra,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-x", extended={GPU: "4"}))
        placed = await wait_bound(kube, namespace, [f"g{i}" for i in range(10)], timeout=90)
        assert Counter(placed.values()) == {**{n: per_node for n in names}, extra: 4}
    assert await lock_annotations(kube, [*names, extra]) == {}


async def test_three_instances_on_lease_locks_never_overcommit_exact_fit_nodes(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    per_node = 2
    names = await nodes(FakeNodes(count=4, prefix=f"{namespace}-g", extended={GPU: str(per_node)}))
    shared = f"{namespace}-shared"
    with (
        scheduler(plane, plane_state, "ascheduler-1", shared),
        scheduler(plane, plane_state, "ascheduler-2", shared),
        scheduler(plane, plane_state, "ascheduler-3", shared),
    ):
        await create_pods(kube, namespace, [gpu_pod(f"g{i}", shared) for i in range(12)])

        async def eight_bound() -> dict[str, str] | None:
            pods = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in pods.items() if node_of(p)}
            return placed if len(placed) == 8 else None

        placed = await eventually(eight_bound, what="8 of 12 GPU pods bound", timeout=90)
        # All three keep trying the 4 that do not fit; none may land anywhere.
        pods = await pods_in(kube, namespace)
        assert sum(1 for p in pods.values() if node_of(p)) == 8
        assert Counter(placed.values()) == {n: per_node for n in names}
        for name in placed:
            assert "ascheduler.io/bind-phase" in (pods[name]["metadata"].get("annotations") or {})
        (extra,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-x", extended={GPU: "4"}))
        placed = await wait_bound(kube, namespace, [f"g{i}" for i in range(12)], timeout=90)
        assert Counter(placed.values()) == {**{n: per_node for n in names}, extra: 4}
        # The locks lived on the nodes' Leases: the Nodes were never written.
        for node in [*names, extra]:
            obj = await kube.get(f"/api/v1/nodes/{node}")
            assert DEFAULT_KEY not in (obj["metadata"].get("annotations") or {})
    assert await lock_annotations(kube, [*names, extra]) == {}


@pytest.mark.parametrize("on", ["lease", "node"])
async def test_a_crashed_holders_lock_is_recovered_after_the_timeout(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    on: str,
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-g", extended={GPU: "1"}))
    shared = f"{namespace}-sched"
    # A lock held for a pod that is alive, as a scheduler killed mid-bind leaves it.
    await create_pods(kube, namespace, [pause_pod("holder", scheduler_name="nobody")])
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await set_lock(kube, node, f"{now},{namespace},holder", on)
    with scheduler(
        plane,
        plane_state,
        "ascheduler-c",
        shared,
        "--node-lock-object",
        on,
        env={"ASCHEDULER_NODELOCK_EXPIRE": "3s"},
    ) as record:
        await create_pods(kube, namespace, [gpu_pod("waiting", shared)])
        placed = await wait_bound(kube, namespace, ["waiting"], timeout=60)
        assert placed["waiting"] == node
        log = await asyncio.to_thread(Path(record.log).read_text)
        assert "node_lock_stale" in log  # taken over as stale, not bypassed
    assert await lock_annotations(kube, [node]) == {}


async def test_kill_9_mid_run_leaves_no_lock_stuck(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-g", extended={GPU: "4"}))
    shared = f"{namespace}-sched"
    pods = [gpu_pod(f"g{i}", shared) for i in range(8)]
    with scheduler(plane, plane_state, "ascheduler-d", shared) as victim:
        await create_pods(kube, namespace, pods[:4])
        os.kill(victim.pid, signal.SIGKILL)
    assert not is_alive(victim)
    await create_pods(kube, namespace, pods[4:])
    with scheduler(plane, plane_state, "ascheduler-e", shared, "--node-lock-timeout", "3s"):
        placed = await wait_bound(kube, namespace, [f"g{i}" for i in range(8)], timeout=90)
    assert Counter(placed.values()) == {n: 4 for n in names}
    assert await lock_annotations(kube, names) == {}


@pytest.mark.parametrize("on", ["lease", "node"])
async def test_a_stale_lock_on_a_node_nobody_binds_to_is_cleared(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    on: str,
) -> None:
    """A dead instance's lock on a node no pod needs any more: a live instance clears it once
    it has seen it for the timeout, without any bind to that node."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-idle", extended={GPU: "1"}))
    dead = f"{format_time(dt.datetime.now(dt.UTC), 0)},instance-that-died"
    await set_lock(kube, node, dead, on)
    with scheduler(
        plane,
        plane_state,
        "ascheduler-sweep",
        f"{namespace}-s",
        "--node-lock-timeout",
        "3s",
        "--node-lock-object",
        on,
    ) as record:

        async def cleared() -> bool:
            return await lock_annotations(kube, [node]) == {}

        await eventually(cleared, what="the stale lock cleared by the sweep", timeout=60)
        log = await asyncio.to_thread(Path(record.log).read_text)
    assert "node_lock_stale_cleared" in log
