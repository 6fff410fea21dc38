"""Throughput of ascheduler with node-lock policy `all` against `none`, same plane, same run.

SchedulingBasic shapes on `--nodes` nodes. For each policy (in alternation, `--repeat` times),
`--pods` pods are created while no scheduler runs, then ascheduler starts and the time from
its first bind to its last is measured (each pod's `spec.nodeName` seen set on a watch).
Reports pods/s per policy, the ratio all/none (median of the repeats, with min and max), and
for policy `all` how many binds each hold of a node's lock served (binds to one node coalesce).
Reproduce with:

    .venv/bin/python -m benchmarks locks --nodes 500 --pods 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Sequence
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.plane import free_port
from ascheduler.kube import KubeClient
from benchmarks.common import bench_plane, scrape, start_ascheduler
from benchmarks.objects import watch_bound
from benchmarks.workloads import basic_pod


async def create_pods(
    kube: KubeClient, namespace: str, schedulers: Sequence[str], count: int
) -> None:
    """The namespace and `count` SchedulingBasic pods in it, their scheduler names taken from
    `schedulers` in turn."""
    await kube.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
    gate = asyncio.Semaphore(64)

    async def create(i: int) -> None:
        async with gate:
            body = basic_pod(f"p-{i}", schedulers[i % len(schedulers)], i)
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)

    async with asyncio.TaskGroup() as group:
        for i in range(count):
            group.create_task(create(i))


async def bound_times(
    kube: KubeClient, namespace: str, count: int, timeout: float
) -> tuple[float, float]:
    """(time the first pod was seen bound, time the last one was)."""
    bound: dict[str, float] = {}
    done = asyncio.Event()
    try:
        async with asyncio.timeout(timeout):
            await watch_bound(kube, namespace, bound, count, done)
    except TimeoutError:
        raise TimeoutError(f"{len(bound)} of {count} pods bound in {timeout:.0f}s") from None
    return min(bound.values()), max(bound.values())


async def binds_per_hold(port: int) -> dict[str, float]:
    """`ascheduler_node_lock_binds_per_hold` from the process: holds, binds, binds/hold."""
    async with aiohttp.ClientSession() as session:
        text = await scrape(session, port)
    values = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "ascheduler_node_lock_binds_per_hold"
        for sample in family.samples
    }
    holds = values.get("ascheduler_node_lock_binds_per_hold_count", 0.0)
    binds = values.get("ascheduler_node_lock_binds_per_hold_sum", 0.0)
    return {"holds": holds, "binds": binds, "binds_per_hold": binds / holds if holds else 0.0}


def config_file(plane: ControlPlane, scheduler: str, policy: str, scoring: str) -> str:
    """A configuration with one profile scoring NodeResourcesFit by `scoring`."""
    path = plane.state_dir / f"{scheduler}.json"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": scheduler,
                        "pluginConfig": [
                            {
                                "name": "NodeResourcesFit",
                                "args": {"scoringStrategy": {"type": scoring}},
                            }
                        ],
                    }
                ],
                # Locks taken as they are beside other instances (alone, none would be).
                "ascheduler": {"nodeLock": {"policy": policy, "whenAlone": "lock"}},
            }
        )
    )
    return str(path)


def run_once(
    plane: ControlPlane, policy: str, index: int, pods: int, scoring: str
) -> tuple[float, dict[str, float]]:
    state = plane.require_state()
    namespace = f"locks-{policy}-{index}"
    scheduler = f"sched-{policy}-{index}"

    async def prepare() -> None:
        async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
            await create_pods(kube, namespace, [scheduler], pods)

    asyncio.run(prepare())
    port = free_port()
    record = start_ascheduler(
        plane,
        f"ascheduler-{policy}-{index}",
        "--config",
        config_file(plane, scheduler, policy, scoring),
        port=port,
    )
    try:

        async def measure() -> tuple[float, float, dict[str, float]]:
            async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
                first, last = await bound_times(kube, namespace, pods, timeout=600)
            return first, last, await binds_per_hold(port)

        first, last, holds = asyncio.run(measure())
    finally:
        plane.stop_process(record)
    return pods / max(last - first, 1e-3), holds


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks locks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--scoring",
        default="LeastAllocated",
        choices=["LeastAllocated", "MostAllocated"],
        help="NodeResourcesFit's strategy: spreading (the default) or bin-packing, which "
        "queues several binds per node, so coalescing under one hold shows",
    )
    args = parser.parse_args(argv)
    with bench_plane("locks", args.nodes) as plane:
        results: dict[str, list[float]] = {"none": [], "all": []}
        coalescing: list[dict[str, float]] = []
        for i in range(args.repeat):
            for policy in ("none", "all"):
                rate, holds = run_once(plane, policy, i, args.pods, args.scoring)
                results[policy].append(round(rate, 1))
                if policy == "all":
                    coalescing.append(holds)
                print(f"run {i} policy {policy}: {rate:.1f} pods/s {holds}", file=sys.stderr)
        ratios = [a / n for a, n in zip(results["all"], results["none"], strict=True)]
        summary: dict[str, Any] = {
            "nodes": args.nodes,
            "scoring": args.scoring,
            "pods": args.pods,
            "pods_per_second": results,
            "binds_per_hold": [round(h["binds_per_hold"], 2) for h in coalescing],
            "ratio_all_over_none": {
                "median": round(statistics.median(ratios), 2),
                "min": round(min(ratios), 2),
                "max": round(max(ratios), 2),
            },
        }
    print(json.dumps(summary))
    return 0
