"""Two ascheduler instances racing for the same devices, on the real plane: with node locks on,
no device is ever allocated to two claims, node-local or network-attached."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from ascheduler.locks.devicelocks import LEASE_PREFIX
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_device_class,
    create_pods,
    eventually,
    lock_annotations,
    node_of,
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


def claim_body(name: str, klass: str) -> dict[str, Any]:
    request = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": 1}
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
) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """`pods` pods, each with its own claim for one device of the class, scheduled by two
    instances at once (`extra`: their flags); returns where the bound ones went, once every
    device is taken, and every device allocated (one entry per claim allocation)."""
    klass = f"{namespace}-race"
    await create_device_class(kube, cluster_objects, klass, DRIVER)
    for body in slices:
        await kube.post(f"{RESOURCE}/resourceslices", body)
        cluster_objects.append(f"{RESOURCE}/resourceslices/{body['metadata']['name']}")
    devices = sum(len(b["spec"]["devices"]) for b in slices)
    ns = f"{RESOURCE}/namespaces/{namespace}"
    for i in range(pods):
        await kube.post(f"{ns}/resourceclaims", claim_body(f"c{i}", klass))
    # Each instance has pods of its own (its own scheduler name), so the two allocate for
    # different claims at the same moment, each from a cache that has not seen the other's.
    first, second = f"{namespace}-a", f"{namespace}-b"
    with (
        scheduler(plane, plane_state, "ascheduler-a", first, *extra),
        scheduler(plane, plane_state, "ascheduler-b", second, *extra),
    ):
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
