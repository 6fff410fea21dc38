"""Volumes on the real plane, with kube-controller-manager's persistentvolume controller: a
StatefulSet whose claims wait for their first consumer gets each replica a node with a free
local volume, the claims bound there by the controller after ascheduler's PreBind; a claim
whose class cannot provision anywhere leaves its pod pending with kube-scheduler's reason."""

from __future__ import annotations

from typing import Any

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import ApiError, KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    get_pod,
    pause_pod,
    stateful_set_body,
)

HOSTNAME = "kubernetes.io/hostname"


async def make_class(kube: KubeClient, created: list[str], name: str, **fields: Any) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "volumeBindingMode": "WaitForFirstConsumer",
        **fields,
    }
    await kube.post("/apis/storage.k8s.io/v1/storageclasses", body)
    created.append(f"/apis/storage.k8s.io/v1/storageclasses/{name}")


async def local_volume(
    kube: KubeClient, created: list[str], name: str, node: str, klass: str, size: str
) -> None:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": klass,
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }
    await kube.post("/api/v1/persistentvolumes", body)
    created.append(f"/api/v1/persistentvolumes/{name}")


async def test_a_statefulset_gets_local_volumes_on_its_pods_nodes(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=4, prefix=f"{namespace}-n"))
    klass = f"{namespace}-local"
    await make_class(kube, cluster_objects, klass, provisioner="kubernetes.io/no-provisioner")
    # A free volume on three of the four nodes; one too small on the fourth.
    for i, node in enumerate(names):
        size = "100Mi" if i == 3 else "1Gi"
        await local_volume(kube, cluster_objects, f"{namespace}-pv{i}", node, klass, size)
    template = pause_pod("x", cpu="10m", memory="10Mi")
    spec = {**template["spec"], "volumes": []}
    set_body = stateful_set_body("db", 3, spec, klass, "500Mi", parallel=True)
    await kube.post(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", set_body)

    async def placed() -> dict[str, str]:
        out = {}
        for i in range(3):
            try:
                pod = await get_pod(kube, namespace, f"db-{i}")
            except ApiError:
                return {}
            out[f"db-{i}"] = str(pod["spec"].get("nodeName") or "")
        return out if all(out.values()) else {}

    where = await eventually(placed, what="every replica bound", timeout=120)
    assert len(set(where.values())) == 3, where  # one volume per node: three nodes
    assert names[3] not in where.values()  # its volume is too small
    for i in range(3):
        claim = await kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data-db-{i}")
        assert claim["status"]["phase"] == "Bound"
        volume = await kube.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
        term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
        assert term["matchExpressions"][0]["values"] == [where[f"db-{i}"]]
    await kube.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/db")
    assert is_alive(ascheduler)


async def test_a_claim_no_node_can_provision_leaves_its_pod_pending(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    klass = f"{namespace}-zonal"
    topologies = [{"matchLabelExpressions": [{"key": "zone", "values": ["nowhere"]}]}]
    await make_class(
        kube, cluster_objects, klass, provisioner="example.com/zonal", allowedTopologies=topologies
    )
    await kube.post(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "metadata": {"name": "dyn"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": klass,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    body = pause_pod("user", cpu="10m", memory="10Mi")
    body["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "dyn"}}]
    await create_pods(kube, namespace, [body])

    async def reason() -> str:
        pod = await get_pod(kube, namespace, "user")
        for c in pod.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                return str(c.get("message", ""))
        return ""

    message = await eventually(reason, what="the pod pending with a reason")
    assert "node(s) didn't find available persistent volumes to bind" in message, message
    assert is_alive(ascheduler)
