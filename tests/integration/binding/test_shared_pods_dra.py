"""Several ascheduler instances on one schedulerName (no leader election) scheduling the same
pods with ResourceClaims, on the real plane: every instance tries every pod, so one pod's
claim may be allocated and reserved by one instance while another binds the pod. Whatever
the interleaving, a bound pod's claims are allocated on its own node and reserved for it, and
no claim is left allocated or reserved for a pod bound somewhere else."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_device_class,
    eventually,
    node_of,
    pods_in,
    scheduler,
)

RESOURCE = "/apis/resource.k8s.io/v1"
NODES = 4
DEVICES_PER_NODE = 24
BURSTS = 8
BURST = 10


def node_slice(name: str, driver: str, node: str) -> dict[str, Any]:
    """`DEVICES_PER_NODE` devices on `node`, in a pool named after it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{i}"} for i in range(DEVICES_PER_NODE)],
        },
    }


def one_device(name: str, klass: str) -> dict[str, Any]:
    request = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": request}]}}},
    }


def allocated_on(claim: dict[str, Any]) -> set[str]:
    """The nodes a claim's devices are on (their pools are named after their nodes)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return {r["pool"] for r in (allocation.get("devices") or {}).get("results") or []}


def selector_names(claim: dict[str, Any]) -> set[str]:
    """The node names the allocation's nodeSelector admits (kube writes a name field term)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    return {
        value
        for term in terms
        for field in term.get("matchFields") or []
        if field.get("key") == "metadata.name" and field.get("operator") == "In"
        for value in field.get("values") or []
    }


def problems(pods: dict[str, dict[str, Any]], claims: list[dict[str, Any]]) -> list[str]:
    """Every way the pods' claims disagree with where the pods are bound."""
    out: list[str] = []
    by_uid = {p["metadata"]["uid"]: p for p in pods.values()}
    by_name = {c["metadata"]["name"]: c for c in claims}
    for name, pod in sorted(pods.items()):
        node = node_of(pod)
        if not node:
            continue
        for status in pod["status"].get("resourceClaimStatuses") or []:
            claim = by_name.get(status.get("resourceClaimName") or "")
            if claim is None:
                out.append(f"{name} on {node}: its claim is missing")
                continue
            where = allocated_on(claim)
            if where != {node} or selector_names(claim) != {node}:
                out.append(
                    f"{name} on {node}: claim {claim['metadata']['name']} allocated on "
                    f"{sorted(where)} (selector {sorted(selector_names(claim))})"
                )
            reserved = {r.get("uid") for r in claim["status"].get("reservedFor") or []}
            if pod["metadata"]["uid"] not in reserved:
                out.append(f"{name} on {node}: claim {claim['metadata']['name']} not reserved")
    for claim in claims:
        cname = claim["metadata"]["name"]
        where = allocated_on(claim)
        owners = [
            r["uid"]
            for r in claim["metadata"].get("ownerReferences") or []
            if r.get("kind") == "Pod" and r.get("controller")
        ]
        for uid in owners:
            owner = by_uid.get(uid)
            if where and (owner is None or {node_of(owner)} != where):
                bound = node_of(owner) if owner is not None else "gone"
                out.append(f"claim {cname}: allocated on {sorted(where)}, its pod on {bound}")
        for consumer in (claim.get("status") or {}).get("reservedFor") or []:
            user = by_uid.get(consumer.get("uid"))
            if user is None or {node_of(user)} != where:
                bound = node_of(user) if user is not None else "gone"
                out.append(
                    f"claim {cname}: reserved for {consumer.get('name')} on {bound}, "
                    f"allocated on {sorted(where)}"
                )
    devices = Counter(
        (r["pool"], r["device"])
        for c in claims
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        )
        or []
    )
    out.extend(f"device {d} allocated {n} times" for d, n in devices.items() if n > 1)
    return out


@pytest.mark.parametrize("instances", [2, 3])
async def test_instances_on_one_scheduler_name_bind_pods_where_their_claims_are(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
    instances: int,
) -> None:
    """Bursts of pods, each with a claim from a template for one node-local device, created
    back to back while `instances` schedulers of the same name race for every one of them."""
    names = await nodes(FakeNodes(count=NODES, prefix=f"{namespace}-n"))
    driver = f"{namespace}.example.com"
    klass = f"{namespace}-dev"
    await create_device_class(kube, cluster_objects, klass, driver)
    for node in names:
        await kube.post(f"{RESOURCE}/resourceslices", node_slice(f"{node}-dev", driver, node))
        cluster_objects.append(f"{RESOURCE}/resourceslices/{node}-dev")
    ns = f"{RESOURCE}/namespaces/{namespace}"
    await kube.post(f"{ns}/resourceclaimtemplates", one_device("one", klass))
    shared = f"{namespace}-shared"
    total = BURSTS * BURST
    with contextlib.ExitStack() as running:
        for i in range(instances):
            running.enter_context(
                scheduler(
                    plane,
                    plane_state,
                    f"ascheduler-{i}",
                    shared,
                )
            )
        for b in range(BURSTS):
            await asyncio.gather(
                *(
                    kube.post(
                        f"/api/v1/namespaces/{namespace}/pods",
                        claiming_pod(f"p{b}-{i}", template="one", scheduler_name=shared),
                    )
                    for i in range(BURST)
                )
            )

        async def state() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
            pods = await pods_in(kube, namespace)
            return pods, (await kube.get(f"{ns}/resourceclaims")).get("items") or []

        async def settled() -> bool:
            # Every pod bound, and the instances that lost a pod done undoing their claim
            # writes (in the background).
            pods, claims = await state()
            return all(node_of(p) for p in pods.values()) and not problems(pods, claims)

        try:
            await eventually(settled, what=f"{total} claiming pods bound where their claims are")
        except AssertionError:
            pods, claims = await state()
            assert problems(pods, claims) == []
            assert sorted(n for n, p in pods.items() if not node_of(p)) == []
            raise
    pods = await pods_in(kube, namespace)
    assert len(pods) == total
    assert set(Counter(node_of(p) for p in pods.values())) <= set(names)
