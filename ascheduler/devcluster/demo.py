"""`make demo`: a local plane, fake nodes, a scheduler, a handful of pods, a Deployment
spread over zones with anti-affinity, a pod that gets a GPU through a ResourceClaim (Dynamic
Resource Allocation: a driver's ResourceSlice on the GPU node, a DeviceClass, a claim
template), and where each pod landed.

Everything it starts it stops again, by pid, unless `--keep` leaves the plane up for poking at
(then `ascheduler cluster down --state-dir <dir>` stops it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascheduler.devcluster import BuildError, ControlPlane, PlaneError, ensure_built
from ascheduler.devcluster.nodes import FakeNodes, create_fake_nodes, wait_nodes_ready
from ascheduler.kube import KubeClient

NAMESPACE = "demo"
SCHEDULER_NAME = "ascheduler"
ZONE = "topology.kubernetes.io/zone"
REPLICAS = 4
DRA = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.demo.example.com"
DRA_POD = "inference-0"


def _say(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def demo_pods() -> list[dict[str, Any]]:
    def pod(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
        limits = extra.pop("limits", None)
        resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
        if limits:
            resources["limits"] = limits
            resources["requests"].update(limits)
        return {
            "metadata": {"name": name, "labels": {"app": "demo"}},
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}
                ],
                **extra,
            },
        }

    return [
        *(pod(f"web-{i}", "500m", "1Gi") for i in range(4)),
        *(pod(f"batch-{i}", "2", "8Gi") for i in range(2)),
        pod("trainer-0", "1", "4Gi", limits={"nvidia.com/gpu": "2"}),
        pod("zone-b-cache", "250m", "512Mi", nodeSelector={"topology.kubernetes.io/zone": "b"}),
        pod("too-big", "64", "1Gi"),
    ]


def dra_objects(node: str) -> list[tuple[str, dict[str, Any]]]:
    """(collection, body): two A100s a driver publishes on `node`, a DeviceClass selecting
    them, a claim template asking for one, and a pod using it."""
    model = f'device.attributes["{DRIVER}"].model'
    slice_body = {
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": "a100"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(2)
            ],
        },
    }
    device_class = {
        "metadata": {"name": "demo-a100"},
        "spec": {
            "selectors": [
                {"cel": {"expression": f'device.driver == "{DRIVER}" && {model} == "a100"'}}
            ]
        },
    }
    request = {"deviceClassName": "demo-a100", "allocationMode": "ExactCount", "count": 1}
    template = {
        "metadata": {"name": "one-a100"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
    }
    pod = {
        "metadata": {"name": DRA_POD, "labels": {"app": "demo"}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-a100"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "claims": [{"name": "gpu"}],
                    },
                }
            ],
        },
    }
    return [
        (f"{DRA}/resourceslices", slice_body),
        (f"{DRA}/deviceclasses", device_class),
        (f"{DRA}/namespaces/{NAMESPACE}/resourceclaimtemplates", template),
        (f"/api/v1/namespaces/{NAMESPACE}/pods", pod),
    ]


async def _claimed_devices(kube: KubeClient) -> list[str]:
    """The devices allocated to the DRA pod's claim, as `driver/pool/device`."""
    pod = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{DRA_POD}")
    out = []
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        name = status.get("resourceClaimName")
        if not name:
            continue
        claim = await kube.get(f"{DRA}/namespaces/{NAMESPACE}/resourceclaims/{name}")
        allocation = claim.get("status", {}).get("allocation") or {}
        for r in allocation.get("devices", {}).get("results") or []:
            out.append(f"{r['driver']}/{r['pool']}/{r['device']}")
    return out


def spread_deployment(
    name: str = "spread", replicas: int = REPLICAS, scheduler_name: str = SCHEDULER_NAME
) -> dict[str, Any]:
    """A Deployment whose replicas must not share a node, spread evenly over the zones
    (maxSkew 1)."""
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": scheduler_name,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": ZONE,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": labels},
                        }
                    ],
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": labels},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                },
            },
        },
    }


async def _run(plane: ControlPlane) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(pod, node) pairs, or (pod, "(pending: <why>)") for pods that fit nowhere; and each
    node's zone."""
    state = plane.require_state()
    async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
        names = [
            *await create_fake_nodes(
                kube, FakeNodes(count=3, prefix="cpu", labels={"topology.kubernetes.io/zone": "a"})
            ),
            *await create_fake_nodes(
                kube,
                FakeNodes(count=2, prefix="zone-b", labels={"topology.kubernetes.io/zone": "b"}),
            ),
            *await create_fake_nodes(
                kube,
                FakeNodes(
                    count=1,
                    prefix="gpu",
                    cpu="16",
                    memory="64Gi",
                    extended={"nvidia.com/gpu": "4"},
                    labels={"topology.kubernetes.io/zone": "a"},
                ),
            ),
        ]
        await wait_nodes_ready(kube, names)
        zones = {n: "b" if n.startswith("zone-b") else "a" for n in names}
        _say(f"{len(names)} fake nodes Ready: {', '.join(names)}")

        plane.start_ascheduler("ascheduler", "--scheduler-name", SCHEDULER_NAME)
        log_path = plane.state_dir / "logs" / "ascheduler.log"
        _say(f"ascheduler started (schedulerName {SCHEDULER_NAME}; log {log_path})")
        await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        pods = demo_pods()
        for body in pods:
            await kube.post(f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        await kube.post(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", spread_deployment())
        gpu_node = next(n for n in names if n.startswith("gpu"))
        for collection, body in dra_objects(gpu_node):
            await kube.post(collection, body)
        _say(
            f"created {len(pods)} pods, a Deployment of {REPLICAS} (zone spread, one per "
            f"node) and {DRA_POD}, whose claim asks for one of {gpu_node}'s two A100s, in "
            f"namespace {NAMESPACE}"
        )
        expected = len(pods) + REPLICAS + 1

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while True:
            listing = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")
            placed = [(p["metadata"]["name"], _where(p)) for p in listing["items"]]
            done = len(placed) >= expected and all(where for _, where in placed)
            if done or loop.time() > deadline:
                devices = await _claimed_devices(kube)
                _say(f"{DRA_POD}'s claim is allocated {', '.join(devices) or 'nothing'}")
                return sorted(placed), zones
            await asyncio.sleep(0.2)


def _where(pod: dict[str, Any]) -> str:
    """The pod's node, the scheduler's reason if it fits nowhere, or "" while undecided."""
    if pod["spec"].get("nodeName"):
        return str(pod["spec"]["nodeName"])
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
            return f"(pending: {c.get('message')})"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ascheduler.devcluster.demo", description=__doc__
    )
    parser.add_argument("--keep", action="store_true", help="leave the plane running")
    args = parser.parse_args(argv)

    state_dir = Path(tempfile.mkdtemp(prefix="ascheduler-demo-"))
    try:
        bins = ensure_built(progress=_say)
        plane = ControlPlane(state_dir, bins=bins, progress=_say, die_with_parent=not args.keep)
        plane.up()
    except (BuildError, PlaneError) as exc:
        _say(f"error: {exc}")
        return 1
    try:
        placed, zones = asyncio.run(_run(plane))
    finally:
        if not args.keep:
            plane.down()
            _say("plane stopped")
    width = max(len(name) for name, _ in placed)
    print(f"{'POD':<{width}}  ZONE  NODE")
    for name, node in placed:
        print(f"{name:<{width}}  {zones.get(node, '-'):<4}  {node or '(not scheduled in time)'}")
    if args.keep:
        print(
            f"\nplane left running: export KUBECONFIG={plane.require_state().admin_kubeconfig}"
            f"\nstop it with: ascheduler cluster down --state-dir {state_dir}"
        )
    return 0 if all(where for _, where in placed) else 1


if __name__ == "__main__":
    raise SystemExit(main())
