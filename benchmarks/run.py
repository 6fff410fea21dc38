"""scheduler_perf-style runs: ascheduler, kube-scheduler and the ceilings on one plane.

    python -m benchmarks run --workload SchedulingBasic_500Nodes_1000Pods \\
        [--mode steady|backlog|both] [--scheduler NAME|all] [--repeat N] [--out DIR] \\
        [--kubeconfig FILE] [--plane-cpus LIST]

Without `--kubeconfig` it starts a local plane in benchmark mode (no API priority-and-fairness
or inflight limits); with it, it uses that cluster, whose kwok must keep nodes annotated
`kwok.x-k8s.io/node=fake` Ready. Either way it creates the workload's fake nodes (labelled
`ascheduler.io/benchmark=<run>`, deleted at the end on a cluster it did not start) and runs every
scheduler in turn against them, alternating over the repeats and modes, each on its own
namespace and schedulerName. A run creates the workload's initial pods and waits until the
scheduler has bound them; then, by mode:

- **steady**: the measured pods are created as fast as the plane accepts them while the
  scheduler runs. On a small machine creating pods competes with binding them and can set the
  pace, so "pods created/s" is reported beside the throughput.
- **backlog**: the scheduler is stopped, the measured pods are created, and a fresh scheduler
  process starts on the backlog (the restart-with-a-backlog case: an upgrade, a 10,000-pod
  Job). Reported: the time from its start to the first and the last bind, and the throughput
  between them; its CPU, RSS and requests count from its start.

A watch records when each pod's `spec.nodeName` is set. Reported per scheduler (median over
the repeats): throughput (average, and p50/p90/p99 of the 1 s samples: in steady mode with the
first skipped, as scheduler_perf does; in backlog mode the full seconds from the first bind),
pod latency (steady: creation -> bound seen), the scheduler process's CPU seconds and peak RSS,
and API requests per measured pod (`rest_client_requests_total`, scraped from the process).
kube-scheduler runs as the same admin identity as ascheduler, with qps/burst 5000/5000. The
ceilings are binders without any scheduling logic (`benchmarks.ceiling`): `ceiling-go` on
client-go, `ceiling-python` on ascheduler's client; on a DRA workload they first write each
pod's claims as kube-scheduler does (`ceiling_kind: dra`); the faster of the two, run by run, is
"the ceiling", and the result says which one the plane hits. Ratios are taken run by run
(repeat i of ascheduler against repeat i of the other) and reported as median, min, max.

With `--plane-cpus LIST` (a local plane only) the plane's processes run on the CPUs listed and
the harness, the schedulers and the ceilings on the others (`benchmarks.cpus`): the ceiling
then measures the plane on its own CPUs, not the plane less what a scheduler's own work takes
from it. Such a run is written as `<date>-<workload>-<mode>-split` and tabled apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane, ensure_built, versions
from ascheduler.devcluster.plane import free_port, kube_scheduler_config
from ascheduler.devcluster.processes import ProcessRecord, is_alive, spawn, stop
from ascheduler.kube import KubeClient
from benchmarks import cpuprofile, cpus, report, steadystate
from benchmarks.ceiling import go_binary
from benchmarks.common import (
    OPEN_METRICS,
    RESULTS,
    ascheduler_argv,
    bench_plane,
    context,
    cpu_seconds,
    rss_bytes,
)
from benchmarks.cputrace import CpuTrace
from benchmarks.objects import (
    churn,
    collect_apiserver_garbage,
    create_all,
    create_device_claims,
    create_gangs,
    create_nodes,
    create_storage,
    delete_device_claims,
    delete_gangs,
    delete_nodes,
    delete_storage,
    gang_latencies,
    watch_bound,
)
from benchmarks.summary import (
    BINDREQUEST,
    CEILINGS,
    GROUPED,
    HAMI,
    LOCKED,
    NO_LOCKS,
    ceiling_verdict,
    per_second,
    percentile,
    ratios,
    request_counts,
    summarise,
    throughput,
)
from benchmarks.workloads import (
    BENCH_LABEL,
    REPLACE,
    WORKLOADS,
    Workload,
)

DRA = "/apis/resource.k8s.io/v1"

GROUPS = 32
VARIANT_ARGS: dict[str, tuple[str, ...]] = {
    NO_LOCKS: ("--node-lock-policy", "none"),
    HAMI: ("--node-lock-key", "hami.io/mutex.lock"),
    LOCKED: ("--node-lock-when-alone", "lock", "--node-lock-lease-groups", "0"),
    GROUPED: ("--node-lock-when-alone", "lock", "--node-lock-lease-groups", str(GROUPS)),
}
#: What `--scheduler all` (the default) runs.
ALL = ("ascheduler", "kube-scheduler", "ceiling-go", "ceiling-python")
SCHEDULERS = (*ALL, BINDREQUEST, NO_LOCKS, LOCKED, GROUPED, HAMI)
#: Where under results/profiles/ py-spy's raw stacks are kept (`flamegraph.pl` reads them);
#: not committed.
STACKS = "stacks"
#: The schedulers written in Python, whose CPU `--profile` samples.
PROFILED = frozenset((*SCHEDULERS, "ceiling-python")) - {"kube-scheduler", "ceiling-go"}
MODES = ("steady", "backlog")
RUN_TIMEOUT = 900.0


class Target:
    """Where the schedulers run: a local plane's process table, or plain processes beside a
    cluster named by a kubeconfig. Either way every process is stopped by pid."""

    def __init__(
        self,
        kubeconfig: str,
        workdir: Path,
        plane: ControlPlane | None = None,
        split: cpus.Split | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.plane = plane
        #: The plane's CPUs and the schedulers', when kept apart (`--plane-cpus`).
        self.split = split
        self.records: list[ProcessRecord] = []
        #: Where `--profile` keeps py-spy's raw stacks (the run's temporary folder if unset).
        self.stacks: Path | None = None

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
            OPEN_METRICS,
            "--v=1",
            *([f"--feature-gates={workload.feature_gates}"] if workload.feature_gates else []),
        ]
        return target.start(f"kube-scheduler-{name}", argv)
    if which in CEILINGS:
        head = (
            [str(go_binary())]
            if which == "ceiling-go"
            else [sys.executable, "-m", "benchmarks.ceiling"]
        )
        argv = [
            *head,
            "--kubeconfig",
            target.kubeconfig,
            "--scheduler-name",
            name,
            "--node-selector",
            BENCH_LABEL,
            "--metrics-port",
            str(port),
        ]
        return target.start(f"{which}-{name}", argv)
    gates = ("--feature-gates", workload.feature_gates) if workload.feature_gates else ()
    mode = ("--binding", "bindrequest") if which == BINDREQUEST else ()
    argv = ascheduler_argv(
        target.kubeconfig,
        "--scheduler-name",
        name,
        *gates,
        *mode,
        *workload.ascheduler_args,
        *VARIANT_ARGS.get(which, ()),
        port=port,
    )
    return target.start(f"ascheduler-{name}", argv)


def start_binder(target: Target, workload: Workload, name: str, port: int) -> ProcessRecord:
    """`ascheduler binder` for a bindrequest run, with the run's lock settings."""
    argv = ascheduler_argv(
        target.kubeconfig, *workload.ascheduler_args, port=port, command="binder"
    )
    return target.start(f"ascheduler-binder-{name}", argv)


async def requests_total(session: aiohttp.ClientSession, which: str, port: int) -> dict[str, float]:
    """The process's `rest_client_requests_total` by "METHOD CODE"."""
    scheme = "http" if which in CEILINGS else "https"
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


#: The plane's processes whose CPU a run traces beside the scheduler's.
PLANE_TRACED = ("kube-apiserver", "etcd", "kube-controller-manager")


class Run:
    """One scheduler, one mode, one repeat: its namespace, its process, what the watch saw."""

    def __init__(
        self,
        target: Target,
        kube: KubeClient,
        scrape: aiohttp.ClientSession,
        workload: Workload,
        which: str,
        namespace: str,
        progress: bool,
        timeout: float = RUN_TIMEOUT,
        profile: bool = False,
    ) -> None:
        self.target = target
        #: Sample where the scheduler's CPU goes (`benchmarks.cpuprofile`), if it is Python.
        self.profile = profile and which in PROFILED
        #: How long the measured pods may take before the run is reported unfinished.
        self.timeout = timeout
        self.kube = kube
        self.scrape = scrape
        self.workload = workload
        self.which = which
        self.namespace = namespace
        self.name = namespace.removeprefix("bench-")
        self.progress = progress
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.initial = [
            workload.pod(f"init-{i}", self.name, i) for i in range(workload.initial_pods)
        ]
        self.measured = [
            workload.pod(f"m-{i}", self.name, workload.initial_pods + i)
            for i in range(workload.measured_pods)
        ]
        self.done = asyncio.Event()
        self.watcher: asyncio.Task[None] | None = None
        self.record: ProcessRecord | None = None
        self.port = 0
        #: `ascheduler binder` beside a bindrequest run's scheduler (counted with it).
        self.binder: ProcessRecord | None = None
        self.binder_port = 0
        #: The CPUs the scheduler's process was found to run on, in a split run.
        self.cpus: list[int] = []

    def start(self) -> float:
        """A fresh scheduler process on a fresh metrics port (and a fresh binder for a
        bindrequest run); when it was started."""
        self.port = free_port()
        self.record = start_scheduler(self.target, self.workload, self.which, self.name, self.port)
        if self.target.split is not None:
            self.cpus = sorted(os.sched_getaffinity(self.record.pid))
        if self.which == BINDREQUEST:
            self.binder_port = free_port()
            self.binder = start_binder(self.target, self.workload, self.name, self.binder_port)
        return time.monotonic()

    def stop(self) -> None:
        for record in (self.record, self.binder):
            if record is not None:
                self.target.stop(record)
        self.record = self.binder = None

    def check(self) -> ProcessRecord:
        """The scheduler's process, after checking it (and its binder) and the watch are
        still going."""
        if self.watcher is not None and self.watcher.done() and not self.done.is_set():
            self.watcher.result()  # raises what stopped it
        for record in (self.record, self.binder if self.which == BINDREQUEST else self.record):
            if record is None or not is_alive(record):
                log = record.log if record else "its log"
                raise RuntimeError(f"{self.which} exited; see {log}")
        assert self.record is not None
        return self.record

    def trace(self) -> CpuTrace:
        """A started trace of the CPU of the scheduler (with its binder) and, on a plane
        this run started, of kube-apiserver and etcd."""

        def pids() -> dict[str, int]:
            named = {} if self.record is None else {"scheduler": self.record.pid}
            if self.binder is not None:
                named["binder"] = self.binder.pid
            plane = self.target.plane
            if plane is not None and plane.state is not None:
                named |= {p.name: p.pid for p in plane.state.processes if p.name in PLANE_TRACED}
            return named

        split = self.target.split
        groups = {} if split is None else {"plane": split.plane, "schedulers": split.schedulers}
        trace = CpuTrace(pids, groups=groups)
        trace.start()
        return trace

    def window(self, trace: CpuTrace) -> dict[str, float]:
        """From the first to the last bind of the measured pods: how busy the machine was,
        and each traced process's CPU per pod bound (`window_us_per_pod_<process>`)."""
        times = sorted(self.bound[n] for n in self.bound if n.startswith("m-"))
        if len(times) < 2:
            return {}
        window = trace.window(times[0], times[-1], len(times))
        if window is None:
            return {}
        figures = {"window_machine_busy": window["machine_busy"]}
        for group, share in window.get("busy", {}).items():
            figures[f"window_busy_{group}"] = share
        for name, p in window["processes"].items():
            figures[f"window_us_per_pod_{name}"] = p["us_per_pod"]
        return figures

    async def profiler(self) -> cpuprofile.Profiler | None:
        """py-spy attached to the scheduler's process, when this run profiles it."""
        if not self.profile or self.record is None:
            return None
        folder = self.target.stacks or self.target.workdir
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / f"{self.name}-{self.record.pid}.txt"
        profiler = cpuprofile.Profiler(self.record.pid, out)
        await asyncio.to_thread(profiler.start)
        return profiler

    @staticmethod
    async def profiled(profiler: cpuprofile.Profiler | None) -> dict[str, Any]:
        if profiler is None:
            return {}
        return {"profile": await asyncio.to_thread(profiler.stop)}

    def _processes(self) -> list[ProcessRecord]:
        return [r for r in (self.record, self.binder) if r is not None]

    def cpu(self) -> float:
        return sum(cpu_seconds(r.pid) for r in self._processes())

    def rss(self) -> int:
        return sum(rss_bytes(r.pid) for r in self._processes())

    async def requests(self, settled: bool = True) -> dict[str, float]:
        """The request counts of the scheduler and its binder, added up: once they have
        settled, or (`settled=False`) as they are."""
        read = settled_requests if settled else requests_total
        total = await read(self.scrape, self.which, self.port)
        if self.binder is not None:
            theirs = await read(self.scrape, self.which, self.binder_port)
            for key, value in theirs.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def start_churn(self) -> asyncio.Task[None] | None:
        if self.workload.churn is None:
            return None
        return asyncio.create_task(churn(self.kube, self.namespace, self.workload, self.name))

    def bound_measured(self) -> int:
        return sum(1 for n in self.bound if n.startswith("m-"))

    def show(self, index: int, mode: str, rate: int) -> None:
        if self.progress:
            print(
                f"\r  {self.which} {mode} run {index}: {self.bound_measured()}/"
                f"{len(self.measured)} bound, {rate} pods/s   ",
                end="",
                file=sys.stderr,
                flush=True,
            )

    async def bind_initial(self) -> None:
        """Start the scheduler and the watch; create the initial pods and wait until bound.
        A workload with claims gets every pod's claim and volume first, measured ones too."""
        total = len(self.initial) + len(self.measured)
        if self.workload.claims:
            pods = self.initial + self.measured
            await create_storage(self.kube, self.namespace, [p["metadata"]["name"] for p in pods])
        if self.workload.devices_per_node:
            pods = self.initial + self.measured
            names = [p["metadata"]["name"] for p in pods]
            await create_device_claims(self.kube, self.namespace, names)
        if self.workload.gang_size:
            await create_gangs(self.kube, self.namespace, self.workload)
        self.watcher = asyncio.create_task(
            watch_bound(self.kube, self.namespace, self.bound, total, self.done)
        )
        self.start()
        await create_all(self.kube, self.namespace, self.initial, self.created)
        deadline = time.monotonic() + RUN_TIMEOUT
        while sum(1 for n in self.bound if n.startswith("init-")) < len(self.initial):
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.which}: initial pods not bound after {RUN_TIMEOUT:.0f} s"
                )
            await asyncio.sleep(0.1)

    async def steady(self, index: int) -> dict[str, Any]:
        self.check()
        # The initial pods' events may still be queued: let them go out before counting.
        requests0 = await self.requests()
        cpu0 = self.cpu()
        peak = self.rss()
        await collect_apiserver_garbage(self.kube)
        profiler = await self.profiler()
        trace = self.trace()
        start = time.monotonic()

        async def create_measured() -> float:
            await create_all(self.kube, self.namespace, self.measured, self.created)
            return time.monotonic()

        creating = asyncio.create_task(create_measured())
        churning = self.start_churn()
        samples: list[int] = []
        last = 0
        finished = True
        try:
            while not self.done.is_set():
                await asyncio.sleep(1.0)
                if creating.done() and creating.exception():
                    creating.result()
                self.check()
                now_bound = self.bound_measured()
                samples.append(now_bound - last)
                last = now_bound
                peak = max(peak, self.rss())
                self.show(index, "steady", samples[-1])
                if time.monotonic() - start > self.timeout and not self.done.is_set():
                    finished = False  # reported as it stands: how many were bound by now
                    break
            if finished or (creating.done() and not creating.exception()):
                created_at = await creating
            else:  # still creating when the run stopped
                created_at = time.monotonic()
        finally:
            creating.cancel()
            if churning is not None:
                churning.cancel()
            await trace.stop()
            profiled = await self.profiled(profiler)
        # Settled first: what the scheduler still writes for these pods (events it held
        # back while binding) is part of their cost.
        requests1 = await self.requests()
        cpu = self.cpu() - cpu0
        requests = {k: v - requests0.get(k, 0.0) for k, v in requests1.items()}
        measured_samples = samples[1:] or samples
        bound = self.bound_measured()
        # Latencies only of a finished run: an unfinished one's pods that were not bound
        # would be left out, and the figures flattered.
        paced: dict[str, float] = {}
        if finished:
            end = max(self.bound[n] for n in self.bound if n.startswith("m-"))
            latencies = [
                self.bound[n] - self.created[n]
                for n in self.bound
                if n.startswith("m-") and n in self.created
            ]
            paced = {
                "latency_p50": percentile(latencies, 0.5),
                "latency_p90": percentile(latencies, 0.9),
                "latency_p99": percentile(latencies, 0.99),
            }
            if self.workload.gang_size:
                spans = gang_latencies(self.workload, self.created, self.bound)
                paced |= {
                    "gang_latency_p50": percentile(spans, 0.5),
                    "gang_latency_p99": percentile(spans, 0.99),
                    "gang_latency_max": max(spans),
                }
        else:
            end = time.monotonic()
        return {
            "scheduler": self.which,
            "mode": "steady",
            "pods": len(self.measured),
            "bound": bound,
            "finished": finished,
            **throughput(bound, end - start, measured_samples),
            **paced,
            "cpu_seconds": cpu,
            "peak_rss_bytes": peak,
            **request_counts(requests, len(self.measured)),
            # How fast the harness created the measured pods: a scheduler cannot bind faster.
            "created_per_s": len(self.measured) / max(created_at - start, 1e-3),
            **self.window(trace),
            **({"cpus": self.cpus} if self.cpus else {}),
            **profiled,
            "samples": samples,
        }

    async def backlog(self, index: int) -> dict[str, Any]:
        self.stop()
        began = time.monotonic()
        await create_all(self.kube, self.namespace, self.measured, self.created)
        created_per_s = len(self.measured) / max(time.monotonic() - began, 1e-3)
        if early := self.bound_measured():
            raise RuntimeError(f"{self.which}: {early} pods bound while no scheduler ran")
        await collect_apiserver_garbage(self.kube)
        started = self.start()
        profiler = await self.profiler()
        trace = self.trace()
        churning = self.start_churn()
        self.check()
        peak = self.rss()
        last = 0
        finished = True
        try:
            while not self.done.is_set():
                await asyncio.sleep(1.0)
                self.check()
                peak = max(peak, self.rss())
                now_bound = self.bound_measured()
                self.show(index, "backlog", now_bound - last)
                last = now_bound
                if time.monotonic() - started > self.timeout and not self.done.is_set():
                    finished = False
                    break
        finally:
            if churning is not None:
                churning.cancel()
            await trace.stop()
            profiled = await self.profiled(profiler)
        stopped = time.monotonic()
        requests = await self.requests()
        cpu = self.cpu()  # all of it: the start, the lists, the binds, the events
        times = sorted(self.bound[n] for n in self.bound if n.startswith("m-"))
        paced: dict[str, float] = {}
        if times:
            paced["first_bind_s"] = times[0] - started
        if finished:
            first, end = times[0], times[-1]
            paced["last_bind_s"] = end - started
        else:  # from the start: the time the pods had
            first, end = started, stopped
        samples = per_second(times, first) if times else []
        return {
            "scheduler": self.which,
            "mode": "backlog",
            "pods": len(self.measured),
            "bound": len(times),
            "finished": finished,
            **throughput(len(times), end - first, samples[:-1] or samples),
            **paced,
            "cpu_seconds": cpu,
            "peak_rss_bytes": peak,
            **request_counts(requests, len(self.measured)),
            "created_per_s": created_per_s,
            **self.window(trace),
            **({"cpus": self.cpus} if self.cpus else {}),
            **profiled,
            "samples": samples,
        }


async def one_run(
    target: Target,
    workload: Workload,
    which: str,
    mode: str,
    run_id: str,
    index: int,
    progress: bool,
    timeout: float = RUN_TIMEOUT,
    profile: bool = False,
) -> dict[str, Any]:
    namespace = f"bench-{which}-{mode[0]}-{run_id}-{index}"
    async with (
        await KubeClient.connect(target.kubeconfig, pool_size=72, user_agent="bench") as kube,
        aiohttp.ClientSession() as scrape,
    ):
        await kube.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
        run = Run(target, kube, scrape, workload, which, namespace, progress, timeout, profile)
        try:
            if mode == REPLACE:
                return await steadystate.measure(run, index)
            await run.bind_initial()
            if mode == "steady":
                return await run.steady(index)
            return await run.backlog(index)
        finally:
            if run.watcher is not None:
                run.watcher.cancel()
            if progress:
                print(file=sys.stderr)
            run.stop()
            # So the next run starts on empty nodes and an idle plane.
            await kube.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods",
                params={"gracePeriodSeconds": "0"},
                timeout=600,
            )
            if workload.claims:
                await delete_storage(kube, namespace)
            if workload.devices_per_node:
                await delete_device_claims(kube, namespace)
            if workload.gang_size:
                await delete_gangs(kube, namespace, workload)
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")


def keep_apart(plane: ControlPlane, split: cpus.Split) -> dict[str, list[int]]:
    """The plane's processes, every thread, on the plane's CPUs; this process on the others,
    so every process it starts from now on (schedulers, ceilings, binders) is there too.
    Returns where each of the plane's processes was found to run afterwards."""
    placed: dict[str, list[int]] = {}
    for record in plane.require_state().processes:
        if is_alive(record):
            cpus.pin(record.pid, split.plane)
            placed[record.name] = sorted(os.sched_getaffinity(record.pid))
    cpus.pin(os.getpid(), split.schedulers)
    return placed


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    parser.add_argument(
        "--mode",
        default="both",
        choices=[*MODES, REPLACE, "both"],
        help="both: the workload's modes (steady and backlog; replace for a steady-state one)",
    )
    parser.add_argument(
        "--scheduler",
        action="append",
        choices=[*SCHEDULERS, "all"],
        help="run this one (repeatable; default: all, which is every one but "
        "ascheduler-bindrequest, ascheduler-nolocks, ascheduler-locked, "
        "ascheduler-locked-groups and ascheduler-hami)",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--kubeconfig", help="use this cluster instead of a local plane")
    parser.add_argument(
        "--no-readme", action="store_true", help="do not regenerate benchmarks/README.md's tables"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--plane-cpus",
        metavar="LIST",
        help="run the local plane on these CPUs (e.g. 0 or 0-1) and the harness, schedulers "
        "and ceilings on the others",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample where each Python scheduler's CPU goes with py-spy (ascheduler and "
        "ceiling-python); the results go to results/profiles/, apart from the tables",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=RUN_TIMEOUT,
        help="seconds the measured pods may take; a run still going then is reported "
        "unfinished, with the pods bound by then (default %(default)s)",
    )
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    split: cpus.Split | None = None
    if args.plane_cpus is not None:
        if args.kubeconfig:
            parser.error("--plane-cpus needs the local plane, not --kubeconfig")
        try:
            split = cpus.Split.of(args.plane_cpus)
        except ValueError as exc:
            parser.error(str(exc))
    chosen = args.scheduler or ["all"]
    which = ALL if "all" in chosen else tuple(dict.fromkeys(chosen))
    modes = workload.modes() if args.mode == "both" else (args.mode,)
    if (args.mode == REPLACE) != (workload.steady_state is not None) and args.mode != "both":
        parser.error(f"{workload.name} runs in mode {' and '.join(workload.modes())}")
    run_id = uuid.uuid4().hex[:6]
    if any(w == "ceiling-go" for w in which):
        go_binary(None if args.quiet else lambda m: print(m, file=sys.stderr))

    runs: dict[str, dict[str, list[dict[str, Any]]]] = {m: {w: [] for w in which} for m in modes}
    placed: dict[str, list[int]] = {}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ascheduler-bench-")))
        if args.kubeconfig:
            target = Target(args.kubeconfig, workdir)
            stack.callback(target.close)
        else:
            release = versions.release()
            if workload.releases and release.minor not in workload.releases:
                raise SystemExit(
                    f"{workload.name} runs on a plane of {', '.join(workload.releases)} only "
                    f"(this plane would be {release.minor}): set ASCHEDULER_KUBE_VERSION"
                )
            plane = stack.enter_context(
                bench_plane(
                    "bench",
                    feature_gates=workload.feature_gates,
                    controllers=workload.controllers(),
                )
            )
            if split is not None:
                placed = keep_apart(plane, split)
            target = Target(str(plane.require_state().admin_kubeconfig), workdir, plane, split)
        if args.profile:
            target.stacks = args.out / report.PROFILES / STACKS
        if not args.quiet:
            print(f"creating {workload.node_count()} nodes", file=sys.stderr)
        if args.kubeconfig:  # registered first: a creation that fails half-way is undone too
            names = [n for g in workload.nodes(f"bench-{run_id}") for n in g.names()]
            stack.callback(lambda: asyncio.run(delete_nodes(target.kubeconfig, names, workload)))
        asyncio.run(create_nodes(target.kubeconfig, workload, run_id))
        where = context()
        for i in range(args.repeat):
            for mode in modes:
                for w in which:  # alternate, so drift in the machine hits every scheduler
                    runs[mode][w].append(
                        asyncio.run(
                            one_run(
                                target,
                                workload,
                                w,
                                mode,
                                run_id,
                                i,
                                not args.quiet,
                                args.timeout,
                                args.profile,
                            )
                        )
                    )
            _write(args, workload, runs, run_id, split, placed, where, i + 1)

    if not args.no_readme and args.out.resolve() == RESULTS.resolve():
        report.update_readme(RESULTS)
    return 0


def _write(
    args: argparse.Namespace,
    workload: Workload,
    runs: dict[str, dict[str, list[dict[str, Any]]]],
    run_id: str,
    split: cpus.Split | None,
    placed: dict[str, list[int]],
    where: dict[str, Any],
    done: int,
) -> None:
    """The results of the first `done` repeats, one set of files per mode. Written again after
    every repeat, so a run cut short (a failure, Ctrl-C) keeps what it measured; such a file
    says how many repeats were planned (`repeats_planned`)."""
    for mode, by_scheduler in runs.items():
        summary = {w: summarise(r) for w, r in by_scheduler.items()}
        result = {
            "workload": workload.name,
            "mode": mode,
            "run_id": run_id,
            "description": workload.description,
            "nodes": workload.node_count(),
            "initial_pods": workload.initial_pods,
            "measured_pods": workload.measured_pods,
            "date": where["date"],
            "repeat": done,
            **({} if done == args.repeat else {"repeats_planned": args.repeat}),
            "timeout_s": args.timeout,
            "plane": "kubeconfig"
            if args.kubeconfig
            else "local (benchmark mode)"
            if split is None
            else f"local (benchmark mode; {split.describe()})",
            **({} if split is None else {"cpus": split.to_json() | {"placed": placed}}),
            "summary": summary,
            "ratios": ratios(by_scheduler, mode),
            "ceiling_limit": ceiling_verdict(summary),
            # The ceilings write a pod's claims before its Binding, so on a DRA workload
            # they do what a scheduler must (`ceiling_dra`).
            "ceiling_kind": report.CEILING_DRA
            if workload.devices_per_node
            else report.CEILING_BINDING,
            **({"profiled": True} if args.profile else {}),
            "runs": by_scheduler,
            "versions": where["versions"],
            "machine": where["machine"],
        }
        paths = report.write(result, args.out / report.PROFILES if args.profile else args.out)
        if done == args.repeat:
            print(paths["md"].read_text())
        print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
