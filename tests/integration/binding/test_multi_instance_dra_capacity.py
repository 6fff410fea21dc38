"""Two ascheduler instances racing for one shared device (consumable capacity, on from 1.36),
on the real plane: with node locks on, the shares they write never take the device past its
capacity, and every share is recorded as kube-scheduler records one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from ascheduler.model.quantity import parse_fraction
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_device_class,
    create_pods,
    eventually,
    lock_annotations,
    node_of,
    plane_since,
    pods_in,
    scheduler,
)

pytestmark = pytest.mark.skipif(
    not plane_since(1, 36), reason="consumable capacity is off before 1.36"
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "share.example.com"
GIB = 2**30


def shared_slice(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [
                {
                    "name": "shared",
                    "allowMultipleAllocations": True,
                    "capacity": {"memory": {"value": "40Gi"}},
                }
            ],
        },
    }


def asking_claim(name: str, klass: str, memory: str) -> dict[str, Any]:
    request = {
        "deviceClassName": klass,
        "allocationMode": "ExactCount",
        "count": 1,
        "capacity": {"requests": {"memory": memory}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "mem", "exactly": request}]}},
    }


async def test_two_instances_never_oversubscribe_a_shared_device(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    (name,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-s"))
    klass = f"{namespace}-share"
    await create_device_class(kube, cluster_objects, klass, DRIVER)
    body = shared_slice(f"{name}-share", name)
    await kube.post(f"{RESOURCE}/resourceslices", body)
    cluster_objects.append(f"{RESOURCE}/resourceslices/{body['metadata']['name']}")
    ns = f"{RESOURCE}/namespaces/{namespace}"
    pods = 10
    for i in range(pods):
        await kube.post(f"{ns}/resourceclaims", asking_claim(f"c{i}", klass, "8Gi"))
    # Five 8Gi shares fit the device's 40Gi; each instance has pods of its own, so the two
    # allocate shares of the device at the same moment from caches that lag the other's.
    first, second = f"{namespace}-a", f"{namespace}-b"
    with (
        scheduler(plane, plane_state, "ascheduler-a", first),
        scheduler(plane, plane_state, "ascheduler-b", second),
    ):
        await create_pods(
            kube,
            namespace,
            [
                claiming_pod(f"p{i}", claim=f"c{i}", scheduler_name=first if i % 2 else second)
                for i in range(pods)
            ],
        )

        async def five_bound() -> dict[str, str] | None:
            listed = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in listed.items() if node_of(p)}
            return placed if len(placed) >= 5 else None

        placed = await eventually(five_bound, what="five sharing pods bound", timeout=120)
    claims = (await kube.get(f"{ns}/resourceclaims")).get("items") or []
    results = [
        r
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    assert len(placed) == 5
    assert set(placed.values()) == {name}
    assert all(r["device"] == "shared" for r in results)
    # Every result is a share with its own id, consuming 8Gi; together at most the 40Gi.
    share_ids = [r.get("shareID") for r in results]
    assert all(share_ids)
    assert len(set(share_ids)) == len(share_ids)
    assert all(uuid.UUID(str(s)) for s in share_ids)
    consumed = [parse_fraction(r["consumedCapacity"]["memory"]) for r in results]
    assert consumed == [8 * GIB] * len(results)
    assert sum(consumed) <= 40 * GIB
    assert len(results) == 5
    assert await lock_annotations(kube, [name]) == {}
