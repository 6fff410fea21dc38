"""Resident memory of ascheduler and kube-scheduler holding the same cluster in their caches.

Starts its own local plane, creates `--nodes` fake nodes and `--pods` pods already assigned to
them (so neither scheduler schedules anything: both only list, watch and cache), then starts
ascheduler and kube-scheduler side by side and samples each process's RSS until it is steady.
Reproduce with:

    .venv/bin/python -m benchmarks memory --nodes 5000 --pods 11000 --save
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascheduler.devcluster.nodes import FakeNodes, create_fake_nodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from benchmarks import report
from benchmarks.common import RESULTS, bench_plane, context, rss_bytes, save, start_ascheduler


async def populate(kubeconfig: Path, nodes: int, pods: int) -> None:
    async with await KubeClient.connect(str(kubeconfig), pool_size=64) as kube:
        names = await create_fake_nodes(kube, FakeNodes(count=nodes), concurrency=64)
        await kube.post("/api/v1/namespaces", {"metadata": {"name": "mem"}})
        gate = asyncio.Semaphore(64)

        async def create(i: int) -> None:
            body = {
                "metadata": {"name": f"p-{i}", "labels": {"app": f"a{i % 50}"}},
                "spec": {
                    "nodeName": names[i % nodes],
                    "schedulerName": "nobody",
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
                await kube.post("/api/v1/namespaces/mem/pods", body)

        async with asyncio.TaskGroup() as group:
            for i in range(pods):
                group.create_task(create(i))


def steady_rss(record: ProcessRecord, *, settle: float = 10.0, timeout: float = 300.0) -> int:
    """Sample every second; steady once three samples in a row differ by under 1%."""
    start = time.monotonic()
    samples: list[int] = []
    while time.monotonic() - start < timeout:
        if not is_alive(record):
            raise RuntimeError(f"{record.name} exited; see {record.log}")
        samples.append(rss_bytes(record.pid))
        recent = samples[-3:]
        if (
            time.monotonic() - start > settle
            and len(recent) == 3
            and max(recent) - min(recent) < 0.01 * max(recent)
        ):
            return max(samples)
        time.sleep(1.0)
    return max(samples)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=11000)
    parser.add_argument(
        "--save",
        action="store_true",
        help="write results/<date>-memory.json and regenerate benchmarks/README.md's tables",
    )
    args = parser.parse_args(argv)

    with bench_plane("mem") as plane:
        state = plane.require_state()
        t0 = time.monotonic()
        asyncio.run(populate(state.admin_kubeconfig, args.nodes, args.pods))
        print(
            f"created {args.nodes} nodes and {args.pods} pods in {time.monotonic() - t0:.0f}s",
            file=sys.stderr,
        )
        ours = start_ascheduler(plane, "ascheduler")
        theirs = plane.start_kube_scheduler(scheduler_name="default-scheduler")
        result: dict[str, Any] = {
            "nodes": args.nodes,
            "pods": args.pods,
            "ascheduler_rss_bytes": steady_rss(ours),
            "kube_scheduler_rss_bytes": steady_rss(theirs),
        }
        result["ratio"] = round(
            result["ascheduler_rss_bytes"] / result["kube_scheduler_rss_bytes"], 2
        )
    print(json.dumps(result))
    if args.save:
        print(f"wrote {save('memory', {**context(), **result})}", file=sys.stderr)
        report.update_readme(RESULTS)
    return 0
