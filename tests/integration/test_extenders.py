"""ascheduler with kube-scheduler's HTTP extenders on the real plane: the extender filters,
prioritizes and binds (posting the Binding itself, as HAMi's does) the pods that use its
managed resource, and nothing else; its reasons reach the pod's PodScheduled condition."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    pause_pod,
    scheduler,
    wait_bound,
    wait_unschedulable,
)
from tests.kit.http import serve

DEVICE = "example.com/accelerator"


class DeviceExtender:
    """Keeps only nodes labelled `accel=yes`, prefers `tier=gold`, and binds by POSTing the
    Binding with the plane's admin client."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.labels: dict[str, dict[str, str]] = {}
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        body = await request.json()
        self.seen.setdefault(verb, []).append(body)
        if verb == "bind":
            await self.kube.post(
                f"/api/v1/namespaces/{body['PodNamespace']}/pods/{body['PodName']}/binding",
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": body["PodName"], "uid": body["PodUID"]},
                    "target": {"kind": "Node", "name": body["Node"]},
                },
            )
            return web.json_response({})
        names = body["NodeNames"]
        labels = {
            n: (await self.kube.get(f"/api/v1/nodes/{n}"))["metadata"]["labels"] for n in names
        }
        if verb == "filter":
            keep = [n for n in names if labels[n].get("accel") == "yes"]
            failed = {n: "node(s) had no accelerator" for n in names if n not in keep}
            return web.json_response({"NodeNames": keep, "FailedNodes": failed})
        return web.json_response(
            [{"Host": n, "Score": 10 if labels[n].get("tier") == "gold" else 0} for n in names]
        )


@pytest.fixture
async def device_extender(kube: KubeClient) -> AsyncIterator[DeviceExtender]:
    ext = DeviceExtender(kube)
    async with serve("/ext/{verb}", ext.handle) as base:
        ext.url = f"{base}/ext"
        yield ext


async def test_an_extender_filters_prioritizes_and_binds_its_pods(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    device_extender: DeviceExtender,
    tmp_path: Path,
) -> None:
    plain = await nodes(FakeNodes(count=2, prefix=f"{namespace}-plain"))
    (silver,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-s", labels={"accel": "yes"}))
    (gold,) = await nodes(
        FakeNodes(count=1, prefix=f"{namespace}-g", labels={"accel": "yes", "tier": "gold"})
    )
    profile = f"{namespace}-ext"
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": profile}],
                "extenders": [
                    {
                        "urlPrefix": device_extender.url,
                        "filterVerb": "filter",
                        "prioritizeVerb": "prioritize",
                        "bindVerb": "bind",
                        "weight": 5,
                        "nodeCacheCapable": True,
                        "httpTimeout": "10s",
                        "managedResources": [{"name": DEVICE, "ignoredByScheduler": True}],
                    }
                ],
            }
        )
    )
    with scheduler(plane, plane_state, "ascheduler-ext", None, "--config", str(config)):
        await create_pods(
            kube,
            namespace,
            [
                pause_pod("wants-device", scheduler_name=profile, extra={DEVICE: "1"}),
                pause_pod("ordinary", scheduler_name=profile),
            ],
        )
        placed = await wait_bound(kube, namespace, ["wants-device", "ordinary"])
        # Nowhere the extender accepts: its reason, as kube-scheduler reports it.
        await create_pods(
            kube,
            namespace,
            [
                pause_pod(
                    "picky",
                    scheduler_name=profile,
                    extra={DEVICE: "1"},
                    nodeSelector={"kubernetes.io/hostname": plain[0]},
                ),
            ],
        )
        message = await wait_unschedulable(kube, namespace, "picky")
    assert placed["wants-device"] == gold  # filtered to silver/gold, gold scored higher
    binds = device_extender.seen["bind"]
    assert [b["PodName"] for b in binds] == ["wants-device"]  # the extender bound it
    sent = [b["Pod"]["metadata"]["name"] for b in device_extender.seen["filter"]]
    assert "ordinary" not in sent  # no managed resource: never sent to the extender
    assert placed["ordinary"] in {*plain, silver, gold}
    assert message == (
        "0/4 nodes are available: 1 node(s) had no accelerator, "
        "3 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, "
        "preemption: 0/4 nodes are "
        "available: 1 No preemption victims found for incoming pod, 3 Preemption is not "
        "helpful for scheduling."
    )
