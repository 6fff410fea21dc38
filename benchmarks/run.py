"""scheduler_perf-style runs: ascheduler, kube-scheduler and the ceiling on one plane.

    python -m benchmarks run --workload SchedulingBasic_500Nodes_1000Pods \\
        [--scheduler ascheduler|kube-scheduler|ceiling|all] [--repeat N] [--out DIR] \\
        [--kubeconfig FILE]

Without `--kubeconfig` it starts a local plane in benchmark mode (no API priority-and-fairness
or inflight limits); with it, it uses that cluster, whose kwok must keep nodes annotated
`kwok.x-k8s.io/node=fake` Ready. Either way it creates the workload's fake nodes (labelled
`ascheduler.io/benchmark=<run>`, deleted at the end on a cluster it did not start) and runs every
scheduler in turn against them, alternating over the repeats, each on its own namespace and
schedulerName. A run creates the workload's initial pods and waits for them, then creates the
measured pods as fast as the plane accepts them while a watch records when each pod's
`spec.nodeName` is set.

Reported per scheduler (median over the repeats): throughput (average, and p50/p90/p99 of the
1 s samples with the first skipped, as scheduler_perf does), pod latency (creation -> bound
seen), the scheduler process's CPU seconds and peak RSS, and API requests per measured pod
(`rest_client_requests_total`, scraped from the process before and after the measured pods).
kube-scheduler runs as the same admin identity as ascheduler, with qps/burst 5000/5000; the
ceiling is `benchmarks.ceiling`, a binder without any scheduling logic. Ratios are taken run by
run (repeat i of ascheduler against repeat i of the other) and reported as median, min, max.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane, ensure_built, versions
from ascheduler.devcluster.nodes import create_fake_nodes, delete_fake_nodes, wait_nodes_ready
from ascheduler.devcluster.plane import free_port, kube_scheduler_config
from ascheduler.devcluster.processes import ProcessRecord, is_alive, spawn, stop
from ascheduler.kube import KubeClient
from benchmarks import report
from benchmarks.common import ascheduler_argv, bench_plane, cpu_seconds, rss_bytes
from benchmarks.workloads import WORKLOADS, Workload

SCHEDULERS = ("ascheduler", "kube-scheduler", "ceiling")
RESULTS = Path(__file__).parent / "results"
BENCH_LABEL = "ascheduler.io/benchmark"
RUN_TIMEOUT = 900.0


class Target:
    """Where the schedulers run: a local plane's process table, or plain processes beside a
    cluster named by a kubeconfig. Either way every process is stopped by pid."""

    def __init__(self, kubeconfig: str, workdir: Path, plane: ControlPlane | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.plane = plane
        self.records: list[ProcessRecord] = []

    def start(self, name: str, argv: Sequence[str]) -> ProcessRecord:
        if self.plane is not None:
            return self.plane.start_process(name, argv)
        record = spawn(name, argv, log=self.workdir / f"{name}.log", die_with_parent=True)
        self.records.append(record)
        return record

    def stop(self, record: ProcessRecord) -> None:
        if self.plane is not None:
            self.plane.stop_process(record)
        else:
            stop(record)
            self.records = [r for r in self.records if r.pid != record.pid]

    def close(self) -> None:
        for record in self.records:
            stop(record)
        self.records = []


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_scheduler(
    target: Target, workload: Workload, which: str, name: str, port: int
) -> ProcessRecord:
    if which == "kube-scheduler":
        config = target.workdir / f"kube-scheduler-{name}.json"
        config.write_text(
            json.dumps(kube_scheduler_config(target.kubeconfig, name, qps=5000, burst=5000))
        )
        argv = [
            str(ensure_built().kube_scheduler),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--v=1",
        ]
        return target.start(f"kube-scheduler-{name}", argv)
    if which == "ceiling":
        argv = [
            sys.executable,
            "-m",
            "benchmarks.ceiling",
            "--kubeconfig",
            target.kubeconfig,
            "--scheduler-name",
            name,
            "--node-selector",
            f"{BENCH_LABEL}",
            "--metrics-port",
            str(port),
        ]
        return target.start(f"ceiling-{name}", argv)
    argv = ascheduler_argv(
        target.kubeconfig, "--scheduler-name", name, *workload.ascheduler_args, http_port=port
    )
    return target.start(f"ascheduler-{name}", argv)


async def requests_total(session: aiohttp.ClientSession, which: str, port: int) -> dict[str, float]:
    """The process's `rest_client_requests_total` by "METHOD CODE"."""
    scheme = "https" if which == "kube-scheduler" else "http"
    async with session.get(f"{scheme}://127.0.0.1:{port}/metrics", ssl=False) as resp:
        resp.raise_for_status()
        text = await resp.text()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "rest_client_requests":
            continue
        for sample in family.samples:
            if sample.name == "rest_client_requests_total":
                key = f"{sample.labels.get('method', '')} {sample.labels.get('code', '')}"
                out[key] = out.get(key, 0.0) + sample.value
    return out


async def settled_requests(
    session: aiohttp.ClientSession, which: str, port: int
) -> dict[str, float]:
    """`requests_total` once it has stopped moving for a second (events and status writes
    may trail the binds), or after 120 s."""
    previous = await requests_total(session, which, port)
    for _ in range(120):
        await asyncio.sleep(1.0)
        now = await requests_total(session, which, port)
        if now == previous:
            return now
        previous = now
    return previous


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


async def one_run(
    target: Target, workload: Workload, which: str, run_id: str, index: int, progress: bool
) -> dict[str, Any]:
    name = f"{which}-{run_id}-{index}"
    namespace = f"bench-{name}"
    port = free_port()
    async with (
        await KubeClient.connect(target.kubeconfig, pool_size=72, user_agent="bench") as kube,
        aiohttp.ClientSession() as scrape,
    ):
        await kube.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
        record = start_scheduler(target, workload, which, name, port)
        try:
            return await _measure(
                kube, scrape, workload, which, record, port, namespace, index, progress
            )
        finally:
            target.stop(record)
            # So the next run starts on empty nodes and an idle plane.
            await kube.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods",
                params={"gracePeriodSeconds": "0"},
                timeout=600,
            )
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")


async def _measure(
    kube: KubeClient,
    scrape: aiohttp.ClientSession,
    workload: Workload,
    which: str,
    record: ProcessRecord,
    port: int,
    namespace: str,
    index: int,
    progress: bool,
) -> dict[str, Any]:
    scheduler_name = namespace.removeprefix("bench-")
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    initial = [workload.pod(f"init-{i}", scheduler_name, i) for i in range(workload.initial_pods)]
    measured = [
        workload.pod(f"m-{i}", scheduler_name, workload.initial_pods + i)
        for i in range(workload.measured_pods)
    ]
    total = len(initial) + len(measured)
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_bound(kube, namespace, bound, total, done))
    try:
        await create_all(kube, namespace, initial, created)
        deadline = time.monotonic() + RUN_TIMEOUT
        while sum(1 for n in bound if n.startswith("init-")) < len(initial):
            if watcher.done():
                watcher.result()  # raises what stopped it
            if not is_alive(record):
                raise RuntimeError(f"{which} exited; see {record.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{which}: initial pods not bound after {RUN_TIMEOUT:.0f} s")
            await asyncio.sleep(0.1)
        # The initial pods' events may still be queued: let them go out before counting.
        requests0 = await settled_requests(scrape, which, port)
        cpu0 = cpu_seconds(record.pid)
        peak = rss_bytes(record.pid)
        start = time.monotonic()

        async def create_measured() -> float:
            await create_all(kube, namespace, measured, created)
            return time.monotonic()

        creating = asyncio.create_task(create_measured())
        samples: list[int] = []
        last = 0
        while not done.is_set():
            await asyncio.sleep(1.0)
            if watcher.done() and not done.is_set():
                watcher.result()
            if creating.done() and creating.exception():
                creating.result()
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
            if time.monotonic() - start > RUN_TIMEOUT:
                raise TimeoutError(
                    f"{which}: {now_bound}/{len(measured)} bound after {RUN_TIMEOUT:.0f} s"
                )
        created_at = await creating
        cpu = cpu_seconds(record.pid) - cpu0
        requests1 = await settled_requests(scrape, which, port)
        requests = {k: v - requests0.get(k, 0.0) for k, v in requests1.items()}
        requests = {k: v for k, v in sorted(requests.items()) if v}
    finally:
        watcher.cancel()
        if progress:
            print(file=sys.stderr)
    end = max(bound[n] for n in bound if n.startswith("m-"))
    latencies = [bound[n] - created[n] for n in bound if n.startswith("m-") and n in created]
    measured_samples = samples[1:] or samples
    return {
        "scheduler": which,
        "pods": len(measured),
        "throughput_avg": len(measured) / max(end - start, 1e-3),
        "throughput_p50": percentile(measured_samples, 0.5),
        "throughput_p90": percentile(measured_samples, 0.9),
        "throughput_p99": percentile(measured_samples, 0.99),
        "latency_p50": percentile(latencies, 0.5),
        "latency_p90": percentile(latencies, 0.9),
        "latency_p99": percentile(latencies, 0.99),
        "cpu_seconds": cpu,
        "peak_rss_bytes": peak,
        "requests_per_pod": sum(requests.values()) / len(measured),
        "requests": requests,
        # How fast the harness created the measured pods: a scheduler cannot bind faster.
        "created_per_s": len(measured) / max(created_at - start, 1e-3),
        "samples": samples,
    }


async def create_nodes(kubeconfig: str, workload: Workload, run_id: str) -> list[str]:
    async with await KubeClient.connect(kubeconfig, user_agent="bench") as kube:
        names: list[str] = []
        for group in workload.nodes(f"bench-{run_id}"):
            labelled = dataclasses.replace(group, labels={**group.labels, BENCH_LABEL: run_id})
            names += await create_fake_nodes(kube, labelled, concurrency=64)
        await wait_nodes_ready(kube, names, timeout=600)
        return names


async def delete_nodes(kubeconfig: str, names: list[str]) -> None:
    async with await KubeClient.connect(kubeconfig, user_agent="bench") as kube:
        await delete_fake_nodes(kube, names, concurrency=64)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in runs[0] if k not in ("scheduler", "samples", "requests")]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


# metric -> how tables name it
RATIOS = {
    "throughput_avg": "throughput",
    "latency_p99": "latency p99",
    "peak_rss_bytes": "peak RSS",
    "requests_per_pod": "API requests per pod",
}


def ratios(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """ascheduler / other, run by run, for each metric in RATIOS: median, min and max."""
    out: dict[str, dict[str, float]] = {}
    if "ascheduler" not in runs:
        return out
    for other in ("kube-scheduler", "ceiling"):
        if other not in runs:
            continue
        for key in RATIOS if other == "kube-scheduler" else ("throughput_avg",):
            per_run = [
                a[key] / b[key]
                for a, b in zip(runs["ascheduler"], runs[other], strict=True)
                if b[key]
            ]
            if per_run:
                out[f"{key} ascheduler/{other}"] = {
                    "median": statistics.median(per_run),
                    "min": min(per_run),
                    "max": max(per_run),
                }
    return out


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
    parser.add_argument("--kubeconfig", help="use this cluster instead of a local plane")
    parser.add_argument(
        "--no-readme", action="store_true", help="do not regenerate README.md's table"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    which = SCHEDULERS if args.scheduler == "all" else (args.scheduler,)
    run_id = uuid.uuid4().hex[:6]

    runs: dict[str, list[dict[str, Any]]] = {w: [] for w in which}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ascheduler-bench-")))
        if args.kubeconfig:
            target = Target(args.kubeconfig, workdir)
            stack.callback(target.close)
        else:
            plane = stack.enter_context(bench_plane("bench"))
            target = Target(str(plane.require_state().admin_kubeconfig), workdir, plane)
        if not args.quiet:
            print(f"creating {workload.node_count()} nodes", file=sys.stderr)
        if args.kubeconfig:  # registered first: a creation that fails half-way is undone too
            names = [n for g in workload.nodes(f"bench-{run_id}") for n in g.names()]
            stack.callback(lambda: asyncio.run(delete_nodes(target.kubeconfig, names)))
        asyncio.run(create_nodes(target.kubeconfig, workload, run_id))
        for i in range(args.repeat):
            for w in which:  # alternate, so drift in the machine hits every scheduler
                runs[w].append(asyncio.run(one_run(target, workload, w, run_id, i, not args.quiet)))

    result = {
        "workload": workload.name,
        "run_id": run_id,
        "description": workload.description,
        "nodes": workload.node_count(),
        "initial_pods": workload.initial_pods,
        "measured_pods": workload.measured_pods,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "repeat": args.repeat,
        "plane": "kubeconfig" if args.kubeconfig else "local (benchmark mode)",
        "summary": {w: summarise(r) for w, r in runs.items()},
        "ratios": ratios(runs),
        "runs": runs,
        "versions": {
            "kubernetes": versions.KUBERNETES_VERSION,
            "etcd": versions.ETCD_VERSION,
            "kwok": versions.KWOK_VERSION,
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    paths = report.write(result, args.out)
    print(paths["md"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    if not args.no_readme and args.out.resolve() == RESULTS.resolve():
        report.update_readme(RESULTS)
    return 0
