"""DRA device taints on the real plane (1.36 on: `DRADeviceTaints`; 1.37: DeviceTaintRules):
a pod whose only device is tainted NoSchedule waits with kube-scheduler's reason, and is
placed once the taint is gone: from the slice, or with the DeviceTaintRule that put it there
(a rule deleted is a slice update to the queue, as kube-scheduler's slice tracker makes it)."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import claiming_pod, plane_since, wait_bound, wait_unschedulable

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
MAINTENANCE = {"key": "example.com/maintenance", "effect": "NoSchedule"}

pytestmark = pytest.mark.skipif(
    not plane_since(1, 36), reason="DRADeviceTaints is off before 1.36 (taints dropped)"
)


def one_gpu(node: str, taints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": taints}],
        },
    }


async def setup(
    kube: KubeClient, namespace: str, node: str, created: list[str], taints: list[Any]
) -> None:
    klass = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"{namespace}-gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    await kube.post(f"{RESOURCE}/deviceclasses", klass)
    created.append(f"{RESOURCE}/deviceclasses/{namespace}-gpu")
    await kube.post(f"{RESOURCE}/resourceslices", one_gpu(node, taints))
    created.append(f"{RESOURCE}/resourceslices/{node}-gpus")
    request = {"deviceClassName": f"{namespace}-gpu", "allocationMode": "ExactCount", "count": 1}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }
    await kube.post(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", claim)
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("trainer", claim="gpu"))


async def test_a_pod_waits_for_its_device_s_taint_to_go(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    await setup(kube, namespace, node, cluster_objects, [MAINTENANCE])
    message = await wait_unschedulable(kube, namespace, "trainer", timeout=60)
    assert message.startswith("0/1 nodes are available: 1 cannot allocate all claims."), message
    current = await kube.get(f"{RESOURCE}/resourceslices/{node}-gpus")
    current["spec"]["devices"][0]["taints"] = []
    await kube.request("PUT", f"{RESOURCE}/resourceslices/{node}-gpus", body=current)
    assert await wait_bound(kube, namespace, ["trainer"], timeout=60) == {"trainer": node}
    assert is_alive(ascheduler)


@pytest.mark.skipif(not plane_since(1, 37), reason="DeviceTaintRules are on from 1.37")
async def test_a_pod_waits_for_the_device_taint_rule_to_go(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"{namespace}-maintenance"},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": node}, "taint": MAINTENANCE},
    }
    await kube.post(f"{RESOURCE}/devicetaintrules", rule)
    cluster_objects.append(f"{RESOURCE}/devicetaintrules/{namespace}-maintenance")
    await setup(kube, namespace, node, cluster_objects, [])
    message = await wait_unschedulable(kube, namespace, "trainer", timeout=60)
    assert message.startswith("0/1 nodes are available: 1 cannot allocate all claims."), message
    await kube.request("DELETE", f"{RESOURCE}/devicetaintrules/{namespace}-maintenance")
    assert await wait_bound(kube, namespace, ["trainer"], timeout=60) == {"trainer": node}
    assert is_alive(ascheduler)
