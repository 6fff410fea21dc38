"""CEL device selectors that a claim's author made costly, on the real plane: other pods keep
being scheduled, health keeps answering and the leader keeps its Lease while they are
evaluated; one that finishes places its pod, and DynamicResources' filterTimeout ends one
that does not with kube-scheduler's message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    STILL_NOT,
    claiming_pod,
    create_device_class,
    create_pods,
    eventually,
    fetch,
    get_pod,
    pause_pod,
    scheduled_condition,
    scheduler,
    serving,
    wait_bound,
    wait_unschedulable,
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
FORTY = "[" + ",".join(str(i) for i in range(40)) + "]"
#: 64,000 iterations a device, under Kubernetes' cost limit (the API server admits it): a
#: fifth of a second a device here, over a minute for a thousand devices.
ITERATIONS = f"{FORTY}.all(a, {FORTY}.all(b, {FORTY}.all(c, a + b + c >= 0)))"
#: 40 regular expressions over a 100,000-character string built in the expression (the API
#: server admits it): over a millisecond a device, so seconds for a thousand devices, which
#: an event loop that ran them would spend away from its Lease.
MATCHES = (
    "cel.bind(s, 'aaaaaaaaaa', cel.bind(t, s+s+s+s+s+s+s+s+s+s, cel.bind(u, "
    "t+t+t+t+t+t+t+t+t+t, cel.bind(v, u+u+u+u+u+u+u+u+u+u, "
    + " && ".join(["v.matches('^(a|b)*$')"] * 40)
    + "))))"
)
FILTER_TIMEOUT = 45


async def slices(kube: KubeClient, created: list[str], node: str, count: int) -> None:
    """`count` devices on `node`, 125 to a slice."""
    per = 125
    n_slices = (count + per - 1) // per
    for s in range(n_slices):
        name = f"{node}-gpus-{s}"
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": n_slices},
                "devices": [
                    {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
                    for i in range(s * per, min((s + 1) * per, count))
                ],
            },
        }
        await kube.post(f"{RESOURCE}/resourceslices", body)
        created.append(f"{RESOURCE}/resourceslices/{name}")


def claim(name: str, klass: str, *selectors: str) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": klass, "allocationMode": "ExactCount"}
    if selectors:
        request["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }


def config(profile: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": profile,
                "pluginConfig": [
                    {"name": "DynamicResources", "args": {"filterTimeout": f"{FILTER_TIMEOUT}s"}}
                ],
            }
        ],
    }


async def test_a_costly_selector_holds_up_no_other_pod_and_ends_at_filter_timeout(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
    tmp_path: Path,
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await slices(kube, cluster_objects, names[0], 1000)
    klass = f"{namespace}-gpu"
    await create_device_class(kube, cluster_objects, klass, DRIVER)
    ns = f"{RESOURCE}/namespaces/{namespace}"
    # Only the last device of the thousand matches each: the regular expressions get there
    # (seconds, off the event loop); the iterations do not before the filterTimeout.
    index = f'device.attributes["{DRIVER}"].index'
    await kube.post(f"{ns}/resourceclaims", claim("matches", klass, f"{MATCHES} && {index} == 999"))
    await kube.post(
        f"{ns}/resourceclaims", claim("iterations", klass, f"{ITERATIONS} && {index} == 998")
    )
    await kube.post(
        f"{ns}/resourceclaims",
        claim("plain", klass, 'device.attributes["gpu.example.com"].index == 7'),
    )
    profile = f"{namespace}-cel"
    path = tmp_path / "cel.yaml"
    path.write_text(json.dumps(config(profile)))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with scheduler(
        plane,
        plane_state,
        "ascheduler-cel",
        None,
        "--config",
        str(path),
        # A short Lease: an event loop held for seconds would lose it, and the process exit.
        "--leader-elect",
        "--leader-elect-resource-namespace",
        namespace,
        "--leader-elect-lease-duration",
        "3",
        http_address=f"127.0.0.1:{port}",
    ) as me:
        await eventually(lambda: serving(base), what="/readyz ok once informers synced")
        await create_pods(
            kube,
            namespace,
            [
                claiming_pod("matches", claim="matches", scheduler_name=profile),
                claiming_pod("iterations", claim="iterations", scheduler_name=profile),
            ],
        )
        others = [pause_pod(f"p{i}", scheduler_name=profile) for i in range(20)]
        others.append(claiming_pod("device", claim="plain", scheduler_name=profile))
        await create_pods(kube, namespace, others)
        where = await wait_bound(kube, namespace, [p["metadata"]["name"] for p in others])
        assert where["device"] == names[0]
        # All of them were placed while the costly selectors were still being evaluated (the
        # iterations wait their turn behind the regular expressions, then run for the
        # filterTimeout): that pod has no verdict yet, and health answers.
        hog = await get_pod(kube, namespace, "iterations")
        assert not hog["spec"].get("nodeName")
        assert scheduled_condition(hog) is None
        assert await fetch(f"{base}/healthz") == (200, "ok")
        # Every device evaluated: the one that matches is allocated, as kube-scheduler's.
        where = await wait_bound(kube, namespace, ["matches"], timeout=180)
        assert where["matches"] == names[0]
        body = await kube.get(f"{ns}/resourceclaims/matches")
        (result,) = body["status"]["allocation"]["devices"]["results"]
        assert result["device"] == "gpu-999"
        message = await wait_unschedulable(
            kube, namespace, "iterations", timeout=FILTER_TIMEOUT + 180
        )
        assert message == (
            "0/2 nodes are available: 1 cannot allocate all claims, 1 timed out trying to "
            f"allocate devices. {STILL_NOT}preemption: 0/2 nodes are available: "
            "2 Preemption is not helpful for scheduling."
        ), message
        assert is_alive(me)
