"""Sharding mode's throughput with 1, 2, 3 ... members (`ascheduler run --sharding`).

For each member count in `--members` (alternating, `--repeat` times), that many ascheduler
processes of one scheduler name start in one sharding group (`nodeLock.policy: all`, leader
election off) on `--nodes` SchedulingBasic nodes; once every member counts them all
(`ascheduler_shard_members`), `--pods` SchedulingBasic pods are created as fast as the harness
can and the time from the first bind to the last is measured (each pod's `spec.nodeName` seen
on a watch). The pods are created while the members run, not beforehand: a member that
started first would claim a backlog alone before it met the others. Reported per member
count: pods/s, API requests per pod and the members' CPU per pod (all members together, their
start included), and the throughput over one member's, run by run. With `--plane-cpus LIST`
the plane's processes run on the CPUs listed and the members and the harness on the others,
as `benchmarks run --plane-cpus` does. Reproduce with:

    .venv/bin/python -m benchmarks sharding --nodes 500 --pods 3000 --members 1 2 3 --repeat 3 \\
        --plane-cpus 0

On two cores the members share one core (and the harness) with `--plane-cpus 0`: the run
shows the plane's limit and what sharding adds to it, not how members scale on cores of their
own (docs/binding.md, "When sharding helps, and when the plane is the limit").
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
from benchmarks import cpus
from benchmarks.common import bench_plane, scrape, start_ascheduler
from benchmarks.locks import bound_times, create_pods


def member_figures(text: str) -> dict[str, float]:
    """From one member's metrics: requests sent, CPU seconds, members it counts."""
    out = {"requests": 0.0, "cpu_seconds": 0.0, "members": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rest_client_requests_total":
                out["requests"] += sample.value
            elif sample.name == "process_cpu_seconds_total":
                out["cpu_seconds"] += sample.value
            elif sample.name == "ascheduler_shard_members":
                out["members"] = sample.value
    return out


def config_file(plane: ControlPlane, scheduler: str, group: str) -> str:
    path = plane.state_dir / f"{group}.json"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": scheduler}],
                "ascheduler": {
                    "sharding": {"enabled": True, "group": group},
                    "nodeLock": {"policy": "all"},
                },
            }
        )
    )
    return str(path)


async def scrape_all(ports: Sequence[int]) -> list[str]:
    async with aiohttp.ClientSession() as session:
        return [await scrape(session, port) for port in ports]


async def all_met(ports: Sequence[int], members: int, timeout: float = 120.0) -> None:
    """Until every member counts `members` live members (its secure port answering)."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                texts = await scrape_all(ports)
            except aiohttp.ClientError:
                texts = []
            if texts and all(member_figures(t)["members"] == members for t in texts):
                return
            await asyncio.sleep(0.5)


def run_once(plane: ControlPlane, members: int, index: int, pods: int) -> dict[str, float]:
    state = plane.require_state()
    group = f"bench-{members}-{index}"
    scheduler = f"sharded-{members}-{index}"
    config = config_file(plane, scheduler, group)
    ports = [free_port() for _ in range(members)]
    records: list[ProcessRecord] = []
    try:
        for k, port in enumerate(ports):
            records.append(
                start_ascheduler(plane, f"ascheduler-{group}-{k}", "--config", config, port=port)
            )

        async def measure() -> tuple[float, float, list[str]]:
            await all_met(ports, members)
            async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
                creating = asyncio.ensure_future(create_pods(kube, group, [scheduler], pods))
                first, last = await bound_times(kube, group, pods, timeout=600)
                await creating
            return first, last, await scrape_all(ports)

        first, last, texts = asyncio.run(measure())
    finally:
        for record in records:
            plane.stop_process(record)
    figures = [member_figures(t) for t in texts]
    return {
        "pods_per_second": pods / max(last - first, 1e-3),
        "requests_per_pod": sum(f["requests"] for f in figures) / pods,
        "members_cpu_us_per_pod": 1e6 * sum(f["cpu_seconds"] for f in figures) / pods,
    }


def summarize(results: dict[int, list[dict[str, float]]]) -> dict[str, Any]:
    """Per member count, each figure's runs; and each count's throughput over one member's,
    run by run (when one member was measured)."""
    out: dict[str, Any] = {
        str(n): {key: [round(run[key], 2) for run in runs] for key in runs[0]}
        for n, runs in results.items()
        if runs
    }
    alone = results.get(1, [])
    for n, runs in results.items():
        if n == 1 or not alone or not runs:
            continue
        ratios = [
            r["pods_per_second"] / a["pods_per_second"] for r, a in zip(runs, alone, strict=True)
        ]
        out[str(n)]["throughput_over_one"] = {
            "median": round(statistics.median(ratios), 2),
            "min": round(min(ratios), 2),
            "max": round(max(ratios), 2),
        }
    return out


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks sharding",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--members", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plane-cpus", metavar="LIST")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.members):
        parser.error("--members: each count must be at least 1")
    split = None
    if args.plane_cpus is not None:
        try:
            split = cpus.Split.of(args.plane_cpus)
        except ValueError as exc:
            parser.error(str(exc))
    results: dict[int, list[dict[str, float]]] = {n: [] for n in args.members}
    with bench_plane("sharding", args.nodes) as plane:
        if split is not None:
            from benchmarks.run import keep_apart

            keep_apart(plane, split)
            print(split.describe(), file=sys.stderr)
        for i in range(args.repeat):
            for n in args.members:
                run = run_once(plane, n, i, args.pods)
                results[n].append(run)
                print(f"run {i} members {n}: {run}", file=sys.stderr)
    summary = {
        "nodes": args.nodes,
        "pods": args.pods,
        "plane_cpus": None if split is None else split.to_json(),
        **summarize(results),
    }
    print(json.dumps(summary))
    return 0
