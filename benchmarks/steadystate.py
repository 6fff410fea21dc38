"""scheduler_perf's DRA steady state: mode `replace` of `benchmarks run`.

scheduler_perf's `createPods` with `steadyState: true` (its `SchedulingWithResourceClaimTemplate`
empty/half/full workloads, `Partitionable` for counters) keeps a few pods pending, each with a
claim the resourceclaim controller makes from a template; as soon as one is bound it is
deleted and another made, and throughput is what is bound over a fixed time. Deleting a bound
pod leaves its claim to the controller, which drops the reservation and the allocation and
then lets the garbage collector delete it, so the devices a pod held come back while the run
goes on (the benchmark plane runs those two controllers for such a workload:
`Workload.controllers`). A cluster "half" or "full" starts with claims allocated directly,
reserved for no pod, as scheduler_perf's `allocResourceClaims` makes them: here each node in
turn gives its next free devices, so the free ones are spread evenly (scheduler_perf's
allocator picks nodes at random).

The window: the pods are made once the scheduler runs; from `WARMUP` seconds after the first
bind, `SteadyState.seconds` are measured (scheduler_perf drops its first sample too). The
scheduler's CPU and requests are read at both ends, as they are, while pods keep coming.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ascheduler.kube import ApiError, KubeClient
from benchmarks.ceiling_dra import Device, allocation
from benchmarks.summary import request_counts, throughput
from benchmarks.workloads import (
    BENCH_LABEL,
    DRA_CLASS,
    DRA_DRIVER,
    SteadyState,
    claim_template,
)

if TYPE_CHECKING:
    from benchmarks.run import Run

DRA = "/apis/resource.k8s.io/v1"
#: Seconds from the first bind to the start of the measured window.
WARMUP = 2.0
#: Names of the pods the run makes (`r-0`, `r-1`, ...) and of the claims allocated before.
POD_PREFIX = "r-"
INIT_PREFIX = "init-"


def node_devices(
    slices: Iterable[Mapping[str, Any]], nodes: Collection[str]
) -> dict[str, list[Device]]:
    """Each of `nodes`' devices of the benchmark's driver, in the order its slices list them."""
    found: dict[str, list[Device]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        if spec.get("driver") != DRA_DRIVER or node not in nodes:
            continue
        for d in spec.get("devices") or []:
            found.setdefault(node, []).append((spec["driver"], spec["pool"]["name"], d["name"]))
    return found


def prefill(
    devices: Mapping[str, Sequence[Device]], claims: int, per_claim: int
) -> list[tuple[str, list[Device]]]:
    """Where each of `claims` claims of `per_claim` devices goes: claim k on the k-th node in
    turn (by name), its next `per_claim` devices there; ValueError when they do not fit."""
    nodes = sorted(devices)
    if claims and not nodes:
        raise ValueError("no node has devices to allocate claims on")
    slots = min((len(devices[n]) for n in nodes), default=0) // per_claim
    if claims > slots * len(nodes):
        raise ValueError(f"{claims} claims of {per_claim} devices need more than the nodes have")
    plan = []
    for k in range(claims):
        node, slot = nodes[k % len(nodes)], k // len(nodes)
        plan.append((node, list(devices[node][slot * per_claim : (slot + 1) * per_claim])))
    return plan


def init_claim(index: int, per_claim: int) -> dict[str, Any]:
    """`resourceclaim.yaml` (one device) or `resourceclaim-partitionable.yaml` (two)."""
    request = {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": per_claim}
    return {
        "metadata": {"name": f"{INIT_PREFIX}{index}"},
        "spec": {"devices": {"requests": [{"name": "req-0", "exactly": request}]}},
    }


async def prepare(kube: KubeClient, namespace: str, steady: SteadyState) -> None:
    """The claim template, and the claims allocated before the run, each on its devices."""
    claims = f"{DRA}/namespaces/{namespace}/resourceclaims"
    await kube.post(
        f"{DRA}/namespaces/{namespace}/resourceclaimtemplates",
        claim_template(steady.devices_per_claim),
    )
    slices = (await kube.get(f"{DRA}/resourceslices"))["items"]
    nodes = await kube.get("/api/v1/nodes", params={"labelSelector": BENCH_LABEL})
    ours = {n["metadata"]["name"] for n in nodes["items"]}
    plan = prefill(node_devices(slices, ours), steady.init_claims, steady.devices_per_claim)
    gate = asyncio.Semaphore(64)
    requests = ["req-0"] * steady.devices_per_claim

    async def allocate(index: int, node: str, devices: list[Device]) -> None:
        async with gate:
            claim = await kube.post(claims, init_claim(index, steady.devices_per_claim))
            status = {"allocation": allocation(requests, devices, node)}
            await kube.put(
                f"{claims}/{claim['metadata']['name']}/status", {**claim, "status": status}
            )

    async with asyncio.TaskGroup() as group:
        for index, (node, devices) in enumerate(plan):
            group.create_task(allocate(index, node, devices))


class Replacer:
    """The run's pods: `pending` made at the start, and each one seen bound deleted and
    another made in its place. `bound` holds when each was first seen bound."""

    def __init__(self, run: Run, steady: SteadyState) -> None:
        self.run = run
        self.steady = steady
        self.pods = f"/api/v1/namespaces/{run.namespace}/pods"
        self.numbers = itertools.count()
        self.bound: dict[str, float] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures: list[BaseException] = []
        self.stopped = False

    async def create(self) -> None:
        index = next(self.numbers)
        body = self.run.workload.pod(f"{POD_PREFIX}{index}", self.run.name, index)
        await self.run.kube.post(self.pods, body)

    async def replace(self, name: str) -> None:
        with contextlib.suppress(ApiError):  # gone already
            await self.run.kube.request(
                "DELETE", f"{self.pods}/{name}", params={"gracePeriodSeconds": "0"}
            )
        if not self.stopped:
            await self.create()

    def _spawn(self, name: str) -> None:
        task = asyncio.create_task(self.replace(name))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.failures.append(exc)

    def saw(self, pod: Mapping[str, Any]) -> None:
        name = (pod.get("metadata") or {}).get("name", "")
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = time.monotonic()
            self._spawn(name)

    async def watch(self) -> None:
        """Every pod of the run seen bound; listed again whenever the watch ends."""
        kube = self.run.kube
        while True:
            listing = await kube.get(self.pods)
            for p in listing["items"]:
                self.saw(p)
            params = {
                "watch": "true",
                "resourceVersion": listing["metadata"]["resourceVersion"],
                "timeoutSeconds": "60",
            }
            async with kube.session.get(
                f"{kube.server}{self.pods}", params=params, headers=await kube.headers()
            ) as resp:
                async for line in resp.content:
                    event = orjson.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.saw(event.get("object") or {})

    def bound_between(self, start: float, end: float) -> list[float]:
        return sorted(t for t in self.bound.values() if start < t <= end)

    async def stop(self) -> None:
        self.stopped = True
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def measure(run: Run, index: int) -> dict[str, Any]:
    """One run of mode `replace`: the scheduler started, the pods kept coming, the window
    measured (see the module's text)."""
    steady = run.workload.steady_state
    assert steady is not None
    await prepare(run.kube, run.namespace, steady)
    replacer = Replacer(run, steady)
    watcher = asyncio.create_task(replacer.watch())
    run.start()
    profiler = await run.profiler()
    trace = None
    try:
        await asyncio.gather(*(replacer.create() for _ in range(steady.pending)))
        deadline = time.monotonic() + run.timeout
        while not replacer.bound:
            _check(run, replacer, watcher)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{run.which}: no pod bound in {run.timeout:.0f} s")
            await asyncio.sleep(0.1)
        await asyncio.sleep(max(0.0, min(replacer.bound.values()) + WARMUP - time.monotonic()))
        requests0, cpu0, peak = await run.requests(settled=False), run.cpu(), run.rss()
        trace = run.trace()
        start = time.monotonic()
        samples: list[int] = []
        last = start
        while (now := time.monotonic()) < start + steady.seconds:
            await asyncio.sleep(min(1.0, start + steady.seconds - now))
            _check(run, replacer, watcher)
            peak = max(peak, run.rss())
            now = time.monotonic()
            samples.append(len(replacer.bound_between(last, now)))
            last = now
            if run.progress:
                print(
                    f"\r  {run.which} replace run {index}: {len(replacer.bound)} bound, "
                    f"{samples[-1]} pods/s   ",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        end = time.monotonic()
        requests1, cpu1 = await run.requests(settled=False), run.cpu()
    finally:
        if trace is not None:
            await trace.stop()
        profiled = await run.profiled(profiler)
        await replacer.stop()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
    times = replacer.bound_between(start, end)
    if not times:
        raise RuntimeError(f"{run.which}: no pod bound in the measured {steady.seconds:.0f} s")
    requests = {k: v - requests0.get(k, 0.0) for k, v in requests1.items()}
    figures = trace.window(start, end, len(times))
    window: dict[str, Any] = {}
    if figures is not None:
        window["window_machine_busy"] = figures["machine_busy"]
        for group, share in figures.get("busy", {}).items():
            window[f"window_busy_{group}"] = share
        for name, p in figures["processes"].items():
            window[f"window_us_per_pod_{name}"] = p["us_per_pod"]
    return {
        "scheduler": run.which,
        "mode": "replace",
        "pods": len(times),
        "bound": len(times),
        "finished": True,
        **throughput(len(times), end - start, samples[:-1] or samples),
        "cpu_seconds": cpu1 - cpu0,
        "peak_rss_bytes": peak,
        **request_counts(requests, len(times)),
        "pending": steady.pending,
        "init_claims": steady.init_claims,
        **window,
        **({"cpus": run.cpus} if run.cpus else {}),
        **profiled,
        "samples": samples,
    }


def _check(run: Run, replacer: Replacer, watcher: asyncio.Task[None]) -> None:
    run.check()
    if watcher.done():
        watcher.result()  # raises what stopped it
        raise RuntimeError("the pods' watch ended")
    if replacer.failures:
        raise replacer.failures[0]
