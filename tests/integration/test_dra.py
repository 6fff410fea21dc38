"""Dynamic Resource Allocation on the real plane, with kube-controller-manager's resourceclaim
controller: a pod whose claim template asks for a device class only one node's devices meet
lands there, its generated claim allocated those devices and reserved for it; a pod whose
claim no node can meet stays pending with kube-scheduler's reason."""

from __future__ import annotations

from typing import Any

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    eventually,
    get_pod,
    wait_bound,
    wait_unschedulable,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


async def gpus(kube: KubeClient, created: list[str], node: str, models: list[str]) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": m}}}
                for i, m in enumerate(models)
            ],
        },
    }
    await kube.post(f"{RESOURCE}/resourceslices", body)
    created.append(f"{RESOURCE}/resourceslices/{node}-gpus")


async def device_class(kube: KubeClient, created: list[str], name: str, model: str) -> None:
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "{model}"'
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
    await kube.post(f"{RESOURCE}/deviceclasses", body)
    created.append(f"{RESOURCE}/deviceclasses/{name}")


def template(name: str, klass: str, count: int) -> dict[str, Any]:
    request = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": count}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
    }


async def test_a_template_claim_gets_the_only_nodes_devices(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-n"))
    klass = f"{namespace}-a100"
    await device_class(kube, cluster_objects, klass, "a100")
    await gpus(kube, cluster_objects, names[0], ["t4", "t4"])
    await gpus(kube, cluster_objects, names[1], ["a100", "t4", "a100"])
    # names[2] has no devices at all.
    ns = f"{RESOURCE}/namespaces/{namespace}"
    await kube.post(f"{ns}/resourceclaimtemplates", template("two", klass, 2))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("trainer", template="two"))

    where = await wait_bound(kube, namespace, ["trainer"], timeout=90)
    assert where["trainer"] == names[1]
    pod = await get_pod(kube, namespace, "trainer")
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = await kube.get(f"{ns}/resourceclaims/{status['resourceClaimName']}")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-2"]
    assert {r["pool"] for r in results} == {names[1]}
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}
    ]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

    # Both a100s are taken now: a second pod asking for one waits with kube-scheduler's
    # reason, and gets it once the first pod (and so its claim's allocation) is gone.
    await kube.post(f"{ns}/resourceclaimtemplates", template("one", klass, 1))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("second", template="one"))
    message = await wait_unschedulable(kube, namespace, "second", timeout=60)
    assert message.startswith("0/")
    assert "3 cannot allocate all claims" in message, message
    await kube.request(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/trainer",
        params={"gracePeriodSeconds": 0},
    )
    where = await wait_bound(kube, namespace, ["second"], timeout=120)
    assert where["second"] == names[1]
    assert is_alive(ascheduler)


async def test_a_claim_naming_a_missing_class_leaves_the_pod_pending(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    ns = f"{RESOURCE}/namespaces/{namespace}"
    await kube.post(f"{ns}/resourceclaimtemplates", template("ghost", f"{namespace}-none", 1))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", claiming_pod("lost", template="ghost"))
    message = await wait_unschedulable(kube, namespace, "lost", timeout=60)
    assert message.startswith(
        f"0/1 nodes are available: request gpu: device class {namespace}-none does not exist. "
    ), message

    async def still_pending() -> bool:
        pod = await get_pod(kube, namespace, "lost")
        return not pod["spec"].get("nodeName")

    assert await eventually(still_pending, what="pod still pending")
    assert is_alive(ascheduler)
