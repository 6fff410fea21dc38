"""Two ascheduler instances racing for the same devices, on the real plane: with node locks on,
no device is ever allocated to two claims, node-local or network-attached, and partitions
never overdraw the counter set they share (one GPU's, or one shared by devices of several
nodes; partitionable devices are on from 1.36)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from ascheduler.locks.devicelocks import LEASE_PREFIX
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    acknowledged,
    claiming_pod,
    create_device_class,
    create_pods,
    eventually,
    lock_annotations,
    member_peers,
    node_of,
    plane_since,
    pods_in,
    scheduler,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "race.example.com"


def slice_body(name: str, pool: str, devices: int, *, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"dev-{i}"} for i in range(devices)],
    }
    if node is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim_body(name: str, klass: str, selector: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "deviceClassName": klass,
        "allocationMode": "ExactCount",
        "count": 1,
    }
    if selector is not None:
        request["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": request}]}},
    }


async def _race(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    cluster_objects: list[str],
    slices: list[dict[str, Any]],
    pods: int,
    extra: Sequence[str] = (),
    expect: int | None = None,
    sided: bool = False,
) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """`pods` pods, each with its own claim for one device of the class, scheduled by two
    instances at once (`extra`: their flags); returns where the bound ones went, once every
    device is taken (`expect` of them, and every other pod found unschedulable), and every
    device allocated (one entry per claim allocation). `sided`: each instance's claims ask for
    devices of their own side (attribute `side`), so the two never want the same device."""
    klass = f"{namespace}-race"
    await create_device_class(kube, cluster_objects, klass, DRIVER)
    for body in slices:
        await kube.post(f"{RESOURCE}/resourceslices", body)
        cluster_objects.append(f"{RESOURCE}/resourceslices/{body['metadata']['name']}")
    devices = sum(len(b["spec"].get("devices") or ()) for b in slices)
    if expect is not None:
        devices = expect
    ns = f"{RESOURCE}/namespaces/{namespace}"
    for i in range(pods):
        side = f'device.attributes["{DRIVER}"].side == "{"odd" if i % 2 else "even"}"'
        await kube.post(f"{ns}/resourceclaims", claim_body(f"c{i}", klass, side if sided else None))
    # Each instance has pods of its own (its own scheduler name), so the two allocate for
    # different claims at the same moment, each from a cache that has not seen the other's.
    # The pods come once the two have met: an instance alone writes without the locks.
    first, second = f"{namespace}-a", f"{namespace}-b"
    before = await member_peers(kube)
    with (
        scheduler(plane, plane_state, "ascheduler-a", first, *extra),
        scheduler(plane, plane_state, "ascheduler-b", second, *extra),
    ):
        await acknowledged(kube, before, 2)
        await create_pods(
            kube,
            namespace,
            [
                claiming_pod(f"p{i}", claim=f"c{i}", scheduler_name=first if i % 2 else second)
                for i in range(pods)
            ],
        )

        async def all_taken() -> dict[str, str] | None:
            listed = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in listed.items() if node_of(p)}
            return placed if len(placed) >= devices else None

        placed = await eventually(all_taken, what=f"{devices} claiming pods bound", timeout=120)
        if expect is not None:

            async def rest_refused() -> dict[str, str] | None:
                listed = await pods_in(kube, namespace)
                refused = [
                    n
                    for n, p in listed.items()
                    if any(
                        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                        for c in (p.get("status") or {}).get("conditions") or []
                    )
                ]
                placed = {n: node_of(p) for n, p in listed.items() if node_of(p)}
                return placed if len(placed) + len(refused) >= pods else None

            placed = await eventually(rest_refused, what="the other pods refused", timeout=120)
    claims = (await kube.get(f"{ns}/resourceclaims")).get("items") or []
    allocated = [
        (r["driver"], r["pool"], r["device"])
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    return placed, allocated


async def test_two_instances_never_allocate_a_node_local_device_twice(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-d"))
    slices = [slice_body(f"{n}-race", n, 2, node=n) for n in names]
    placed, allocated = await _race(
        plane, plane_state, kube, namespace, cluster_objects, slices, pods=12
    )
    assert len(placed) == 6
    assert Counter(placed.values()) == {n: 2 for n in names}
    assert len(allocated) == len(set(allocated)), Counter(allocated).most_common(3)
    assert len(allocated) >= 6
    assert await lock_annotations(kube, names) == {}


async def test_two_instances_never_allocate_a_network_attached_device_twice(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-w"))
    slices = [slice_body(f"{namespace}-fabric", f"{namespace}-fabric", 4, node=None)]
    placed, allocated = await _race(
        plane, plane_state, kube, namespace, cluster_objects, slices, pods=10
    )
    assert len(placed) == 4
    assert set(placed.values()) <= set(names)
    assert len(allocated) == len(set(allocated)), Counter(allocated).most_common(3)
    leases = await kube.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")
    pool_leases = [
        item
        for item in leases.get("items") or []
        if item["metadata"]["name"].startswith(LEASE_PREFIX)
    ]
    assert pool_leases, "the pool's lock lives on a Lease"
    for lease in pool_leases:
        assert "ascheduler.io/node-lock" not in (lease["metadata"].get("annotations") or {})


def counter_slice(name: str, pool: str, memory: int, *, node: str | None) -> dict[str, Any]:
    """One counter set `gpu` of `memory` units, the slice of the pool's two that holds it."""
    body = slice_body(name, pool, 0, node=node)
    spec = body["spec"]
    del spec["devices"]
    spec["pool"]["resourceSliceCount"] = 2
    spec["sharedCounters"] = [{"name": "gpu", "counters": {"memory": {"value": str(memory)}}}]
    return body


def partition_slice(name: str, pool: str, nodes: Sequence[str], per_node: int) -> dict[str, Any]:
    """`per_node` partitions per node of `nodes`, each taking one unit of the pool's counter
    set (on one node: in a slice of that node; else each device placed by itself), half of
    them on the `odd` side."""
    body = slice_body(name, pool, 0, node=nodes[0])
    spec = body["spec"]
    spec["pool"]["resourceSliceCount"] = 2
    if len(nodes) > 1:
        del spec["nodeName"]
        spec["perDeviceNodeSelection"] = True
    spec["devices"] = [
        {
            "name": f"part-{n}-{i}",
            "attributes": {"side": {"string": "odd" if i % 2 else "even"}},
            "consumesCounters": [{"counterSet": "gpu", "counters": {"memory": {"value": "1"}}}],
            **({"nodeName": node} if len(nodes) > 1 else {}),
        }
        for n, node in enumerate(nodes)
        for i in range(per_node)
    ]
    return body


@pytest.mark.skipif(not plane_since(1, 36), reason="DRAPartitionableDevices: on from 1.36")
async def test_two_instances_never_overdraw_the_counters_of_one_gpus_partitions(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    (name,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-g"))
    pool = f"{namespace}-gpu"
    slices = [
        counter_slice(f"{pool}-counters", pool, 4, node=name),
        partition_slice(f"{pool}-parts", pool, [name], 8),
    ]
    placed, allocated = await _race(
        plane, plane_state, kube, namespace, cluster_objects, slices, pods=10, expect=4, sided=True
    )
    assert len(placed) == 4
    assert len(allocated) == len(set(allocated)), Counter(allocated).most_common(3)
    assert len(allocated) == 4, allocated  # one unit each, four in the set
    assert await lock_annotations(kube, [name]) == {}


@pytest.mark.skipif(not plane_since(1, 36), reason="DRAPartitionableDevices: on from 1.36")
async def test_two_instances_never_overdraw_a_counter_set_shared_across_nodes(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-s"))
    pool = f"{namespace}-shared"
    slices = [
        counter_slice(f"{pool}-counters", pool, 4, node=None),
        partition_slice(f"{pool}-parts", pool, names, 2),
    ]
    placed, allocated = await _race(
        plane, plane_state, kube, namespace, cluster_objects, slices, pods=10, expect=4, sided=True
    )
    assert len(placed) == 4
    assert len(allocated) == len(set(allocated)), Counter(allocated).most_common(3)
    assert len(allocated) == 4, allocated
