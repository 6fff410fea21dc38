"""Several ascheduler instances sharing nodes through node locks, on the real plane."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient
from ascheduler.locks.keys import DEFAULT_KEY, group_key
from ascheduler.locks.settings import DEFAULT_LEASE_GROUPS
from ascheduler.locks.values import format_time
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


@pytest.mark.parametrize(
    ("instances", "full_nodes", "on", "groups"),
    [
        (2, 3, "node", ()),
        (3, 4, "lease", ()),
        (3, 4, "lease", (0, 0, 0)),
        (3, 4, "lease", (2, 2, 2)),
        (3, 4, "lease", (0, 2, 3)),
    ],
    ids=[
        "two-instances-node-locks",
        "three-instances-lease-locks-default-groups",
        "three-instances-a-lease-per-node",
        "three-instances-lease-groups",
        "three-instances-each-grouping-nodes-its-own-way",
    ],
)
async def test_instances_sharing_exact_fit_gpu_nodes_never_overcommit_them(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    instances: int,
    full_nodes: int,
    on: str,
    groups: tuple[int, ...],
) -> None:
    """`instances` schedulers race for `full_nodes` nodes of 2 GPUs with 4 pods more than
    fit; exactly the room is used, then a node with room for the 4 takes them. With
    `groups`, instance i shares a lock Lease among each of `groups[i]` groups of nodes (0: a
    Lease per node; without, the default); instances that group the nodes differently still
    never overcommit."""
    per_node = 2
    names = await nodes(
        FakeNodes(count=full_nodes, prefix=f"{namespace}-g", extended={GPU: str(per_node)})
    )
    fit = per_node * full_nodes
    total = fit + 4
    shared = f"{namespace}-shared"
    with contextlib.ExitStack() as running:
        for i in range(instances):
            grouping = ("--node-lock-lease-groups", str(groups[i])) if groups else ()
            running.enter_context(
                scheduler(
                    plane,
                    plane_state,
                    f"ascheduler-{i}",
                    shared,
                    "--node-lock-object",
                    on,
                    *grouping,
                )
            )
        await create_pods(kube, namespace, [gpu_pod(f"g{i}", shared) for i in range(total)])

        async def all_room_used() -> dict[str, str] | None:
            pods = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in pods.items() if node_of(p)}
            return placed if len(placed) == fit else None

        placed = await eventually(all_room_used, what=f"{fit} GPU pods bound", timeout=90)
        # Every instance keeps trying the 4 that do not fit; none may land anywhere.
        pods = await pods_in(kube, namespace)
        assert sum(1 for p in pods.values() if node_of(p)) == fit
        assert Counter(placed.values()) == {n: per_node for n in names}
        for name in placed:
            annotations = pods[name]["metadata"].get("annotations") or {}
            assert annotations.get("ascheduler.io/bind-phase") == "success"
            assert annotations.get("ascheduler.io/bind-time", "").isdigit()
        # Room for exactly the other 4 appears: the instances race for it, all are bound.
        (extra,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-x", extended={GPU: "4"}))
        placed = await wait_bound(kube, namespace, [f"g{i}" for i in range(total)], timeout=90)
        assert Counter(placed.values()) == {**{n: per_node for n in names}, extra: 4}
        if on == "lease":  # the Nodes themselves were never written
            for node in [*names, extra]:
                obj = await kube.get(f"/api/v1/nodes/{node}")
                assert DEFAULT_KEY not in (obj["metadata"].get("annotations") or {})
    # Every lock let go at the graceful stops, groups' included.
    layouts = [g for g in groups if g] if groups else [DEFAULT_LEASE_GROUPS] * (on == "lease")
    assert await lock_annotations(kube, [*names, extra], groups=layouts) == {}


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
    # Where the instance looks for the node's lock: its group's Lease (the default layout).
    held = group_key(node, DEFAULT_LEASE_GROUPS) if on == "lease" else node
    await set_lock(kube, held, f"{now},{namespace},holder", on)
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
