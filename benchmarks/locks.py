"""Throughput of ascheduler with node-lock policy `all` against `none`, same plane, same run.

SchedulingBasic shapes on `--nodes` nodes. For each policy (in alternation, `--repeat` times),
`--pods` pods are created while no scheduler runs, then ascheduler starts and the time from
its first bind to its last is measured (pods whose `spec.nodeName` got set, polled every
0.2 s). Reports pods/s per policy and the ratio all/none (median of the repeats).
Reproduce with:

    .venv/bin/python -m benchmarks locks --nodes 500 --pods 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.kube import KubeClient
from benchmarks.common import bench_plane, start_ascheduler


async def create_pods(kube: KubeClient, namespace: str, scheduler: str, count: int) -> None:
    await kube.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
    gate = asyncio.Semaphore(64)

    async def create(i: int) -> None:
        body = {
            "metadata": {"name": f"p-{i}"},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                    }
                ],
            },
        }
        async with gate:
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)

    async with asyncio.TaskGroup() as group:
        for i in range(count):
            group.create_task(create(i))


async def bound_times(
    kube: KubeClient, namespace: str, count: int, timeout: float
) -> tuple[float, float]:
    """(time of the first bind seen, time all were bound)."""
    first = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
        bound = sum(1 for p in listing["items"] if p["spec"].get("nodeName"))
        now = time.monotonic()
        if bound and first is None:
            first = now
        if bound >= count:
            return first or now, now
        await asyncio.sleep(0.2)
    raise TimeoutError(f"only some of {count} pods bound in {timeout:.0f}s")


def run_once(plane: ControlPlane, policy: str, index: int, pods: int) -> float:
    state = plane.require_state()
    namespace = f"locks-{policy}-{index}"
    scheduler = f"sched-{policy}-{index}"

    async def prepare() -> None:
        async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
            await create_pods(kube, namespace, scheduler, pods)

    asyncio.run(prepare())
    record = start_ascheduler(
        plane,
        f"ascheduler-{policy}-{index}",
        "--scheduler-name",
        scheduler,
        "--node-lock-policy",
        policy,
    )
    try:

        async def measure() -> tuple[float, float]:
            async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
                return await bound_times(kube, namespace, pods, timeout=600)

        first, last = asyncio.run(measure())
    finally:
        plane.stop_process(record)
    return pods / max(last - first, 1e-3)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks locks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with bench_plane("locks", args.nodes) as plane:
        results: dict[str, list[float]] = {"none": [], "all": []}
        for i in range(args.repeat):
            for policy in ("none", "all"):
                rate = run_once(plane, policy, i, args.pods)
                results[policy].append(round(rate, 1))
                print(f"run {i} policy {policy}: {rate:.1f} pods/s", file=sys.stderr)
        ratios = [a / n for a, n in zip(results["all"], results["none"], strict=True)]
        summary: dict[str, Any] = {
            "nodes": args.nodes,
            "pods": args.pods,
            "pods_per_second": results,
            "ratio_all_over_none": {
                "median": round(statistics.median(ratios), 2),
                "min": round(min(ratios), 2),
                "max": round(max(ratios), 2),
            },
        }
    print(json.dumps(summary))
    return 0
