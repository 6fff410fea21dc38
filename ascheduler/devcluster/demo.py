"""`make demo`: a local plane, fake nodes, a scheduler, a handful of pods and a Deployment
spread over zones with anti-affinity, and where each pod landed.

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
        _say(
            f"created {len(pods)} pods and a Deployment of {REPLICAS} (zone spread, one per "
            f"node) in namespace {NAMESPACE}"
        )
        expected = len(pods) + REPLICAS

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while True:
            listing = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")
            placed = [(p["metadata"]["name"], _where(p)) for p in listing["items"]]
            done = len(placed) >= expected and all(where for _, where in placed)
            if done or loop.time() > deadline:
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
