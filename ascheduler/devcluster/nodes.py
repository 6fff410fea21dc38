"""Fake nodes for the local plane: Node objects that kwok keeps Ready.

A fake node carries the annotation kwok selects on, the capacity, labels and taints a test or
benchmark asks for, and a status kwok will keep updating. Bulk creation posts many nodes
concurrently, bounded, and can wait until kwok reports every one Ready. A shape with CSI drivers
also gets each node's CSINode (what a kubelet's CSI plugins would register), owned by its Node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascheduler.devcluster.plane import FAKE_NODE_ANNOTATION, FAKE_NODE_VALUE
from ascheduler.kube import ApiError, KubeClient

Taint = Mapping[str, str]


@dataclass(frozen=True)
class FakeNodes:
    """`count` nodes named `<prefix>-<i>` sharing one shape."""

    count: int
    prefix: str = "kwok-node"
    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    extended: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    unschedulable: bool = False
    #: CSI driver name -> how many of its volumes the node can attach (the CSINode's
    #: `allocatable.count`); empty: no CSINode.
    csi_drivers: Mapping[str, int] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]


def fake_node_body(name: str, shape: FakeNodes) -> dict[str, Any]:
    capacity = {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": str(shape.pods),
        "ephemeral-storage": shape.ephemeral_storage,
        **shape.extended,
    }
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        **shape.labels,
    }
    spec: dict[str, Any] = {}
    if shape.taints:
        spec["taints"] = [dict(t) for t in shape.taints]
    if shape.unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE,
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
            "phase": "Running",
        },
    }


def csinode_body(node: Mapping[str, Any], drivers: Mapping[str, int]) -> dict[str, Any]:
    """The CSINode of a created `node` (its answer, for the owner's uid)."""
    name = node["metadata"]["name"]
    owner = {
        "apiVersion": "v1",
        "kind": "Node",
        "name": name,
        "uid": node["metadata"]["uid"],
    }
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "spec": {
            "drivers": [
                {"name": driver, "nodeID": name, "allocatable": {"count": count}}
                for driver, count in sorted(drivers.items())
            ]
        },
    }


async def create_fake_nodes(
    kube: KubeClient, shape: FakeNodes, *, concurrency: int = 32
) -> list[str]:
    """Create the nodes (bounded concurrency) and return their names."""
    gate = asyncio.Semaphore(concurrency)

    async def create(name: str) -> None:
        async with gate:
            node = await kube.post("/api/v1/nodes", fake_node_body(name, shape))
            if shape.csi_drivers:
                body = csinode_body(node, shape.csi_drivers)
                await kube.post("/apis/storage.k8s.io/v1/csinodes", body)

    names = shape.names()
    async with asyncio.TaskGroup() as group:
        for name in names:
            group.create_task(create(name))
    return names


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def wait_nodes_ready(
    kube: KubeClient, names: Sequence[str], *, timeout: float = 120.0
) -> None:
    """Poll until every named node is Ready (kwok sets the condition)."""
    pending = set(names)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        body = await kube.get("/api/v1/nodes")
        for node in body.get("items", []):
            if node["metadata"]["name"] in pending and _is_ready(node):
                pending.discard(node["metadata"]["name"])
        if not pending:
            return
        if loop.time() > deadline:
            raise TimeoutError(
                f"{len(pending)} node(s) not Ready after {timeout:.0f}s, "
                f"e.g. {sorted(pending)[:3]}; is kwok running?"
            )
        await asyncio.sleep(0.2)


async def delete_fake_nodes(
    kube: KubeClient, names: Sequence[str], *, concurrency: int = 32
) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def delete(name: str) -> None:
        async with gate:
            # A node's CSINode, if it has one, goes with it (not left to the garbage collector).
            for path in (f"/apis/storage.k8s.io/v1/csinodes/{name}", f"/api/v1/nodes/{name}"):
                try:
                    await kube.request("DELETE", path)
                except ApiError as exc:
                    if not exc.not_found:
                        raise

    async with asyncio.TaskGroup() as group:
        for name in names:
            group.create_task(delete(name))
