"""Several instances binding to the same nodes at once: a Lease per node against lease groups.

`--instances` ascheduler processes, each with a scheduler name of its own, share `--nodes`
SchedulingBasic nodes, and every bind takes its node's lock (policy `all`). For each lock
layout, a Lease per node (`leaseGroups: 0`) and `--lease-groups` groups, alternating
`--repeat` times: `--pods` pods are created while no instance runs, their scheduler names taken
in turn, so each instance has the same share; then the instances start together and the time
from the first bind to the last, of all the pods, is measured (each pod's `spec.nodeName`
seen set on a watch). Reported per layout: pods/s, API requests per pod (all instances
together) and, from the instances' metrics, how they got in each other's way: how often a
bind found its lock held by the other instance (`ascheduler_node_lock_contended_total`), the
mean wait for a lock and the waits longer than 0.1 s (`ascheduler_node_lock_wait_seconds`,
counted from the bind's start). Reproduce with:

    .venv/bin/python -m benchmarks instances --nodes 500 --pods 2000 --instances 2 --repeat 3
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
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from benchmarks.common import bench_plane, scrape, start_ascheduler
from benchmarks.locks import bound_times, create_pods

#: The lock waits counted as slow (a histogram bucket's bound).
SLOW: str = "0.1"


def lock_figures(text: str) -> dict[str, float]:
    """From one instance's metrics: requests sent, locks found held, and the lock
    waits (count, total seconds, how many took longer than `SLOW`)."""
    out = {"requests": 0.0, "contended": 0.0, "waits": 0.0, "wait_seconds": 0.0, "fast": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rest_client_requests_total":
                out["requests"] += sample.value
            elif sample.name == "ascheduler_node_lock_contended_total":
                out["contended"] += sample.value
            elif sample.name == "ascheduler_node_lock_wait_seconds_count":
                out["waits"] += sample.value
            elif sample.name == "ascheduler_node_lock_wait_seconds_sum":
                out["wait_seconds"] += sample.value
            elif (
                sample.name == "ascheduler_node_lock_wait_seconds_bucket"
                and sample.labels.get("le") == SLOW
            ):
                out["fast"] += sample.value
    return out


async def scrape_metrics(port: int) -> str:
    async with aiohttp.ClientSession() as session:
        return await scrape(session, port)


def config_file(plane: ControlPlane, scheduler: str, groups: int) -> str:
    path = plane.state_dir / f"{scheduler}.json"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                # Instances of different names all run (one lease would elect one of them).
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": scheduler}],
                "ascheduler": {
                    "nodeLock": {"policy": "all", "whenAlone": "lock", "leaseGroups": groups}
                },
            }
        )
    )
    return str(path)


def run_once(
    plane: ControlPlane, groups: int, index: int, pods: int, instances: int
) -> dict[str, float]:
    state = plane.require_state()
    namespace = f"instances-{groups}-{index}"
    schedulers = [f"sched-{groups}-{index}-{k}" for k in range(instances)]

    async def prepare() -> None:
        async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
            await create_pods(kube, namespace, schedulers, pods)

    asyncio.run(prepare())
    ports = [free_port() for _ in schedulers]
    records: list[ProcessRecord] = []
    try:
        for scheduler, port in zip(schedulers, ports, strict=True):
            records.append(
                start_ascheduler(
                    plane,
                    f"ascheduler-{scheduler}",
                    "--config",
                    config_file(plane, scheduler, groups),
                    port=port,
                )
            )

        async def measure() -> tuple[float, float, list[str]]:
            async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
                first, last = await bound_times(kube, namespace, pods, timeout=600)
            await asyncio.sleep(2.0)  # the Events trail the binds
            return first, last, [await scrape_metrics(port) for port in ports]

        first, last, texts = asyncio.run(measure())
    finally:
        for record in records:
            plane.stop_process(record)
    totals = {key: sum(lock_figures(t)[key] for t in texts) for key in lock_figures("")}
    waits = totals["waits"]
    return {
        "pods_per_second": pods / max(last - first, 1e-3),
        "requests_per_pod": totals["requests"] / pods,
        "contended": totals["contended"],
        "mean_wait_ms": 1e3 * totals["wait_seconds"] / waits if waits else 0.0,
        "slow_waits": waits - totals["fast"],
    }


def summarize(results: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Per layout, each figure's runs; and the groups' throughput over the per-node one's,
    run by run."""
    out: dict[str, Any] = {
        layout: {key: [round(run[key], 2) for run in runs] for key in runs[0]}
        for layout, runs in results.items()
        if runs
    }
    per_node, grouped = results.get("lease per node", []), results.get("lease groups", [])
    if per_node and grouped:
        ratios = [
            g["pods_per_second"] / p["pods_per_second"]
            for g, p in zip(grouped, per_node, strict=True)
        ]
        out["throughput_groups_over_per_node"] = {
            "median": round(statistics.median(ratios), 2),
            "min": round(min(ratios), 2),
            "max": round(max(ratios), 2),
        }
    return out


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks instances",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--lease-groups", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    layouts = {"lease per node": 0, "lease groups": args.lease_groups}
    results: dict[str, list[dict[str, float]]] = {layout: [] for layout in layouts}
    with bench_plane("instances", args.nodes) as plane:
        for i in range(args.repeat):
            for layout, groups in layouts.items():
                run = run_once(plane, groups, i, args.pods, args.instances)
                results[layout].append(run)
                print(f"run {i} {layout}: {run}", file=sys.stderr)
    summary = {
        "nodes": args.nodes,
        "pods": args.pods,
        "instances": args.instances,
        "lease_groups": args.lease_groups,
        **summarize(results),
    }
    print(json.dumps(summary))
    return 0
