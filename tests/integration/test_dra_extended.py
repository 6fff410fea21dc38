"""Extended resources backed by DRA on the real plane: a pod asking for `example.com/gpu`,
which a DeviceClass's `extendedResourceName` backs, on a node that advertises none of it, is
bound by ascheduler (1.36 and 1.37) with the claim kube-scheduler makes for it: created by
PreBind, owned by the pod, annotated, one request per container, allocated and reserved, and
named in the pod's `status.extendedResourceClaimStatus`. The same pod under the plane's own
kube-scheduler, beside it, gets the same claim and status. At 1.35 (the gate off) the pod
stays `Insufficient example.com/gpu`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import ControlPlane
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    eventually,
    get_pod,
    pause_pod,
    plane_since,
    wait_bound,
    wait_unschedulable,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
GPU = "example.com/gpu"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@pytest.fixture
def kube_scheduler(plane: ControlPlane, namespace: str) -> Iterator[str]:
    """The plane's kube-scheduler under a schedulerName of this test's, stopped by pid."""
    name = f"kube-{namespace}"[:60]
    record = plane.start_kube_scheduler(name=name, scheduler_name=name)
    try:
        yield name
    finally:
        plane.stop_process(record)


async def backing_class(kube: KubeClient, created: list[str], name: str) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "extendedResourceName": GPU,
        },
    }
    await kube.post(f"{RESOURCE}/deviceclasses", body)
    created.append(f"{RESOURCE}/deviceclasses/{name}")


async def gpus(kube: KubeClient, created: list[str], node: str, count: int) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(count)],
        },
    }
    await kube.post(f"{RESOURCE}/resourceslices", body)
    created.append(f"{RESOURCE}/resourceslices/{node}-gpus")


def wanting(name: str, scheduler: str, node: str) -> dict[str, Any]:
    """An init container asking for one GPU (it reuses the main container's), the main
    container for two."""
    body = pause_pod(name, scheduler_name=scheduler, extra={GPU: "2"})
    body["spec"]["initContainers"] = [
        {
            "name": "setup",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
        }
    ]
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return body


async def claim_of(kube: KubeClient, namespace: str, name: str) -> tuple[Any, Any]:
    """The pod once its extended resource claim status is written, and that claim."""

    async def probe() -> Any:
        pod = await get_pod(kube, namespace, name)
        return pod if (pod.get("status") or {}).get("extendedResourceClaimStatus") else None

    pod = await eventually(probe, what=f"{name}'s extendedResourceClaimStatus", timeout=60)
    claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = await kube.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim_name}")
    return pod, claim


def shape(pod: Any, claim: Any) -> dict[str, Any]:
    """What must be the same whichever scheduler made the claim (names and uids of the pod
    and the devices' pool aside)."""
    meta = claim["metadata"]
    (owner,) = meta["ownerReferences"]
    assert owner["name"] == pod["metadata"]["name"]
    assert owner["uid"] == pod["metadata"]["uid"]
    assert meta["generateName"] == f"{pod['metadata']['name']}-extended-resources-"
    assert meta["name"].startswith(meta["generateName"])
    allocation = claim["status"]["allocation"]["devices"]["results"]
    who = (pod["metadata"]["name"], pod["metadata"]["uid"])
    return {
        "owner": {k: v for k, v in owner.items() if k not in ("name", "uid")},
        "annotations": meta.get("annotations"),
        "finalizers": meta.get("finalizers"),
        "spec": claim["spec"],
        "results": sorted((r["request"], r["driver"], r["device"]) for r in allocation),
        "reservedFor": [
            (r["resource"], (r["name"], r["uid"]) == who) for r in claim["status"]["reservedFor"]
        ],
        "mappings": pod["status"]["extendedResourceClaimStatus"]["requestMappings"],
        "named": pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == meta["name"],
    }


@pytest.mark.skipif(not plane_since(1, 36), reason="DRAExtendedResource is off before 1.36")
async def test_the_claim_and_pod_status_are_kube_schedulers(
    ascheduler: ProcessRecord,
    kube_scheduler: str,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await backing_class(kube, cluster_objects, f"{namespace}-gpu")
    for name in names:
        await gpus(kube, cluster_objects, name, 2)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    await kube.post(pods, wanting("theirs", kube_scheduler, names[0]))
    await kube.post(pods, wanting("ours", "ascheduler", names[1]))
    await wait_bound(kube, namespace, ["theirs", "ours"], timeout=90)

    theirs = shape(*await claim_of(kube, namespace, "theirs"))
    ours = shape(*await claim_of(kube, namespace, "ours"))
    assert ours == theirs
    # And what that is (kube-scheduler's, read from its source).
    assert ours["annotations"] == {ANNOTATION: "true"}
    assert ours["owner"] == {"apiVersion": "v1", "kind": "Pod", "controller": True}
    assert ours["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    request = "container-1-request-1"  # main (after one init container): cpu, gpu, memory
    assert ours["spec"]["devices"]["requests"] == [
        {
            "name": request,
            "exactly": {
                "deviceClassName": f"{namespace}-gpu",
                "allocationMode": "ExactCount",
                "count": 2,
            },
        }
    ]
    assert ours["results"] == [(request, DRIVER, "gpu-0"), (request, DRIVER, "gpu-1")]
    assert ours["reservedFor"] == [("pods", True)]
    assert ours["mappings"] == [
        {"containerName": "main", "resourceName": GPU, "requestName": request},
        {"containerName": "setup", "resourceName": GPU, "requestName": request},
    ]
    assert ours["named"]


@pytest.mark.skipif(not plane_since(1, 36), reason="DRAExtendedResource is off before 1.36")
async def test_too_few_devices_wait_with_kube_schedulers_message(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    await backing_class(kube, cluster_objects, f"{namespace}-gpu")
    await gpus(kube, cluster_objects, names[0], 1)
    body = pause_pod("big", extra={GPU: "2"})
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)
    message = await wait_unschedulable(kube, namespace, "big")
    assert "1 cannot allocate all claims" in message, message
    claims = await kube.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims")
    assert claims["items"] == []


@pytest.mark.skipif(plane_since(1, 36), reason="DRAExtendedResource is on from 1.36")
async def test_before_1_36_the_resource_is_insufficient(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    await backing_class(kube, cluster_objects, f"{namespace}-gpu")
    await gpus(kube, cluster_objects, names[0], 2)
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", pause_pod("p", extra={GPU: "1"}))
    message = await wait_unschedulable(kube, namespace, "p")
    assert f"Insufficient {GPU}" in message, message
