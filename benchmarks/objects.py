"""What a run makes on the plane and takes away again: nodes and their devices, pods, their
volumes, claims and gangs, scheduler_perf's churn, and the watch that records each bind."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import Any

import orjson

from ascheduler.devcluster import versions
from ascheduler.devcluster.nodes import create_fake_nodes, delete_fake_nodes, wait_nodes_ready
from ascheduler.kube import ApiError, KubeClient, KubeError
from benchmarks.workloads import (
    BENCH_LABEL,
    DRA_CLASS,
    DRA_DRIVER,
    PRIORITY_CLASSES,
    VOLUME_RUN_LABEL,
    Workload,
    bound_claim,
    bound_volume,
    device_claim,
    dra_class,
    gang_name,
    gang_workload,
    pod_group,
)

DRA = "/apis/resource.k8s.io/v1"


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


async def create_storage(kube: KubeClient, namespace: str, pod_names: list[str]) -> None:
    """Each pod's bound claim and volume, as scheduler_perf makes them: the claim, its status,
    the volume, its status (the statuses written after, as the API server resets them)."""
    gate = asyncio.Semaphore(64)
    bound = {"status": {"phase": "Bound"}}

    async def create(pod_name: str) -> None:
        async with gate:
            claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
            claim = await kube.post(claims, bound_claim(namespace, pod_name))
            await kube.patch(f"{claims}/{claim['metadata']['name']}/status", bound)
            body = bound_volume(namespace, pod_name, claim["metadata"]["uid"])
            await kube.post("/api/v1/persistentvolumes", body)
            await kube.patch(f"/api/v1/persistentvolumes/{body['metadata']['name']}/status", bound)

    async with asyncio.TaskGroup() as group:
        for name in pod_names:
            group.create_task(create(name))


async def delete_storage(kube: KubeClient, namespace: str) -> None:
    """The run's claims and volumes. (The benchmark plane puts no protection finalizers on
    them and runs no controllers: they go at once, and the namespace never empties itself.)"""
    await kube.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", timeout=600
    )
    params = {"labelSelector": f"{VOLUME_RUN_LABEL}={namespace}"}
    await kube.request("DELETE", "/api/v1/persistentvolumes", params=params, timeout=600)


async def create_device_claims(kube: KubeClient, namespace: str, pod_names: list[str]) -> None:
    """Each pod's ResourceClaim, as the resourceclaim controller makes it from the template."""
    gate = asyncio.Semaphore(64)

    async def create(pod_name: str) -> None:
        async with gate:
            await kube.post(f"{DRA}/namespaces/{namespace}/resourceclaims", device_claim(pod_name))

    async with asyncio.TaskGroup() as group:
        for name in pod_names:
            group.create_task(create(name))


async def create_gangs(kube: KubeClient, namespace: str, workload: Workload) -> None:
    """The object of every gang of the measured pods: a Workload (1.35), or a PodGroup of
    the release's API version (`pod_group_policy`)."""
    gate = asyncio.Semaphore(64)
    size = workload.gang_size
    api = versions.release().workload_api
    path = _gangs_path(namespace, workload)

    async def create(index: int) -> None:
        async with gate:
            name = gang_name(index * size, size)
            if workload.pod_group_policy:
                body = pod_group(
                    name, size, workload.pod_group_policy, api, workload.pod_group_priority_class
                )
            else:
                body = gang_workload(name, size)
            await kube.post(path, body)

    async with asyncio.TaskGroup() as group:
        for index in range(workload.gangs()):
            group.create_task(create(index))


def _gangs_path(namespace: str, workload: Workload) -> str:
    api = versions.release().workload_api
    kind = "podgroups" if workload.pod_group_policy else "workloads"
    return f"/apis/scheduling.k8s.io/{api}/namespaces/{namespace}/{kind}"


async def delete_gangs(kube: KubeClient, namespace: str, workload: Workload) -> None:
    """The run's PodGroups or Workloads (a benchmark plane runs no namespace controller to
    take them with the namespace), without their finalizers: 1.37's PodGroupProtection
    admission puts one on each PodGroup, which only kube-controller-manager's podgroup
    protection controller (not run here) takes off."""
    await release_and_delete(kube, _gangs_path(namespace, workload))


async def release_and_delete(kube: KubeClient, path: str) -> None:
    """Every object of the collection at `path`, its finalizers taken off, deleted; waits
    until none is left."""
    listing = await kube.get(path)
    gate = asyncio.Semaphore(64)

    async def release(name: str) -> None:
        async with gate:
            with contextlib.suppress(ApiError):
                await kube.patch(f"{path}/{name}", {"metadata": {"finalizers": None}})

    async with asyncio.TaskGroup() as group:
        for item in listing.get("items") or []:
            if item["metadata"].get("finalizers"):
                group.create_task(release(item["metadata"]["name"]))
    await kube.request("DELETE", path, timeout=600)
    deadline = time.monotonic() + 600
    while (await kube.get(path)).get("items"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: still there after 600 s")
        await asyncio.sleep(0.5)


def gang_latencies(
    workload: Workload, created: dict[str, float], bound: dict[str, float]
) -> list[float]:
    """Per gang of the measured pods: from its last member created to its last member bound
    (its members all bound; a gang binds whole, so that is the gang bound)."""
    last_created: dict[str, float] = {}
    last_bound: dict[str, float] = {}
    for name, at in bound.items():
        if not name.startswith("m-") or name not in created:
            continue
        gang = gang_name(int(name[2:]), workload.gang_size)
        last_created[gang] = max(last_created.get(gang, 0.0), created[name])
        last_bound[gang] = max(last_bound.get(gang, 0.0), at)
    return [last_bound[g] - last_created[g] for g in last_bound]


async def delete_device_claims(kube: KubeClient, namespace: str) -> None:
    """The run's claims, gone before the next run starts, so their devices are free again:
    the benchmark plane runs no resourceclaim controller to take the schedulers' finalizer
    off, so the harness does."""
    await release_and_delete(kube, f"{DRA}/namespaces/{namespace}/resourceclaims")


#: Names of the churn pods (created during the measurement, never measured themselves).
CHURN = "churn-"


async def churn(kube: KubeClient, namespace: str, workload: Workload, scheduler: str) -> None:
    """scheduler_perf's churn (create mode): one pod of the workload's churn shape every
    interval until cancelled. A refused create is skipped, not retried."""
    make = workload.churn
    assert make is not None
    i = 0
    while True:
        body = make(f"{CHURN}{i}", scheduler, i)
        with contextlib.suppress(KubeError):
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)
        i += 1
        await asyncio.sleep(workload.churn_interval)


async def watch_bound(
    kube: KubeClient, namespace: str, bound: dict[str, float], want: int, done: asyncio.Event
) -> None:
    """Record when each pod is first seen bound; list again whenever the watch ends."""
    while not done.is_set():
        listing = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
        for p in listing["items"]:
            if p["spec"].get("nodeName") and not p["metadata"]["name"].startswith(CHURN):
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
                name = (obj.get("metadata") or {}).get("name", "")
                if (obj.get("spec") or {}).get("nodeName") and not name.startswith(CHURN):
                    bound.setdefault(obj["metadata"]["name"], time.monotonic())
                    if len(bound) >= want:
                        done.set()
                        return


async def collect_apiserver_garbage(kube: KubeClient) -> None:
    """Have kube-apiserver's Go runtime collect its garbage now (its pprof heap endpoint does,
    with `gc=1`), so each measured span starts from the same point of its collector's cycle.
    A cycle costs it 200-450 ms of CPU on a benchmark plane's heap; left to chance, whether
    one lands inside a one-second backlog decides more of a run's figure than the scheduler
    does. Best effort: a cluster that does not serve it (profiling off, no rights) is run
    as it is."""
    with contextlib.suppress(KubeError):
        await kube.request("GET", "/debug/pprof/heap", params={"gc": "1"}, timeout=60)


async def create_nodes(kubeconfig: str, workload: Workload, run_id: str) -> list[str]:
    async with await KubeClient.connect(kubeconfig, user_agent="bench") as kube:
        if workload.churn is not None or workload.pod_group_priority_class:
            for name, value in PRIORITY_CLASSES.items():
                body = {"metadata": {"name": name}, "value": value}
                try:
                    await kube.post("/apis/scheduling.k8s.io/v1/priorityclasses", body)
                except ApiError as exc:
                    if not exc.conflict:
                        raise
        names: list[str] = []
        for group in workload.nodes(f"bench-{run_id}"):
            labelled = dataclasses.replace(group, labels={**group.labels, BENCH_LABEL: run_id})
            names += await create_fake_nodes(kube, labelled, concurrency=64)
        await wait_nodes_ready(kube, names, timeout=600)
        if workload.devices_per_node:
            await create_devices(kube, names, workload)
        return names


async def create_devices(kube: KubeClient, names: list[str], workload: Workload) -> None:
    """The DeviceClass, and every node's ResourceSlices (`Workload.slices`)."""
    try:
        await kube.post(f"{DRA}/deviceclasses", dra_class())
    except ApiError as exc:
        if not exc.conflict:
            raise
    gate = asyncio.Semaphore(64)

    async def create(node: str) -> None:
        async with gate:
            for body in workload.slices(node):
                await kube.post(f"{DRA}/resourceslices", body)

    async with asyncio.TaskGroup() as group:
        for name in names:
            group.create_task(create(name))


async def delete_nodes(kubeconfig: str, names: list[str], workload: Workload) -> None:
    async with await KubeClient.connect(kubeconfig, user_agent="bench") as kube:
        if workload.devices_per_node:
            params = {"fieldSelector": f"spec.driver={DRA_DRIVER}"}
            await kube.request("DELETE", f"{DRA}/resourceslices", params=params, timeout=600)
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"{DRA}/deviceclasses/{DRA_CLASS}")
        await delete_fake_nodes(kube, names, concurrency=64)
