"""`ascheduler explain` (and `kubectl ascheduler explain`) on the real plane: for pending pods
it gives the message the running scheduler wrote, word for word, and names the nodes each
filter rejected with the numbers; a pod file's explanation agrees with where that pod lands;
`--replicas` agrees with what creating that many copies does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascheduler.devcluster import ControlPlane, ensure_built
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_pods,
    eventually,
    get_pod,
    pause_pod,
    scheduled_condition,
    scheduler,
    wait_bound,
    wait_unschedulable,
)

SCHEDULER = "explain-sched"


async def explain(state: PlaneState, *args: str, kubectl: bool = False) -> dict[str, Any]:
    """The JSON document `ascheduler explain ARGS -o json` prints (via kubectl's plugin
    mechanism with `kubectl`)."""
    env = {**os.environ, "KUBECONFIG": str(state.admin_kubeconfig)}
    if kubectl:
        bins = ensure_built()
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        argv = [str(bins.kubectl), "ascheduler", "explain", *args, "-o", "json"]
    else:
        argv = [sys.executable, "-m", "ascheduler", "explain", *args, "-o", "json"]
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    data: dict[str, Any] = json.loads(out)
    return data


def verdicts(doc: dict[str, Any]) -> dict[str, tuple[str, list[str], list[str]]]:
    """node -> (plugin, reasons, details) for every node shown."""
    return {
        n["name"]: (g["plugin"], g["reasons"], n["details"])
        for g in doc["rejected"]
        for n in g["nodes"]
    }


@pytest.mark.smoke
async def test_pending_pods_are_explained_with_the_scheduler_s_message_and_the_numbers(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    small = await nodes(FakeNodes(count=2, prefix=f"{namespace}-s", cpu="1"))
    tainted = await nodes(
        FakeNodes(
            count=1,
            prefix=f"{namespace}-t",
            cpu="8",
            taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
        )
    )
    cordoned = await nodes(FakeNodes(count=1, prefix=f"{namespace}-c", cpu="8", unschedulable=True))
    ours = set(small + tainted + cordoned)
    with scheduler(plane, plane_state, "explain-sched", SCHEDULER):
        await create_pods(
            kube,
            namespace,
            [
                pause_pod("big", cpu="2", scheduler_name=SCHEDULER),
                pause_pod("picky", scheduler_name=SCHEDULER, nodeSelector={"disk": "ssd"}),
            ],
        )
        for name in ("big", "picky"):
            message = await wait_unschedulable(kube, namespace, name)
            doc = await explain(plane_state, f"{namespace}/{name}", "--limit", "0")
            # The summary is the message the scheduler wrote into the pod's condition.
            assert doc["message"] == message
            assert doc["reason"] == "Unschedulable"
            assert doc["schedulable"] is False
            seen = verdicts(doc)
            assert ours <= set(seen)
            if name == "big":
                for n in small:
                    assert seen[n] == (
                        "NodeResourcesFit",
                        ["Insufficient cpu"],
                        ["cpu: requested 2, free 1 of 1"],
                    )
                assert seen[tainted[0]] == (
                    "TaintToleration",
                    ["node(s) had untolerated taint(s)"],
                    ["taint dedicated=infra:NoSchedule not tolerated"],
                )
                unschedulable = ("NodeUnschedulable", ["node(s) were unschedulable"])
                assert seen[cordoned[0]][:2] == unschedulable
            else:
                for n in small:
                    assert seen[n] == (
                        "NodeAffinity",
                        ["node(s) didn't match Pod's node affinity/selector"],
                        ["nodeSelector disk=ssd: node has no disk label"],
                    )
        # kubectl finds the plugin on the PATH and passes it the rest of the words.
        via_kubectl = await explain(plane_state, "pod/big", "-n", namespace, kubectl=True)
        assert via_kubectl["message"] == doc_message(await get_pod(kube, namespace, "big"))


def doc_message(pod: dict[str, Any]) -> str:
    condition = scheduled_condition(pod)
    assert condition is not None
    return str(condition["message"])


async def test_anti_affinity_names_the_pod_in_the_way(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    db0 = pause_pod("db-0", scheduler_name=SCHEDULER)
    db0["metadata"]["labels"] = {"app": "db"}
    db0["spec"]["nodeName"] = names[0]
    await create_pods(kube, namespace, [db0])
    db1 = pause_pod("db-1", scheduler_name=SCHEDULER)
    db1["metadata"]["labels"] = {"app": "db"}
    db1["spec"]["affinity"] = anti
    manifest = Path(plane.state_dir) / f"{namespace}-db-1.yaml"
    manifest.write_text(yaml.safe_dump(db1))
    doc = await explain(plane_state, "-f", str(manifest), "-n", namespace)
    assert verdicts(doc)[names[0]] == (
        "InterPodAffinity",
        ["node(s) didn't match pod anti-affinity rules"],
        [f"anti-affinity with pod {namespace}/db-0 in kubernetes.io/hostname={names[0]}"],
    )
    assert names[1] in doc["best"]


async def test_a_pod_file_is_placed_where_explain_said(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    # Three nodes with different room: the resource scores pick one, no tie.
    sizes = {"2": None, "6": None, "4": None}
    made = {}
    for cpu in sizes:
        (made[cpu],) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-c{cpu}", cpu=cpu))
    pod = pause_pod("web", cpu="500m", memory="256Mi", scheduler_name=SCHEDULER)
    manifest = Path(plane.state_dir) / f"{namespace}-web.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    doc = await explain(plane_state, "-f", str(manifest), "-n", namespace)
    ours = set(made.values())
    best = [n for n in doc["best"] if n in ours]
    assert doc["chosen"] == best[0] == made["6"]
    top = doc["scores"]["nodes"][0]
    assert top["total"] == sum(p["weighted"] for p in top["plugins"].values())
    with scheduler(plane, plane_state, "explain-sched", SCHEDULER):
        await create_pods(kube, namespace, [pod])
        placed = await wait_bound(kube, namespace, ["web"])
    assert placed["web"] == doc["chosen"]


async def test_replicas_agree_with_creating_that_many_copies(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    big = await nodes(FakeNodes(count=1, prefix=f"{namespace}-big", cpu="4"))
    small = await nodes(FakeNodes(count=1, prefix=f"{namespace}-small", cpu="2"))
    copy = pause_pod("w", cpu="1", scheduler_name=SCHEDULER)
    manifest = Path(plane.state_dir) / f"{namespace}-w.yaml"
    manifest.write_text(yaml.safe_dump(copy))
    doc = await explain(plane_state, "-f", str(manifest), "-n", namespace, "--replicas", "10")
    replicas = doc["replicas"]
    per_node = {n: c for n, c in replicas["perNode"].items() if n in {*big, *small}}
    with scheduler(plane, plane_state, "explain-sched", SCHEDULER):
        pods = [pause_pod(f"w-{i}", cpu="1", scheduler_name=SCHEDULER) for i in range(10)]
        await create_pods(kube, namespace, pods)
        bound_or_not = await _settle(kube, namespace, [p["metadata"]["name"] for p in pods])
    landed = Counter(n for n in bound_or_not.values() if n)
    assert replicas["fit"] == sum(landed.values()) == 6
    assert per_node == dict(landed) == {big[0]: 4, small[0]: 2}
    assert replicas["stoppedBecause"].startswith("0/")


async def _settle(kube: KubeClient, namespace: str, names: list[str]) -> dict[str, str]:
    """Each pod's node once every pod is bound or found unschedulable."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        out: dict[str, str] = {}
        decided = 0
        for name in names:
            pod = await get_pod(kube, namespace, name)
            node = str(pod["spec"].get("nodeName") or "")
            out[name] = node
            condition = scheduled_condition(pod)
            if node or (condition is not None and condition.get("status") == "False"):
                decided += 1
        if decided == len(names) or loop.time() > deadline:
            return out
        await asyncio.sleep(0.2)


async def test_host_ports_and_spread_say_who_holds_the_port_and_the_skew(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    (z1,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-a", labels={"zone": "z1"}))
    (z2,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-b", labels={"zone": "z2"}))
    holder = pause_pod("holder", scheduler_name=SCHEDULER)
    holder["spec"]["nodeName"] = z2
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    placed = []
    for i in range(2):
        w = pause_pod(f"w{i}", scheduler_name=SCHEDULER)
        w["metadata"]["labels"] = {"app": "w"}
        w["spec"]["nodeName"] = z1
        placed.append(w)
    await create_pods(kube, namespace, [holder, *placed])
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    new = pause_pod("w2", scheduler_name=SCHEDULER, topologySpreadConstraints=spread)
    new["metadata"]["labels"] = {"app": "w"}
    new["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    manifest = Path(plane.state_dir) / f"{namespace}-w2.yaml"
    manifest.write_text(yaml.safe_dump(new))
    doc = await explain(plane_state, "-f", str(manifest), "-n", namespace)
    seen = verdicts(doc)
    assert seen[z2] == (
        "NodePorts",
        ["node(s) didn't have free ports for the requested pod ports"],
        [f"host port 0.0.0.0:8080/TCP in use by pod {namespace}/holder"],
    )
    assert seen[z1][0] == "PodTopologySpread"
    assert seen[z1][2] == [
        "zone=z1: 2 matching pod(s), the fewest in a domain 0; one more makes skew 3 > maxSkew 1"
    ]
    assert doc["schedulable"] is False


async def test_volumes_and_devices_name_the_claim_the_volume_and_the_counts(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    zone = "topology.kubernetes.io/zone"
    (a,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-a", labels={zone: "z1"}))
    (b,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-b", labels={zone: "z2"}))
    api = f"/api/v1/namespaces/{namespace}"

    async def post(path: str, body: dict[str, Any], cluster: bool = False) -> None:
        await kube.post(path, body)
        if cluster:
            cluster_objects.append(f"{path}/{body['metadata']['name']}")

    def claim_body(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": spec.pop("size", "1Gi")}},
                **spec,
            },
        }

    # A volume in zone z1, bound to its claim by the persistentvolume controller.
    zoned = f"{namespace}-zoned"
    await post(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": zoned, "labels": {zone: "z1"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": f"/mnt/{zoned}"},
                "claimRef": {"namespace": namespace, "name": "zoned"},
            },
        },
        cluster=True,
    )
    await post(
        f"{api}/persistentvolumeclaims", claim_body("zoned", storageClassName="", volumeName=zoned)
    )

    async def bound() -> bool:
        got = await kube.get(f"{api}/persistentvolumeclaims/zoned")
        return bool(got.get("status", {}).get("phase") == "Bound")

    assert await eventually(bound, what="the zoned claim bound")
    # A claim of 5Gi whose class cannot provision, and one local volume of 1Gi on a.
    local = f"{namespace}-local"
    await post(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": local},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        cluster=True,
    )
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [a]}]
    }
    await post(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": f"{namespace}-small"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": local,
                "local": {"path": "/mnt/small"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            },
        },
        cluster=True,
    )
    await post(
        f"{api}/persistentvolumeclaims", claim_body("data", storageClassName=local, size="5Gi")
    )
    # Devices: one a100 on a, one t4 on b; a claim for two a100s.
    resource = "/apis/resource.k8s.io/v1"
    driver = "gpu.example.com"
    klass = f"{namespace}-a100"
    expression = f'device.driver == "{driver}" && device.attributes["{driver}"].model == "a100"'
    await post(
        f"{resource}/deviceclasses",
        {"metadata": {"name": klass}, "spec": {"selectors": [{"cel": {"expression": expression}}]}},
        cluster=True,
    )
    for node, model in ((a, "a100"), (b, "t4")):
        await post(
            f"{resource}/resourceslices",
            {
                "metadata": {"name": f"{node}-gpus"},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": model}}}],
                },
            },
            cluster=True,
        )
    request = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": 2}
    await post(
        f"{resource}/namespaces/{namespace}/resourceclaims",
        {
            "metadata": {"name": "two"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
        },
    )

    async def explain_pod(name: str, body: dict[str, Any]) -> dict[str, Any]:
        body["metadata"]["namespace"] = namespace
        manifest = Path(plane.state_dir) / f"{namespace}-{name}.yaml"
        manifest.write_text(yaml.safe_dump(body))
        return await explain(plane_state, "-f", str(manifest), "--limit", "0")

    def with_claim(name: str, claim: str) -> dict[str, Any]:
        body = pause_pod(name, scheduler_name=SCHEDULER)
        body["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
        return body

    doc = await explain_pod("zoned", with_claim("zoned", "zoned"))
    seen = verdicts(doc)
    assert seen[b] == (
        "VolumeZone",
        ["node(s) had no available volume zone"],
        [f"persistentvolume {zoned} is in {zone} z1: node has {zone}=z2"],
    )
    assert a not in seen
    doc = await explain_pod("data", with_claim("data", "data"))
    seen = verdicts(doc)
    line = (
        f"persistentvolumeclaim data (5Gi of class {local}): no available volume fits it, and "
        "the class does not provision"
    )
    for node in (a, b):
        assert seen[node] == (
            "VolumeBinding",
            ["node(s) didn't find available persistent volumes to bind"],
            [line],
        )
    doc = await explain_pod("gpus", claiming_pod("gpus", claim="two", scheduler_name=SCHEDULER))
    seen = verdicts(doc)
    need = f"resourceclaim two: request gpu (class {klass}) needs 2 device(s)"
    assert seen[a] == ("DynamicResources", ["cannot allocate all claims"], [f"{need}, 1 free here"])
    assert seen[b] == ("DynamicResources", ["cannot allocate all claims"], [f"{need}, 0 free here"])
