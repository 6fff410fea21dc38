"""How long explaining one pod takes at scale: cold (`ascheduler explain`, a process that lists
the cluster and runs the dry run) and live (`/debug/pods/NS/NAME` of a running scheduler).

Starts its own plane, creates `--nodes` SchedulingBasic nodes and `--pods` pods bound to them,
then one pending pod that fits no node (every node rejected and grouped) and a manifest of one
that fits (every feasible node scored). Reproduce with:

    .venv/bin/python -m benchmarks explain --nodes 5000 --pods 10000 --save

Cold: the wall time of the whole command (interpreter start and imports included) and the
times it reports itself for listing and for the dry run; live: the wall time of the HTTP
request, and the dry run's own time inside it. Medians of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from ascheduler.devcluster.nodes import FakeNodes, create_fake_nodes, wait_nodes_ready
from ascheduler.devcluster.plane import free_port
from ascheduler.kube import KubeClient
from benchmarks import report
from benchmarks.common import RESULTS, bench_plane, context, save, start_ascheduler

NAMESPACE = "explain"


def _pod(name: str, cpu: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "ascheduler",
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def populate(kubeconfig: Path, nodes: int, pods: int) -> None:
    async with await KubeClient.connect(str(kubeconfig), pool_size=64) as kube:
        names = await create_fake_nodes(kube, FakeNodes(count=nodes), concurrency=64)
        await wait_nodes_ready(kube, names, timeout=600)
        await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        gate = asyncio.Semaphore(64)

        async def create(i: int) -> None:
            async with gate:
                await kube.post(
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    _pod(f"p-{i}", "100m", names[i % nodes]),
                )

        async with asyncio.TaskGroup() as group:
            for i in range(pods):
                group.create_task(create(i))
        await kube.post(f"/api/v1/namespaces/{NAMESPACE}/pods", _pod("pending", "64"))


def cold(kubeconfig: Path, *args: str) -> dict[str, float]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "ascheduler", "explain", *args, "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wall = time.perf_counter() - started
    doc = json.loads(out)
    return {"wall": wall, **doc["timings"]}


async def live(port: int, repeat: int) -> list[dict[str, float]]:
    url = f"http://127.0.0.1:{port}/debug/pods/{NAMESPACE}/pending"
    runs = []
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + 300
        while True:  # until the scheduler has synced and tried the pod once
            try:
                async with session.get(url) as resp:
                    if resp.status == 200 and (await resp.json()).get("lastAttempt"):
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the scheduler never tried the pending pod")
            await asyncio.sleep(1.0)
        for _ in range(repeat):
            started = time.perf_counter()
            async with session.get(url) as resp:
                doc = await resp.json()
            runs.append(
                {
                    "wall": time.perf_counter() - started,
                    "dryRun": float(doc["now"]["timings"]["dryRun"]),
                }
            )
    return runs


def median(runs: Sequence[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 4)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks explain",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--save",
        action="store_true",
        help="write results/<date>-explain.json and regenerate benchmarks/README.md's tables",
    )
    args = parser.parse_args(argv)

    with bench_plane("explain") as plane:
        state = plane.require_state()
        t0 = time.monotonic()
        asyncio.run(populate(state.admin_kubeconfig, args.nodes, args.pods))
        print(
            f"created {args.nodes} nodes and {args.pods} pods in {time.monotonic() - t0:.0f}s",
            file=sys.stderr,
        )
        manifest = Path(state.admin_kubeconfig).parent / "fits.yaml"
        manifest.write_text(yaml.safe_dump(_pod("fits", "1")))
        pending = [
            cold(state.admin_kubeconfig, f"{NAMESPACE}/pending", "--profile", "ascheduler")
            for _ in range(args.repeat)
        ]
        fits = [
            cold(state.admin_kubeconfig, "-f", str(manifest), "-n", NAMESPACE)
            for _ in range(args.repeat)
        ]
        port = free_port()
        start_ascheduler(
            plane, "ascheduler", "--debug-endpoints", "loopback", f"--http-address=127.0.0.1:{port}"
        )
        served = asyncio.run(live(port, max(args.repeat, 20)))
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "repeat": args.repeat,
        "cold_pending": {k: median(pending, k) for k in ("wall", "list", "dryRun")},
        "cold_fits": {k: median(fits, k) for k in ("wall", "list", "dryRun")},
        "live": {
            "wall": median(served, "wall"),
            "dryRun": median(served, "dryRun"),
            "runs": len(served),
        },
    }
    print(json.dumps(result))
    if args.save:
        print(f"wrote {save('explain', {**context(), **result})}", file=sys.stderr)
        report.update_readme(RESULTS)
    return 0
