"""scheduler_perf-style runs: ascheduler, kube-scheduler and the ceiling on one plane.

    python -m benchmarks run --workload SchedulingBasic_500Nodes_1000Pods \\
        [--scheduler ascheduler|kube-scheduler|ceiling|all] [--repeat N] [--out DIR]

One local plane (benchmark mode: no API priority-and-fairness or inflight limits) and one set of
nodes serve every scheduler in turn; each run gets its own namespace and schedulerName. A run
creates the workload's initial pods and waits for them, then creates the measured pods as fast
as the plane accepts them while a watch records when each pod's `spec.nodeName` is set.
Reported, per scheduler (median over repeats): throughput (average, and p50/p90/p99 of 1 s
samples with the first skipped, as scheduler_perf does), pod latency (creation -> bound seen),
the scheduler process's CPU seconds and peak RSS. kube-scheduler gets qps/burst 5000/5000 and
the same admin identity as ascheduler; the ceiling is `benchmarks.ceiling`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ascheduler.devcluster import ControlPlane, versions
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from benchmarks.common import bench_plane, start_ascheduler

SCHEDULERS = ("ascheduler", "kube-scheduler", "ceiling")
RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: int
    initial_pods: int
    measured_pods: int


WORKLOADS = {
    w.name: w
    for w in (
        Workload("SchedulingBasic_500Nodes_1000Pods", 500, 500, 1000),
        Workload("SchedulingBasic_5000Nodes_10000Pods", 5000, 1000, 10000),
        Workload("Smoke_10Nodes_40Pods", 10, 10, 40),
    )
}


def pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def create_all(
    kube: KubeClient, namespace: str, bodies: list[dict[str, Any]], created: dict[str, float]
) -> None:
    gate = asyncio.Semaphore(64)

    async def create(body: dict[str, Any]) -> None:
        async with gate:
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)
            created[body["metadata"]["name"]] = time.monotonic()

    async with asyncio.TaskGroup() as group:
        for body in bodies:
            group.create_task(create(body))


async def watch_bound(
    kube: KubeClient, namespace: str, bound: dict[str, float], want: int, done: asyncio.Event
) -> None:
    """Record when each pod is first seen bound; list again whenever the watch ends."""
    while not done.is_set():
        listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
        for p in listing["items"]:
            if p["spec"].get("nodeName"):
                bound.setdefault(p["metadata"]["name"], time.monotonic())
        if len(bound) >= want:
            done.set()
            return
        params = {
            "watch": "true",
            "resourceVersion": listing["metadata"]["resourceVersion"],
            "timeoutSeconds": "60",
        }
        async with kube.session.get(
            f"{kube.server}/api/v1/namespaces/{namespace}/pods",
            params=params,
            headers=await kube.headers(),
        ) as resp:
            async for line in resp.content:
                obj = orjson.loads(line).get("object") or {}
                if (obj.get("spec") or {}).get("nodeName"):
                    bound.setdefault(obj["metadata"]["name"], time.monotonic())
                    if len(bound) >= want:
                        done.set()
                        return


def start_scheduler(plane: ControlPlane, which: str, name: str) -> ProcessRecord:
    state = plane.require_state()
    kubeconfig = str(state.admin_kubeconfig)
    if which == "kube-scheduler":
        return plane.start_kube_scheduler(
            name=f"kube-scheduler-{name}", scheduler_name=name, qps=5000, burst=5000
        )
    if which == "ceiling":
        return plane.start_process(
            f"ceiling-{name}",
            [
                sys.executable,
                "-m",
                "benchmarks.ceiling",
                "--kubeconfig",
                kubeconfig,
                "--scheduler-name",
                name,
            ],
        )
    return start_ascheduler(plane, f"ascheduler-{name}", "--scheduler-name", name)


async def one_run(
    plane: ControlPlane, workload: Workload, which: str, index: int, progress: bool
) -> dict[str, Any]:
    state = plane.require_state()
    name = f"{which}-{index}"
    namespace = f"bench-{name}"
    record = start_scheduler(plane, which, name)
    try:
        async with await KubeClient.connect(str(state.admin_kubeconfig), pool_size=72) as kube:
            await kube.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
            created: dict[str, float] = {}
            bound: dict[str, float] = {}
            initial = [pod(f"init-{i}", name) for i in range(workload.initial_pods)]
            measured = [pod(f"m-{i}", name) for i in range(workload.measured_pods)]
            total = len(initial) + len(measured)
            done = asyncio.Event()
            watcher = asyncio.create_task(watch_bound(kube, namespace, bound, total, done))
            await create_all(kube, namespace, initial, created)
            while sum(1 for n in bound if n.startswith("init-")) < len(initial):
                if watcher.done():
                    watcher.result()  # raises what stopped it
                await asyncio.sleep(0.1)
            cpu0 = cpu_seconds(record.pid)
            peak = rss_bytes(record.pid)
            start = time.monotonic()
            creating = asyncio.create_task(create_all(kube, namespace, measured, created))
            samples: list[int] = []
            last = sum(1 for n in bound if n.startswith("m-"))
            while not done.is_set():
                await asyncio.sleep(1.0)
                if watcher.done() and not done.is_set():
                    watcher.result()
                if not is_alive(record):
                    raise RuntimeError(f"{which} exited; see {record.log}")
                now_bound = sum(1 for n in bound if n.startswith("m-"))
                samples.append(now_bound - last)
                last = now_bound
                peak = max(peak, rss_bytes(record.pid))
                if progress:
                    print(
                        f"\r  {which} run {index}: {now_bound}/{len(measured)} bound, "
                        f"{samples[-1]} pods/s   ",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
                if time.monotonic() - start > 900:
                    raise TimeoutError(f"{which}: not all pods bound after 900 s")
            await creating
            watcher.cancel()
            if progress:
                print(file=sys.stderr)
            end = max(bound[n] for n in bound if n.startswith("m-"))
            latencies = [
                bound[n] - created[n] for n in bound if n.startswith("m-") and n in created
            ]
            measured_samples = samples[1:] or samples
            return {
                "scheduler": which,
                "throughput_avg": len(measured) / max(end - start, 1e-3),
                "throughput_p50": percentile(measured_samples, 0.5),
                "throughput_p90": percentile(measured_samples, 0.9),
                "throughput_p99": percentile(measured_samples, 0.99),
                "latency_p50": percentile(latencies, 0.5),
                "latency_p90": percentile(latencies, 0.9),
                "latency_p99": percentile(latencies, 0.99),
                "cpu_seconds": cpu_seconds(record.pid) - cpu0,
                "peak_rss_bytes": peak,
                "samples": samples,
            }
    finally:
        plane.stop_process(record)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in runs[0] if k not in ("scheduler", "samples")]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def markdown(workload: str, summary: dict[str, dict[str, Any]]) -> str:
    rows = [
        f"### {workload}",
        "",
        "| scheduler | pods/s avg | p50 | p90 | p99 | latency p50 s | p99 s | CPU s "
        "| peak RSS MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in summary.items():
        rows.append(
            f"| {name} | {s['throughput_avg']:.0f} | {s['throughput_p50']:.0f} | "
            f"{s['throughput_p90']:.0f} | {s['throughput_p99']:.0f} | "
            f"{s['latency_p50']:.2f} | {s['latency_p99']:.2f} | "
            f"{s['cpu_seconds']:.1f} | {s['peak_rss_bytes'] / 2**20:.0f} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--scheduler", default="all", choices=[*SCHEDULERS, "all"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    which = SCHEDULERS if args.scheduler == "all" else (args.scheduler,)

    with bench_plane("bench", workload.nodes) as plane:
        runs: dict[str, list[dict[str, Any]]] = {w: [] for w in which}
        for i in range(args.repeat):
            for w in which:  # alternate, so drift in the machine hits every scheduler
                runs[w].append(asyncio.run(one_run(plane, workload, w, i, not args.quiet)))
    summary = {w: summarise(r) for w, r in runs.items()}
    ratios = {}
    if "ascheduler" in summary:
        for other in ("kube-scheduler", "ceiling"):
            if other in summary:
                per_run = [
                    a["throughput_avg"] / b["throughput_avg"]
                    for a, b in zip(runs["ascheduler"], runs[other], strict=True)
                ]
                ratios[f"throughput ascheduler/{other}"] = {
                    "median": statistics.median(per_run),
                    "min": min(per_run),
                    "max": max(per_run),
                }
    result = {
        "workload": workload.name,
        "date": dt.datetime.now(dt.UTC).isoformat(),
        "repeat": args.repeat,
        "summary": summary,
        "ratios": ratios,
        "runs": runs,
        "versions": {
            "kubernetes": versions.KUBERNETES_VERSION,
            "etcd": versions.ETCD_VERSION,
            "kwok": versions.KWOK_VERSION,
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{dt.date.today().isoformat()}-{workload.name}"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(workload.name, summary)
    for name, r in ratios.items():
        table += f"\n{name}: median {r['median']:.2f} (min {r['min']:.2f}, max {r['max']:.2f})"
    (args.out / f"{stem}.md").write_text(table + "\n")
    print(table)
    return 0
