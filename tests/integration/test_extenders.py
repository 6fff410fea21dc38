"""ascheduler with kube-scheduler's HTTP extenders on the real plane: the extender filters,
prioritizes and binds (posting the Binding itself, as HAMi's does) the pods that use its
managed resource, and nothing else; its reasons reach the pod's PodScheduled condition. Its
preempt verb turns preemption away from a node, and ascheduler evicts the victims
kube-scheduler evicts with the same extender."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port, kube_scheduler_config
from ascheduler.kube import ApiError, KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    fetch,
    get_pod,
    pause_pod,
    priority_classes,
    scheduler,
    wait_bound,
    wait_unschedulable,
)
from tests.kit.http import serve

DEVICE = "example.com/accelerator"


class DeviceExtender:
    """Keeps only nodes labelled `accel=yes`, prefers `tier=gold`, binds by POSTing the
    Binding with the plane's admin client, and keeps preemption off the `refused` nodes."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.labels: dict[str, dict[str, str]] = {}
        self.url = ""
        #: Nodes the preempt verb takes out of the candidates.
        self.refused: set[str] = set()

    def preempt(self, body: dict[str, Any]) -> dict[str, Any]:
        """The candidates as sent (UIDs, or whole pods without nodeCacheCapable), less the
        refused nodes."""
        meta = body.get("NodeNameToMetaVictims")
        if meta is None:
            meta = {
                node: {
                    "Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]],
                    "NumPDBViolations": v["NumPDBViolations"],
                }
                for node, v in (body.get("NodeNameToVictims") or {}).items()
            }
        return {node: v for node, v in meta.items() if node not in self.refused}

    async def handle(self, request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        body = await request.json()
        self.seen.setdefault(verb, []).append(body)
        if verb == "preempt":
            return web.json_response({"NodeNameToMetaVictims": self.preempt(body)})
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


def device_extender_config(
    tmp_path: Path, profile: str, extender: DeviceExtender, **fields: Any
) -> Path:
    """A configuration file: one profile, and the device extender filtering and prioritizing
    (weight 5, node-cache capable) the pods that ask for `DEVICE`, with `fields` added."""
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": profile}],
                "extenders": [
                    {
                        "urlPrefix": extender.url,
                        "filterVerb": "filter",
                        "prioritizeVerb": "prioritize",
                        "weight": 5,
                        "nodeCacheCapable": True,
                        "managedResources": [{"name": DEVICE, "ignoredByScheduler": True}],
                        **fields,
                    }
                ],
            }
        )
    )
    return config


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
    config = device_extender_config(
        tmp_path, profile, device_extender, bindVerb="bind", httpTimeout="10s"
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
        f"3 node(s) didn't match Pod's node affinity/selector. {NO_NEW_CLAIMS}"
        "preemption: 0/4 nodes are "
        "available: 1 No preemption victims found for incoming pod, 3 Preemption is not "
        "helpful for scheduling."
    )


CLASSES = {"ext-lowest": 1, "ext-low": 10, "ext-top": 1000}


@pytest.fixture
async def classes(kube: KubeClient) -> AsyncIterator[None]:
    async with priority_classes(kube, CLASSES):
        yield


async def going(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        pod = await get_pod(kube, namespace, name)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return bool(pod["metadata"].get("deletionTimestamp"))


@dataclass
class Preempted:
    """What one scheduler did: where the preemptor went, which victims went, and what the
    extender was sent (node -> victim pod names, whole or by UID)."""

    bound: str
    evicted: list[str]
    sent: dict[str, list[str]]
    #: The request's fields, and whether each was null.
    fields: dict[str, bool]


async def preemption_through_extender(
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    extender: DeviceExtender,
    profile: str,
    run: str,
) -> Preempted:
    """Two full nodes of 1 cpu: the victim on `first` is the cheaper one (lower priority),
    so preemption picks `first` unless the extender refuses it; it does. The preemptor then
    evicts the victim on `second` and binds there."""
    labels = {"ext-run": run}
    (first,) = await nodes(
        FakeNodes(count=1, prefix=f"ext-{namespace[-6:]}-{run}-first", cpu="1", labels=labels)
    )
    (second,) = await nodes(
        FakeNodes(count=1, prefix=f"ext-{namespace[-6:]}-{run}-second", cpu="1", labels=labels)
    )
    extender.refused = {first}
    extender.seen.pop("preempt", None)
    victims = {f"{run}-cheap": (first, "lowest"), f"{run}-dear": (second, "low")}
    await create_pods(
        kube,
        namespace,
        [
            pause_pod(
                name,
                scheduler_name=profile,
                cpu="1",
                memory="100Mi",
                nodeName=node,
                priorityClassName=f"ext-{cls}",
            )
            for name, (node, cls) in victims.items()
        ],
    )
    preemptor = pause_pod(
        f"{run}-vip",
        scheduler_name=profile,
        cpu="1",
        memory="100Mi",
        priorityClassName="ext-top",
        nodeSelector=labels,
    )
    names = {(await get_pod(kube, namespace, name))["metadata"]["uid"]: name for name in victims}
    await create_pods(kube, namespace, [preemptor])
    placed = await wait_bound(kube, namespace, [f"{run}-vip"], timeout=90)
    evicted = [name for name in victims if await going(kube, namespace, name)]
    (body, *_) = extender.seen["preempt"]
    sent: dict[str, list[str]] = {}
    for node, v in (body.get("NodeNameToVictims") or {}).items():
        sent[node] = [p["metadata"]["name"] for p in v["Pods"]]
    for node, v in (body.get("NodeNameToMetaVictims") or {}).items():
        sent[node] = [names[p["UID"]] for p in v["Pods"]]
    fields = {key: value is None for key, value in body.items()}
    return Preempted(placed[f"{run}-vip"], evicted, sent, fields)


@pytest.mark.parametrize("cache_capable", [False, True], ids=["whole-pods", "uids"])
async def test_the_preempt_verb_moves_preemption_as_it_moves_kube_scheduler_s(
    cache_capable: bool,
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    device_extender: DeviceExtender,
    classes: None,
    tmp_path: Path,
) -> None:
    profile = f"{namespace}-ext"
    extenders = [
        {
            "urlPrefix": device_extender.url,
            "preemptVerb": "preempt",
            "nodeCacheCapable": cache_capable,
            "httpTimeout": "10s",
        }
    ]
    ours = tmp_path / "ascheduler.yaml"
    ours.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": profile}],
                "extenders": extenders,
            }
        )
    )
    with scheduler(plane, plane_state, "ascheduler-ext-preempt", None, "--config", str(ours)):
        by_us = await preemption_through_extender(
            kube, namespace, nodes, device_extender, profile, "ours"
        )
    # The same world, scheduled by kube-scheduler with the same extender.
    theirs = tmp_path / "kube-scheduler.yaml"
    config = kube_scheduler_config(
        str(plane_state.scheduler_kubeconfig), profile, qps=100, burst=100
    )
    theirs.write_text(json.dumps({**config, "extenders": extenders}))
    gates = [f"--feature-gates={plane_state.feature_gates}"] if plane_state.feature_gates else []
    argv = [str(plane.bins.kube_scheduler), f"--config={theirs}", "--secure-port=0", *gates]
    record = plane.start_process("kube-scheduler-ext-preempt", argv)
    try:
        by_kube = await preemption_through_extender(
            kube, namespace, nodes, device_extender, profile, "theirs"
        )
    finally:
        plane.stop_process(record)

    for run, outcome in (("ours", by_us), ("theirs", by_kube)):
        # Not where the cheaper victim is: the extender took that node away.
        assert outcome.bound == f"ext-{namespace[-6:]}-{run}-second-0", (run, outcome)
        assert outcome.evicted == [f"{run}-dear"], (run, outcome)
        # Both candidates were sent with their one victim each.
        assert sorted(n for ns in outcome.sent.values() for n in ns) == [
            f"{run}-cheap",
            f"{run}-dear",
        ], (run, outcome)
    # The request as kube-scheduler writes it: the same fields, the same one left null.
    assert by_us.fields == by_kube.fields
    assert by_us.fields["NodeNameToMetaVictims"] is not cache_capable


async def explain_json(state: PlaneState, *args: str) -> dict[str, Any]:
    """What `ascheduler explain ARGS -o json` prints."""
    env = {**os.environ, "KUBECONFIG": str(state.admin_kubeconfig)}
    argv = [sys.executable, "-m", "ascheduler", "explain", *args, "-o", "json"]
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    data: dict[str, Any] = json.loads(out)
    return data


async def test_explain_shows_what_the_extender_said_of_each_node(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    device_extender: DeviceExtender,
    tmp_path: Path,
) -> None:
    (plain,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-plain"))
    (silver,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-s", labels={"accel": "yes"}))
    (gold,) = await nodes(
        FakeNodes(count=1, prefix=f"{namespace}-g", labels={"accel": "yes", "tier": "gold"})
    )
    profile = f"{namespace}-ext"
    config = device_extender_config(tmp_path, profile, device_extender)
    ours = {plain, silver, gold}
    selector = {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(ours)}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [selector]}]
            }
        }
    }
    manifest = tmp_path / "wants.json"
    manifest.write_text(
        json.dumps(
            pause_pod("wants", scheduler_name=profile, extra={DEVICE: "1"}, affinity=affinity)
        )
    )
    port = free_port()
    with scheduler(
        plane,
        plane_state,
        "ascheduler-ext-explain",
        None,
        "--config",
        str(config),
        "--debug-endpoints",
        "loopback",
        http_address=f"127.0.0.1:{port}",
    ):
        await create_pods(
            kube,
            namespace,
            [
                pause_pod(
                    "picky",
                    scheduler_name=profile,
                    extra={DEVICE: "1"},
                    nodeSelector={"kubernetes.io/hostname": plain},
                )
            ],
        )
        message = await wait_unschedulable(kube, namespace, "picky")
        cold = await explain_json(
            plane_state, f"{namespace}/picky", "--config", str(config), "--limit", "0"
        )
        _, text = await fetch(f"http://127.0.0.1:{port}/debug/pods/{namespace}/picky")
        live = json.loads(text)["now"]
        placed = await explain_json(
            plane_state, "-f", str(manifest), "-n", namespace, "--config", str(config)
        )
    no_accelerator = "node(s) had no accelerator"
    for doc in (cold, live):
        # The scheduler's own message, the extender's reason in it, and its verdict per node.
        assert doc["message"] == message
        (said,) = doc["extenders"]
        assert said["name"] == device_extender.url
        assert said["filter"]["sent"] == 1
        assert said["filter"]["failed"] == {plain: no_accelerator}
        rejected = {n["name"]: g["plugin"] for g in doc["rejected"] for n in g["nodes"]}
        assert rejected[plain] == f"Extender {device_extender.url}"
    # Where a pod that fits would go: the extender's scores, weighted, in the totals.
    assert placed["chosen"] == gold
    assert placed["feasible"] == 2
    (said,) = placed["extenders"]
    assert said["filter"]["failed"] == {plain: no_accelerator}
    assert said["prioritize"]["scores"] == {
        gold: {"score": 10, "weighted": 500},
        silver: {"score": 0, "weighted": 0},
    }
    scores = {s["name"]: s for s in placed["scores"]["nodes"]}
    plugins = {n: sum(p["weighted"] for p in s["plugins"].values()) for n, s in scores.items()}
    assert scores[gold]["total"] == plugins[gold] + 500
    assert scores[silver]["total"] == plugins[silver]
