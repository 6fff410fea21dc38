"""Consumable capacity on the real plane (on from 1.36): ascheduler records each share of a
device that allows multiple allocations as kube-scheduler does (a UUID `shareID`, the
consumption of every capacity of the device after its request policy rounded the ask up, in
the step's format), the API server accepts it, and a pod whose ask no longer fits stays
pending with kube-scheduler's reason."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_device_class,
    plane_since,
    wait_bound,
    wait_unschedulable,
)

pytestmark = pytest.mark.skipif(
    not plane_since(1, 36), reason="consumable capacity is off before 1.36"
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "capacity.example.com"


def shared_slice(name: str, node: str) -> dict[str, Any]:
    memory = {
        "value": "16Gi",
        "requestPolicy": {
            "default": "2Gi",
            "validRange": {"min": "2Gi", "max": "16Gi", "step": "2Gi"},
        },
    }
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
                    "capacity": {
                        "memory": memory,
                        "links": {"value": "4", "requestPolicy": {"default": "1"}},
                    },
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


async def test_shares_are_recorded_rounded_and_the_device_fills_up(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    (name,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-c"))
    klass = f"{namespace}-capacity"
    await create_device_class(kube, cluster_objects, klass, DRIVER)
    body = shared_slice(f"{name}-capacity", name)
    await kube.post(f"{RESOURCE}/resourceslices", body)
    cluster_objects.append(f"{RESOURCE}/resourceslices/{body['metadata']['name']}")
    ns = f"{RESOURCE}/namespaces/{namespace}"
    # 3Gi rounds up to 4Gi and 9Gi to 10Gi: 14Gi of 16Gi. Unrounded (12Gi), 3Gi more would fit.
    # Each share takes the links' default (1 of 4), asking none.
    for claim, memory in (("three", "3Gi"), ("nine", "9Gi"), ("late", "3Gi")):
        await kube.post(f"{ns}/resourceclaims", asking_claim(claim, klass, memory))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("p3", claim="three"))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("p9", claim="nine"))
    assert await wait_bound(kube, namespace, ["p3", "p9"]) == {"p3": name, "p9": name}
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("late", claim="late"))
    message = await wait_unschedulable(kube, namespace, "late")
    assert message.startswith("0/1 nodes are available: 1 cannot allocate all claims."), message
    results = {}
    for claim in ("three", "nine"):
        got = await kube.get(f"{ns}/resourceclaims/{claim}")
        (result,) = got["status"]["allocation"]["devices"]["results"]
        results[claim] = result
    assert results["three"]["consumedCapacity"] == {"memory": "4Gi", "links": "1"}
    assert results["nine"]["consumedCapacity"] == {"memory": "10Gi", "links": "1"}
    ids = {str(r["shareID"]) for r in results.values()}
    assert len(ids) == 2
    assert all(uuid.UUID(i) for i in ids)
