"""The ceilings on the real API server: the Python one binds a backlog with its watch already
open, as a scheduler's informer does, so the events its own binds make are read while it binds;
both allocate and reserve the claims of pods with ResourceClaims, on the node each pod is bound
to, with kube-scheduler's requests, and never give a device twice."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.kube import KubeClient
from benchmarks.ceiling import Ceiling, go_binary
from benchmarks.ceiling_dra import DRA, FINALIZER, allocated_node, claim_names, reservation
from benchmarks.run import requests_total
from benchmarks.workloads import DRA_DRIVER, claiming_pod, device_claim, dra_slice, pod
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import wait_bound

PODS = 24


def pending(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


class Opened:
    """A session that notes when each streaming GET (the watch) is opened."""

    def __init__(self, session: Any, opened: list[float]) -> None:
        self._session = session
        self._opened = opened

    def get(self, *args: Any, **kw: Any) -> Any:
        self._opened.append(time.monotonic())
        return self._session.get(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


async def test_the_ceiling_watches_while_it_binds_a_backlog(
    plane_state: PlaneState, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    label = f"ceiling-{namespace}"[:63]
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", labels={"bench": label}))
    scheduler = f"{namespace}-ceiling"
    for i in range(PODS):
        await kube.post(f"/api/v1/namespaces/{namespace}/pods", pending(f"p-{i}", scheduler))

    kubeconfig = str(plane_state.admin_kubeconfig)
    async with (
        await KubeClient.connect(kubeconfig) as watch,
        await KubeClient.connect(kubeconfig) as writes,
    ):
        ceiling = Ceiling(watch, writes, scheduler, concurrency=2, node_selector=f"bench={label}")
        bindings: list[float] = []
        watched: list[float] = []
        send = writes.request

        async def counted(method: str, path: str, **kw: Any) -> Any:
            if path.endswith("/binding"):
                bindings.append(time.monotonic())
            return await send(method, path, **kw)

        writes.request = counted  # type: ignore[method-assign]
        watch.session = Opened(watch.session, watched)  # type: ignore[assignment]
        runner = asyncio.create_task(ceiling.run())
        try:
            async with asyncio.timeout(60):
                while True:
                    left = await kube.get(
                        f"/api/v1/namespaces/{namespace}/pods",
                        params={"fieldSelector": "spec.nodeName="},
                    )
                    if not left["items"]:
                        break
                    await asyncio.sleep(0.1)
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await asyncio.gather(*ceiling.tasks, return_exceptions=True)

    assert len(bindings) == PODS
    # Two binds at a time: a ceiling that bound the listed pods before watching would have
    # sent all but the last two before its watch opened.
    (opened_at,) = watched
    assert sum(1 for t in bindings if t < opened_at) <= 2


DEVICES_PER_NODE = 2
#: Pods whose claim is made beforehand and named by the pod, as the benchmark makes them.
NAMED = 4
#: Pods whose claim the resourceclaim controller makes from a template.
TEMPLATED = 2


@contextlib.asynccontextmanager
async def dra_ceiling(
    which: str, kubeconfig: str, scheduler: str, selector: str
) -> AsyncIterator[Callable[[], Awaitable[dict[str, float]]]]:
    """One ceiling running: yields what its requests count by method."""
    if which == "ceiling-go":
        port = free_port()
        argv = [str(go_binary()), "--kubeconfig", kubeconfig, "--scheduler-name", scheduler]
        argv += ["--node-selector", selector, "--metrics-port", str(port)]
        proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE)
        try:
            async with aiohttp.ClientSession() as scrape:

                async def scraped() -> dict[str, float]:
                    by_method: dict[str, float] = {}
                    for key, value in (await requests_total(scrape, which, port)).items():
                        method = key.split()[0]
                        by_method[method] = by_method.get(method, 0.0) + value
                    return by_method

                yield scraped
        finally:
            proc.terminate()
            _, stderr = await proc.communicate()
            print(stderr.decode()[-3000:])
        return
    async with (
        await KubeClient.connect(kubeconfig) as watch,
        await KubeClient.connect(kubeconfig) as writes,
    ):
        counts: dict[str, float] = {}
        send = writes.request

        async def counted(method: str, path: str, **kw: Any) -> Any:
            counts[method] = counts.get(method, 0.0) + 1
            return await send(method, path, **kw)

        writes.request = counted  # type: ignore[method-assign]
        ceiling = Ceiling(watch, writes, scheduler, concurrency=4, node_selector=selector)
        runner = asyncio.create_task(ceiling.run())

        async def counted_so_far() -> dict[str, float]:
            if runner.done():
                runner.result()
            return dict(counts)

        try:
            yield counted_so_far
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await asyncio.gather(*ceiling.tasks, return_exceptions=True)


@pytest.mark.parametrize("which", ["ceiling-python", "ceiling-go"])
async def test_the_dra_ceiling_allocates_and_reserves_every_claim_on_its_pods_node(
    which: str,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    label = f"dra-{namespace}"[:63]
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-n", labels={"bench": label}))
    for node in names:
        await kube.post(f"{DRA}/resourceslices", dra_slice(node, DEVICES_PER_NODE))
        cluster_objects.append(f"{DRA}/resourceslices/{node}")
    scheduler = f"{namespace}-{which}"
    claims = f"{DRA}/namespaces/{namespace}/resourceclaims"
    template = {"metadata": {"name": "one"}, "spec": {"spec": device_claim("x")["spec"]}}
    await kube.post(f"{DRA}/namespaces/{namespace}/resourceclaimtemplates", template)
    pods = [f"named-{i}" for i in range(NAMED)] + [f"templated-{i}" for i in range(TEMPLATED)]
    for name in pods[:NAMED]:
        await kube.post(claims, device_claim(name))
    # Every device is asked for once, and one pod more asks for none.
    assert len(pods) == len(names) * DEVICES_PER_NODE
    async with dra_ceiling(
        which, str(plane_state.admin_kubeconfig), scheduler, f"bench={label}"
    ) as requests:
        for i, name in enumerate(pods):
            body = claiming_pod(name, scheduler, i)
            if name.startswith("templated"):
                body["spec"]["resourceClaims"] = [
                    {"name": "resource", "resourceClaimTemplateName": "one"}
                ]
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", body)
        await kube.post(f"/api/v1/namespaces/{namespace}/pods", pod("plain", scheduler))
        where = await wait_bound(kube, namespace, [*pods, "plain"], timeout=90)
        # Its writes are done when the pods are bound: the counts are final.
        sent = await requests()

    held: list[tuple[str, str]] = []
    for name in pods:
        bound = await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        named = claim_names(bound)
        assert named is not None
        (claim_name,) = named
        claim = await kube.get(f"{claims}/{claim_name}")
        assert allocated_node(claim) == where[name]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["request"], r["driver"], r["pool"]) for r in results] == [
            ("req-0", DRA_DRIVER, where[name])
        ]
        held += [(r["pool"], r["device"]) for r in results]
        assert claim["status"]["reservedFor"] == [reservation(bound)]
        assert FINALIZER in claim["metadata"]["finalizers"]
    assert len(set(held)) == len(held) == len(pods)
    # kube-scheduler's requests for each pod but its Event: the nominated node, the claim's
    # finalizer and status, the Binding (the plain pod: its Binding alone).
    assert sent.get("PATCH") == len(pods)
    assert sent.get("PUT") == 2 * len(pods)
    assert sent.get("POST") == len(pods) + 1
