"""The deployed roles are no wider than kube-scheduler's (plus what node locks need), and that
is enough: deploy/base applied to the plane, a scheduler runs under its ServiceAccount's own
token through a burst that preempts, binds volumes, allocates devices, places a gang and takes
node locks, and every pod binds with its bind-phase and bind-time annotations (carried by the
Binding: the pods are never patched). SubjectAccessReviews show what neither account may do:
patch or update a pod (its spec), patch a Node; the node-lock overlay grants `patch nodes`
alone, and a scheduler under it locks on the Nodes."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import yaml

from ascheduler.devcluster import ControlPlane, ensure_built
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from ascheduler.model.podgroups import POD_GROUP_LABEL
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_pods,
    eventually,
    pause_pod,
    pods_in,
    wait_bound,
)
from tests.integration.test_deploy import (
    KINDS,
    NAMESPACE,
    apply,
    assert_authorized,
    manifests,
    service_account_kubeconfig,
)
from tests.integration.test_dra import device_class, gpus, template
from tests.integration.test_volumes import local_volume, make_class

ROOT = Path(__file__).resolve().parents[2]
NODE_LOCKS = ROOT / "deploy" / "overlays" / "node-lock-object-node"
PHASE = "ascheduler.io/bind-phase"
TIME = "ascheduler.io/bind-time"
ACCOUNTS = ("ascheduler", "ascheduler-binder")
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups"


async def allowed(
    kube: KubeClient,
    account: str,
    verb: str,
    resource: str,
    *,
    namespace: str = "",
    subresource: str = "",
    name: str = "",
    group: str = "",
) -> bool:
    """Whether ServiceAccount `account` (of the deployed namespace) may `verb` the
    `resource` (of the core group unless `group` says), as the API server's authorizer
    answers a SubjectAccessReview."""
    attributes = {"verb": verb, "group": group, "resource": resource}
    for key, value in (("namespace", namespace), ("subresource", subresource), ("name", name)):
        if value:
            attributes[key] = value
    review = await kube.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{NAMESPACE}:{account}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{NAMESPACE}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            },
        },
    )
    return bool(review["status"].get("allowed"))


async def assert_no_pod_or_node_writes(kube: KubeClient, namespace: str) -> None:
    """Neither account may change a pod (spec or metadata) or a Node; what they need of
    pods, they may."""
    for account in ACCOUNTS:
        for verb in ("patch", "update"):
            assert not await allowed(kube, account, verb, "pods", namespace=namespace), (
                account,
                verb,
            )
            assert not await allowed(kube, account, verb, "nodes", name="any"), (account, verb)
        assert await allowed(
            kube, account, "create", "pods", namespace=namespace, subresource="binding"
        )
    assert await allowed(
        kube, "ascheduler", "patch", "pods", namespace=namespace, subresource="status"
    )
    assert await allowed(kube, "ascheduler", "delete", "pods", namespace=namespace)
    # The scheduling condition on kube-scheduler's PodGroups (1.36 on), as its role allows.
    podgroups = {"namespace": namespace, "group": "scheduling.k8s.io"}
    assert await allowed(
        kube, "ascheduler", "patch", "podgroups", subresource="status", **podgroups
    )
    assert not await allowed(kube, "ascheduler", "patch", "podgroups", **podgroups)


async def priority_classes(kube: KubeClient, created: list[str], low: str, high: str) -> None:
    for name, value in ((low, 10), (high, 1000)):
        await kube.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": name}, "value": value},
        )
        created.append(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


def deployed_config(docs: list[dict[str, Any]], profile: str, tmp: Path) -> Path:
    """The deployed configuration, with the test's profile name, and node locks on every bind
    even while the instance is alone (so each Binding goes through a hold)."""
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    config["profiles"][0]["schedulerName"] = profile
    config["ascheduler"]["httpAddress"] = "127.0.0.1:0"
    config["ascheduler"]["nodeLock"].update(policy="all", whenAlone="lock")
    file = tmp / "config.yaml"
    file.write_text(yaml.safe_dump(config))
    return file


async def test_the_deployed_account_schedules_a_burst_and_cannot_write_a_pod(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
    cluster_objects: list[str],
) -> None:
    docs = manifests()
    for doc in docs:
        await apply(kube, doc)
    await assert_no_pod_or_node_writes(kube, namespace)

    profile = f"{namespace}-rbac"
    config_file = deployed_config(docs, profile, tmp_path)
    kubeconfig = await service_account_kubeconfig(kube, plane_state, "ascheduler", tmp_path)
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-n", cpu="4"))
    low, high = f"{namespace}-low", f"{namespace}-high"
    await priority_classes(kube, cluster_objects, low, high)
    # Volumes: a local volume on two nodes, a claim waiting for its first consumer.
    klass = f"{namespace}-local"
    await make_class(kube, cluster_objects, klass, provisioner="kubernetes.io/no-provisioner")
    for i in range(2):
        await local_volume(kube, cluster_objects, f"{namespace}-pv{i}", names[i], klass, "1Gi")
    # Devices: two on the last node, a claim template asking for one.
    device = f"{namespace}-gpu"
    await device_class(kube, cluster_objects, device, "a100")
    await gpus(kube, cluster_objects, names[2], ["a100", "a100"])
    await kube.post(
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates",
        template("one-gpu", device, 1),
    )

    record = plane.start_ascheduler(
        "ascheduler-rbac", "--config", str(config_file), kubeconfig=str(kubeconfig)
    )
    try:
        # Every node nearly full of low-priority pods: the high-priority one must preempt.
        fillers = [
            pause_pod(f"filler-{i}", scheduler_name=profile, cpu="3", priorityClassName=low)
            for i in range(3)
        ]
        await create_pods(kube, namespace, fillers)
        await wait_bound(kube, namespace, [f"filler-{i}" for i in range(3)], timeout=90)

        small: dict[str, Any] = {"scheduler_name": profile, "cpu": "50m", "memory": "10Mi"}
        burst = [pause_pod("vip", scheduler_name=profile, cpu="2", priorityClassName=high)]
        for i in range(2):
            await kube.post(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                {
                    "metadata": {"name": f"data-{i}"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": klass,
                        "resources": {"requests": {"storage": "500Mi"}},
                    },
                },
            )
            body = pause_pod(f"vol-{i}", **small)
            body["spec"]["volumes"] = [
                {"name": "d", "persistentVolumeClaim": {"claimName": f"data-{i}"}}
            ]
            burst.append(body)
        burst.append(claiming_pod("dev", template="one-gpu", scheduler_name=profile))
        await kube.post(
            GROUPS.format(namespace),
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "gang"},
                "spec": {"minMember": 3},
            },
        )
        for i in range(3):
            body = pause_pod(f"gang-{i}", **small)
            body["metadata"]["labels"] = {POD_GROUP_LABEL: "gang"}
            burst.append(body)
        await create_pods(kube, namespace, burst)
        wanted = [p["metadata"]["name"] for p in burst]
        placed = await wait_bound(kube, namespace, wanted, timeout=120)

        # Preemption: one filler evicted (deleted by the ServiceAccount), the rest in place.
        async def fillers_left() -> list[str] | None:
            left = [n for n in await pods_in(kube, namespace) if n.startswith("filler-")]
            return left if len(left) == 2 else None

        await eventually(fillers_left, what="one filler preempted", timeout=60)
        # Volumes on the two nodes that have them, each claim bound to its volume there.
        assert {placed["vol-0"], placed["vol-1"]} == set(names[:2])

        async def claims_bound() -> dict[str, str] | None:
            out = {}
            for i in range(2):
                claim = await kube.get(
                    f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data-{i}"
                )
                if (claim.get("status") or {}).get("phase") != "Bound":
                    return None
                out[f"vol-{i}"] = str(claim["spec"]["volumeName"])
            return out

        volumes = await eventually(claims_bound, what="both claims bound", timeout=90)
        for pod, volume in volumes.items():
            affinity = (await kube.get(f"/api/v1/persistentvolumes/{volume}"))["spec"]
            term = affinity["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
            assert term["matchExpressions"][0]["values"] == [placed[pod]]
        # Devices: on the one node that has them, the claim allocated and reserved.
        assert placed["dev"] == names[2]
        claims = await kube.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")
        (claim,) = claims["items"]
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == names[2]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["dev"]
        # The gang, whole.
        assert all(placed[f"gang-{i}"] for i in range(3))
        pods = await pods_in(kube, namespace)

        # Every bind went through a node lock: the Binding carried its phase and time.
        for name in wanted:
            annotations = pods[name]["metadata"].get("annotations") or {}
            assert annotations.get(PHASE) == "success", (name, annotations)
            assert int(annotations[TIME]) > 0
        leases = await kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases")
        assert [
            lease
            for lease in leases["items"]
            if str(lease["metadata"]["name"]).startswith("ascheduler-nodes-")
        ]
        assert_authorized(await asyncio.to_thread(Path(record.log).read_text))
    finally:
        plane.stop_process(record)
    await assert_no_pod_or_node_writes(kube, namespace)


def overlay() -> list[dict[str, Any]]:
    """deploy/overlays/node-lock-object-node as kustomize builds it."""
    done = subprocess.run(
        [str(ensure_built().kubectl), "kustomize", str(NODE_LOCKS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


async def test_the_node_lock_overlay_grants_patch_nodes_and_locks_on_the_nodes(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
    cluster_objects: list[str],
) -> None:
    docs = overlay()
    added = [d for d in docs if d["metadata"]["name"] == "ascheduler-node-locks"]
    assert {d["kind"] for d in added} == {"ClusterRole", "ClusterRoleBinding"}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    for deployment in deployments:
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[-2:] == ["--node-lock-object", "node"]
    for doc in docs:
        assert doc["kind"] in KINDS
        await apply(kube, doc)
        if doc in added:
            cluster_objects.append(
                f"/apis/rbac.authorization.k8s.io/v1/{doc['kind'].lower()}s/ascheduler-node-locks"
            )
    for account in ACCOUNTS:
        assert await allowed(kube, account, "patch", "nodes", name="any")
        assert not await allowed(kube, account, "update", "nodes", name="any")
        assert not await allowed(kube, account, "patch", "pods", namespace=namespace)

    profile = f"{namespace}-on-nodes"
    config_file = deployed_config(docs, profile, tmp_path)
    kubeconfig = await service_account_kubeconfig(kube, plane_state, "ascheduler", tmp_path)
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    argv = (*deployments[0]["spec"]["template"]["spec"]["containers"][0]["args"][-2:],)
    record = plane.start_ascheduler(
        "ascheduler-on-nodes", "--config", str(config_file), *argv, kubeconfig=str(kubeconfig)
    )
    try:
        await create_pods(
            kube, namespace, [pause_pod(f"p{i}", scheduler_name=profile) for i in (0, 1)]
        )
        await wait_bound(kube, namespace, ["p0", "p1"], timeout=90)

        async def recorded() -> dict[str, str] | None:
            annotations = (await kube.get(f"/api/v1/nodes/{node}"))["metadata"].get(
                "annotations"
            ) or {}
            bound = annotations.get("ascheduler.io/node-lock-bound")
            return annotations if bound else None

        # The lock was taken and released on the Node: its record of the pods bound under it.
        await eventually(recorded, what="the Node's lock record", timeout=60)
        pods = await pods_in(kube, namespace)
        assert {pods[n]["metadata"]["annotations"][PHASE] for n in ("p0", "p1")} == {"success"}
        assert_authorized(await asyncio.to_thread(Path(record.log).read_text))
    finally:
        plane.stop_process(record)
