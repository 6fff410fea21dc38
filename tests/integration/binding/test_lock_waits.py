"""Another instance's node lock is a wait, not an error; a stopped instance holds no lock.

On the real plane: a pod whose node (its lease group) is locked by another instance is
reported `PodScheduled=False/Unschedulable` saying so, never `SchedulerError`, and is bound
once the lock is let go, through the locked bind and through DynamicResources' device locks
alike; an instance stopped by SIGTERM while it holds a lock leaves none on any lock Lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient
from ascheduler.locks.keys import DEFAULT_KEY, GROUP_LEASE_PREFIX, group_key
from ascheduler.locks.settings import DEFAULT_LEASE_GROUPS
from ascheduler.locks.values import format_time
from tests.integration.binding.test_multi_instance_dra import RESOURCE, claim_body, slice_body
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    LOCK_NAMESPACE,
    claiming_pod,
    create_pods,
    eventually,
    get_pod,
    lock_annotations,
    lock_value,
    pause_pod,
    scheduled_condition,
    scheduler,
    set_lock,
    wait_bound,
)

GPU = "nvidia.com/gpu"
ELSEWHERE = "instance-elsewhere"


async def device_pod(
    kube: KubeClient, namespace: str, node: str, scheduler_name: str, cluster_objects: list[str]
) -> dict[str, Any]:
    """A pod claiming one device of a slice local to `node` (DynamicResources allocates it
    under the node's lock)."""
    klass = f"{namespace}-wait"
    await kube.post(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": klass},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "race.example.com"'}}]},
        },
    )
    cluster_objects.append(f"{RESOURCE}/deviceclasses/{klass}")
    body = slice_body(f"{node}-wait", node, 1, node=node)
    await kube.post(f"{RESOURCE}/resourceslices", body)
    cluster_objects.append(f"{RESOURCE}/resourceslices/{body['metadata']['name']}")
    await kube.post(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", claim_body("c", klass))
    return claiming_pod("waiting", claim="c", scheduler_name=scheduler_name)


@pytest.mark.parametrize("through", ["locked-bind", "device-lock"])
async def test_a_pod_meeting_another_instances_lock_waits_then_binds_once_it_is_let_go(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
    through: str,
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-l", extended={GPU: "1"}))
    shared = f"{namespace}-sched"
    # Another instance, alive as far as anyone can tell, holds the lock of the node's group.
    held = group_key(node, DEFAULT_LEASE_GROUPS)
    foreign = f"{format_time(dt.datetime.now(dt.UTC), 0)},{ELSEWHERE}"
    await set_lock(kube, held, foreign)
    try:
        if through == "locked-bind":
            pod = pause_pod("waiting", scheduler_name=shared, extra={GPU: "1"})
        else:
            pod = await device_pod(kube, namespace, node, shared, cluster_objects)
        with scheduler(plane, plane_state, "ascheduler-w", shared):
            await create_pods(kube, namespace, [pod])

            async def told_to_wait() -> dict[str, Any] | None:
                cond = scheduled_condition(await get_pod(kube, namespace, "waiting"))
                if cond is not None and cond.get("status") == "False":
                    return cond
                return None

            condition = await eventually(told_to_wait, what="the pod's condition", timeout=60)
            # A wait, not an error: who holds the node, and that the pod will be retried.
            assert condition["reason"] == "Unschedulable", condition
            assert f"node {node}" in condition["message"]
            assert f"is locked by instance {ELSEWHERE}" in condition["message"]
            assert "will be retried" in condition["message"]
            assert await lock_value(kube, held) == foreign  # respected, not taken over
            # The other instance lets it go: the pod is bound.
            await set_lock(kube, held, None)
            placed = await wait_bound(kube, namespace, ["waiting"], timeout=60)
            assert placed == {"waiting": node}
    finally:
        await set_lock(kube, held, None)
    assert await lock_annotations(kube, [node]) == {}


async def lock_leases(kube: KubeClient) -> dict[str, str]:
    """Every lock Lease of this project holding a node lock: name -> value."""
    leases = await kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases",
        params={"labelSelector": "app.kubernetes.io/managed-by=ascheduler"},
    )
    found = {}
    for lease in leases.get("items") or []:
        value = (lease["metadata"].get("annotations") or {}).get(DEFAULT_KEY)
        if value:
            found[lease["metadata"]["name"]] = str(value)
    return found


async def test_an_instance_stopped_by_sigterm_leaves_no_lock_held(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-s", extended={GPU: "2"}))
    shared = f"{namespace}-sched"
    before = await lock_leases(kube)
    # Holds stay taken after their binds for as long as the test needs (no idle release),
    # and the lock is taken even alone: at the stop, the instance holds its locks.
    with scheduler(
        plane,
        plane_state,
        "ascheduler-t",
        shared,
        "--node-lock-linger",
        "10m",
        "--node-lock-when-alone",
        "lock",
    ) as record:
        pods = [pause_pod(f"g{i}", scheduler_name=shared, extra={GPU: "1"}) for i in range(6)]
        await create_pods(kube, namespace, pods)
        await wait_bound(kube, namespace, [f"g{i}" for i in range(6)], timeout=90)
        held = {k: v for k, v in (await lock_leases(kube)).items() if k not in before}
        assert held, "the instance holds the locks of the groups it bound to"
        assert all(name.startswith(GROUP_LEASE_PREFIX) for name in held)
    assert not is_alive(record)
    # Stopped by SIGTERM (the block's end): every lock it held was let go on its way out.
    left = await lock_leases(kube)
    assert not set(held) & set(left), {k: left[k] for k in set(held) & set(left)}
    log = await asyncio.to_thread(Path(record.log).read_text)
    assert "node_locks_released" in log
    assert await lock_annotations(kube, names) == {}
