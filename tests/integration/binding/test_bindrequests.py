"""`--binding bindrequest` on the real plane: the scheduler writes BindRequests, `ascheduler
binder` binds them; placements survive either process being killed -9, every pod is bound once
and no node holds more than it has; a bind that cannot happen fails its request and the pod is
scheduled again."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from ascheduler.model.bindrequest import collection_path
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    events_for,
    eventually,
    node_of,
    pause_pod,
    pods_in,
    scheduler,
    wait_bound,
)


@contextmanager
def binder(
    plane: ControlPlane, name: str, *extra: str, port: int | None = None
) -> Iterator[ProcessRecord]:
    """An `ascheduler binder` process of the test's own (HTTP on `port`, else any free one),
    stopped by pid when the block ends."""
    address = f"127.0.0.1:{port or 0}"
    record = plane.start_ascheduler(
        name,
        "--log-level",
        "debug",
        "--finished-ttl",
        "1",
        *extra,
        command="binder",
        http_address=address,
    )
    try:
        yield record
    finally:
        plane.stop_process(record)


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


async def readyz(port: int) -> bool:
    try:
        return await fetch(f"http://127.0.0.1:{port}/readyz") == (200, "ok")
    except aiohttp.ClientError:
        return False


async def scrape(port: int) -> dict[tuple[str, str], float]:
    """The binder's samples, by (name, result label)."""
    _, text = await fetch(f"http://127.0.0.1:{port}/metrics")
    return {
        (s.name, s.labels.get("result", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def requests_in(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    body = await kube.get(collection_path(namespace))
    return list(body["items"])


async def no_requests_left(kube: KubeClient, namespace: str) -> None:
    async def empty() -> bool:
        return not await requests_in(kube, namespace)

    await eventually(empty, what="every BindRequest collected", timeout=60)


def durable(plane: ControlPlane, state: PlaneState, name: str, profile: str) -> Any:
    return scheduler(plane, state, name, profile, "--binding", "bindrequest")


async def test_pods_are_bound_through_bind_requests_once_each(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=5, prefix=f"{namespace}-n", cpu="4", pods=110))
    profile = f"{namespace}-s"
    pods = [pause_pod(f"p{i}", scheduler_name=profile, cpu="50m") for i in range(300)]
    with durable(plane, plane_state, "ascheduler-br", profile):
        # No binder yet: the placements are written down, nothing is bound.
        await create_pods(kube, namespace, pods[:20])

        async def twenty_requests() -> list[dict[str, Any]] | None:
            items = await requests_in(kube, namespace)
            return items if len(items) == 20 else None

        items = await eventually(twenty_requests, what="20 BindRequests")
        assert {i["spec"]["selectedNode"] for i in items} <= set(names)
        assert not any(node_of(p) for p in (await pods_in(kube, namespace)).values())
        port = free_port()
        with binder(plane, "ascheduler-binder-a", port=port):
            await create_pods(kube, namespace, pods[20:])
            placed = await wait_bound(kube, namespace, [f"p{i}" for i in range(300)], timeout=180)
            await no_requests_left(kube, namespace)
            assert await readyz(port)
            metrics = await scrape(port)
            assert metrics[("ascheduler_binder_requests_total", "bound")] == 300

            async def none_pending() -> bool:
                return (await scrape(port))[("ascheduler_binder_pending_requests", "")] == 0

            await eventually(none_pending, what="the binder's pending gauge at 0")
    assert set(placed.values()) <= set(names)
    on_api = await pods_in(kube, namespace)
    assert {n: node_of(p) for n, p in on_api.items()} == placed
    assert max(Counter(placed.values()).values()) <= 80  # 4 cpu / 50m


async def test_kill_9_of_the_binder_then_the_scheduler_mid_burst(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    # Room for exactly 120 pods of 1 cpu on 6 nodes; 120 pods.
    names = await nodes(FakeNodes(count=6, prefix=f"{namespace}-n", cpu="20", pods=110))
    profile = f"{namespace}-s"
    pods = [pause_pod(f"p{i}", scheduler_name=profile, cpu="1") for i in range(120)]
    with durable(plane, plane_state, "ascheduler-br-1", profile) as first:
        with binder(plane, "ascheduler-binder-1") as victim:
            await create_pods(kube, namespace, pods[:40])
            await asyncio.sleep(0.5)
            os.kill(victim.pid, signal.SIGKILL)
        assert not is_alive(victim)
        await create_pods(kube, namespace, pods[40:80])
        with binder(plane, "ascheduler-binder-2"):
            await create_pods(kube, namespace, pods[80:100])
            os.kill(first.pid, signal.SIGKILL)
            await create_pods(kube, namespace, pods[100:])
            # A new scheduler finds the placements written down and takes them as made.
            with durable(plane, plane_state, "ascheduler-br-2", profile):
                placed = await wait_bound(
                    kube, namespace, [f"p{i}" for i in range(120)], timeout=180
                )
                await no_requests_left(kube, namespace)
    assert Counter(placed.values()) == {n: 20 for n in names}  # full, none over


async def test_a_bind_that_cannot_happen_fails_its_request_and_the_pod_is_placed_again(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    (doomed,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-gone", cpu="4"))
    profile = f"{namespace}-s"
    with durable(plane, plane_state, "ascheduler-br-f", profile):
        await create_pods(kube, namespace, [pause_pod("p", scheduler_name=profile)])

        async def written() -> list[dict[str, Any]] | None:
            return await requests_in(kube, namespace) or None

        (item,) = await eventually(written, what="the BindRequest")
        assert item["spec"]["selectedNode"] == doomed
        await kube.request("DELETE", f"/api/v1/nodes/{doomed}")
        (other,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-new", cpu="4"))
        with binder(plane, "ascheduler-binder-f"):
            placed = await wait_bound(kube, namespace, ["p"], timeout=90)
            assert placed == {"p": other}
            await no_requests_left(kube, namespace)
        notes = [e.get("note", "") for e in await events_for(kube, namespace, "FailedScheduling")]
        assert f"binding failed: node {doomed} does not exist" in notes, notes


async def test_one_binder_leads_and_a_standby_takes_over(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="4"))
    profile = f"{namespace}-s"
    lease = ("--leader-elect", "--leader-elect-resource-namespace", namespace)
    lease += ("--leader-elect-lease-duration", "3")
    first_port, second_port = free_port(), free_port()
    with (
        durable(plane, plane_state, "ascheduler-br-le", profile),
        binder(plane, "ascheduler-binder-le-1", *lease, port=first_port) as first,
    ):
        await eventually(lambda: readyz(first_port), what="the first binder leading")
        with binder(plane, "ascheduler-binder-le-2", *lease, port=second_port):

            async def standing_by() -> tuple[int, str] | None:
                try:
                    return await fetch(f"http://127.0.0.1:{second_port}/readyz")
                except aiohttp.ClientError:
                    return None

            answer = await eventually(standing_by, what="the second binder answering")
            assert answer == (503, "standby: not leading")
            await create_pods(kube, namespace, [pause_pod("a", scheduler_name=profile)])
            await wait_bound(kube, namespace, ["a"])
            os.kill(first.pid, signal.SIGKILL)
            await create_pods(kube, namespace, [pause_pod("b", scheduler_name=profile)])
            await wait_bound(kube, namespace, ["b"], timeout=60)
            assert (await scrape(second_port))[("ascheduler_binder_requests_total", "bound")] == 1
