"""ascheduler on the real plane: it binds its pods, leaves others alone, and reports pods that
fit nowhere the way kube-scheduler does."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from ascheduler.model.quantity import parse_resource
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    events_for,
    eventually,
    get_pod,
    node_of,
    pause_pod,
    pods_in,
    scheduled_condition,
    scheduler,
    wait_bound,
    wait_unschedulable,
)


@pytest.mark.smoke
async def test_binds_its_own_pods_and_leaves_default_scheduler_pods_alone(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await create_pods(
        kube,
        namespace,
        [
            pause_pod("ours"),
            pause_pod("theirs", scheduler_name="default-scheduler"),
        ],
    )
    placed = await wait_bound(kube, namespace, ["ours"])
    assert placed["ours"] in names
    scheduled = await eventually(
        lambda: events_for(kube, namespace, "Scheduled"), what="Scheduled event"
    )
    assert scheduled[0]["note"] == f"Successfully assigned {namespace}/ours to {placed['ours']}"
    assert scheduled[0]["reportingController"] == "ascheduler"
    theirs = await get_pod(kube, namespace, "theirs")
    assert node_of(theirs) == ""
    assert scheduled_condition(theirs) is None  # untouched: no condition written for it
    assert is_alive(ascheduler)


@pytest.mark.smoke
async def test_exact_fit_then_unschedulable_until_room_appears(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2", memory="8Gi"))
    fitting = [f"p{i}" for i in range(4)]
    await create_pods(kube, namespace, [pause_pod(n, cpu="1", memory="1Gi") for n in fitting])
    placed = await wait_bound(kube, namespace, fitting)
    assert Counter(placed.values()) == Counter({n: 2 for n in set(placed.values())})

    await create_pods(kube, namespace, [pause_pod("extra", cpu="1", memory="1Gi")])
    message = await wait_unschedulable(kube, namespace, "extra")
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    failed = await eventually(
        lambda: events_for(kube, namespace, "FailedScheduling"), what="FailedScheduling event"
    )
    assert failed[0]["note"] == message
    assert failed[0]["type"] == "Warning"

    # Deleting a bound pod frees room: the waiting pod is scheduled there.
    await kube.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/p0", params={"gracePeriodSeconds": 0}
    )
    assert (await wait_bound(kube, namespace, ["extra"]))["extra"] == placed["p0"]

    # Full again; a new node makes room for the next one.
    await create_pods(kube, namespace, [pause_pod("later", cpu="1", memory="1Gi")])
    await wait_unschedulable(kube, namespace, "later")
    added = await nodes(FakeNodes(count=1, prefix=f"{namespace}-m", cpu="2", memory="8Gi"))
    assert (await wait_bound(kube, namespace, ["later"]))["later"] == added[0]


async def test_taints_tolerations_and_cordoned_nodes(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    tainted = await nodes(FakeNodes(count=1, prefix=f"{namespace}-t", taints=[taint]))
    cordoned = await nodes(FakeNodes(count=1, prefix=f"{namespace}-c", unschedulable=True))
    await create_pods(
        kube,
        namespace,
        [
            pause_pod("plain"),
            pause_pod(
                "tolerant",
                tolerations=[
                    {
                        "key": "dedicated",
                        "operator": "Equal",
                        "value": "gpu",
                        "effect": "NoSchedule",
                    }
                ],
            ),
        ],
    )
    message = await wait_unschedulable(kube, namespace, "plain")
    assert message == (
        "0/2 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert (await wait_bound(kube, namespace, ["tolerant"]))["tolerant"] == tainted[0]
    # Uncordon: the plain pod now fits there.
    await kube.patch(f"/api/v1/nodes/{cordoned[0]}", {"spec": {"unschedulable": False}})
    assert (await wait_bound(kube, namespace, ["plain"]))["plain"] == cordoned[0]


async def test_node_selector_and_affinity(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    zone = "topology.kubernetes.io/zone"
    a = await nodes(FakeNodes(count=2, prefix=f"{namespace}-a", labels={zone: "a", "gen": "3"}))
    b = await nodes(FakeNodes(count=1, prefix=f"{namespace}-b", labels={zone: "b", "gen": "5"}))

    def required(*exprs: dict[str, Any]) -> dict[str, Any]:
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]
                }
            }
        }

    await create_pods(
        kube,
        namespace,
        [
            pause_pod("selector-b", nodeSelector={zone: "b"}),
            pause_pod(
                "notin-b", affinity=required({"key": zone, "operator": "NotIn", "values": ["b"]})
            ),
            pause_pod("gt-4", affinity=required({"key": "gen", "operator": "Gt", "values": ["4"]})),
            pause_pod(
                "prefers-b",
                affinity={
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": zone, "operator": "In", "values": ["b"]}
                                    ]
                                },
                            }
                        ]
                    }
                },
            ),
            pause_pod("nowhere", nodeSelector={zone: "c"}),
        ],
    )
    placed = await wait_bound(kube, namespace, ["selector-b", "notin-b", "gt-4", "prefers-b"])
    assert placed["selector-b"] == b[0]
    assert placed["notin-b"] in a
    assert placed["gt-4"] == b[0]
    assert placed["prefers-b"] == b[0]
    message = await wait_unschedulable(kube, namespace, "nowhere")
    assert (
        message == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


async def test_host_ports_conflict(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    port = {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}
    pods = [pause_pod(n) for n in ("web-0", "web-1")]
    for pod in pods:
        pod["spec"]["containers"][0]["ports"] = [port]
    await create_pods(kube, namespace, pods[:1])
    await wait_bound(kube, namespace, ["web-0"])
    await create_pods(kube, namespace, pods[1:])
    message = await wait_unschedulable(kube, namespace, "web-1")
    assert message == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    await kube.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/web-0", params={"gracePeriodSeconds": 0}
    )
    await wait_bound(kube, namespace, ["web-1"])


async def test_scheduling_gates_hold_the_pod_until_removed(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    await create_pods(
        kube,
        namespace,
        [
            pause_pod("gated", schedulingGates=[{"name": "example.com/wait"}]),
            pause_pod("free"),
        ],
    )
    await wait_bound(kube, namespace, ["free"])  # the scheduler is running and saw both
    gated = await get_pod(kube, namespace, "gated")
    assert node_of(gated) == ""
    assert (scheduled_condition(gated) or {}).get("reason") == "SchedulingGated"
    await kube.patch(
        f"/api/v1/namespaces/{namespace}/pods/gated", {"spec": {"schedulingGates": None}}
    )
    await wait_bound(kube, namespace, ["gated"])


async def test_no_nodes_at_all_then_bound_when_one_appears(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await create_pods(kube, namespace, [pause_pod("early")])
    assert await wait_unschedulable(kube, namespace, "early") == (
        "no nodes available to schedule pods"
    )
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    assert await wait_bound(kube, namespace, ["early"]) == {"early": node}


async def test_higher_priority_pod_gets_the_only_room(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    # Both pods wait for a scheduler that starts after them, so both enter its active queue
    # together and only PrioritySort orders them. (Pods that had already failed would also
    # carry a backoff, whose expiry orders before priority, as in kube-scheduler >= 1.33.)
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="1"))
    profile = f"{namespace}-prio"
    cls = f"{namespace}-high"
    await kube.post(
        "/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": cls}, "value": 1000}
    )
    try:
        await create_pods(
            kube,
            namespace,
            [
                pause_pod("low", cpu="1", scheduler_name=profile),
                pause_pod("high", cpu="1", scheduler_name=profile, priorityClassName=cls),
            ],
        )
        with scheduler(plane, plane_state, "ascheduler-prio", profile):
            await wait_bound(kube, namespace, ["high"])
            message = await wait_unschedulable(kube, namespace, "low")
        assert message == (
            "0/1 nodes are available: 1 Insufficient cpu. "
            f"{NO_NEW_CLAIMS}"
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
        assert node_of(await get_pod(kube, namespace, "low")) == ""
    finally:
        await kube.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{cls}")


async def test_extended_resources(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    gpu = await nodes(FakeNodes(count=1, prefix=f"{namespace}-g", extended={"nvidia.com/gpu": "2"}))
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-c"))
    await create_pods(
        kube, namespace, [pause_pod(f"train-{i}", extra={"nvidia.com/gpu": "1"}) for i in range(3)]
    )

    async def two_bound() -> list[str] | None:
        pods = await pods_in(kube, namespace)
        bound = [n for n, p in pods.items() if node_of(p)]
        return bound if len(bound) == 2 else None

    bound = await eventually(two_bound, what="two GPU pods bound")
    pods = await pods_in(kube, namespace)
    assert {node_of(pods[n]) for n in bound} == {gpu[0]}
    (waiting,) = set(pods) - set(bound)
    message = await wait_unschedulable(kube, namespace, waiting)
    # Full on the GPU node, none at all on the other: one reason, counted on both.
    assert message == (
        f"0/2 nodes are available: 2 Insufficient nvidia.com/gpu. {NO_NEW_CLAIMS}"
        "preemption: 0/2 nodes are "
        "available: 1 No preemption victims found for incoming pod, 1 Preemption is not "
        "helpful for scheduling."
    )


@pytest.mark.slow
async def test_burst_of_1000_pods_each_bound_once_and_no_node_over_capacity(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    names = await nodes(FakeNodes(count=30, prefix=f"{namespace}-n"))
    count = 1000
    pods = [pause_pod(f"b{i}") for i in range(count)]
    gate = asyncio.Semaphore(32)

    async def create(pod: dict[str, Any]) -> None:
        async with gate:
            await kube.post(f"/api/v1/namespaces/{namespace}/pods", pod)

    async with asyncio.TaskGroup() as group:
        for pod in pods:
            group.create_task(create(pod))
    placed = await wait_bound(kube, namespace, [p["metadata"]["name"] for p in pods], timeout=180)
    assert set(placed.values()) <= set(names)
    per_node = Counter(placed.values())
    # 4 cpu / 32Gi / 110 pods per node, 100m / 500Mi per pod: cpu caps a node at 40 pods.
    assert max(per_node.values()) <= 40
    assert sum(per_node.values()) == count
    cpu_per_node = {n: c * parse_resource("cpu", "100m") for n, c in per_node.items()}
    assert all(v <= parse_resource("cpu", "4") for v in cpu_per_node.values())

    async def all_events() -> list[dict[str, Any]] | None:
        events = await events_for(kube, namespace, "Scheduled")
        return events if len(events) >= count else None

    events = await eventually(all_events, what="a Scheduled event per pod", timeout=120)
    per_pod = Counter(e["regarding"]["name"] for e in events)
    assert len(per_pod) == count
    assert set(per_pod.values()) == {1}  # each pod bound exactly once


async def test_keeps_scheduling_across_an_apiserver_restart(
    ascheduler: ProcessRecord,
    plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await create_pods(kube, namespace, [pause_pod("before")])
    await wait_bound(kube, namespace, ["before"])
    plane.restart_apiserver()  # every watch drops; resuming them is answered 410 Gone
    await create_pods(kube, namespace, [pause_pod(f"after-{i}") for i in range(5)])
    await wait_bound(kube, namespace, [f"after-{i}" for i in range(5)], timeout=90)
    assert is_alive(ascheduler)


async def test_enormous_pod_is_reported_and_others_still_scheduled(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await create_pods(
        kube,
        namespace,
        [
            pause_pod(
                "enormous", cpu="100000", memory="1000Pi", extra={"example.com/unobtainium": "1"}
            ),
            *(pause_pod(f"ordinary-{i}") for i in range(3)),
        ],
    )
    await wait_bound(kube, namespace, [f"ordinary-{i}" for i in range(3)])
    message = await wait_unschedulable(kube, namespace, "enormous")
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient "
        "example.com/unobtainium, 2 Insufficient memory. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert is_alive(ascheduler)


def two_containers_of(name: str, quantity: str, *, scheduler_name: str, **spec: Any) -> Any:
    """A pod whose two containers each ask `quantity` of example.com/foo (its sum may pass
    int64 when the quantity is 4Ei)."""
    pod = pause_pod(name, scheduler_name=scheduler_name, **spec)
    container = pod["spec"]["containers"][0]
    resources = {"requests": {"example.com/foo": quantity}, "limits": {"example.com/foo": quantity}}
    pod["spec"]["containers"] = [
        {**container, "name": f"c{i}", "resources": resources} for i in range(2)
    ]
    return pod


async def test_requests_summing_past_int64_take_nothing_down(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    """Any user who can create a pod can ask 4Ei twice. Bound by hand (the informer path) it
    fills its node for good; scheduled by a profile whose Fit ignores the resource group (the
    scheduling cycle's `assume`) it is placed; in both cases the scheduler stays up, its
    accounting stays whole, and every other pod is still scheduled."""
    names = await nodes(
        FakeNodes(count=2, prefix=f"{namespace}-n", extended={"example.com/foo": "8"})
    )
    profile = f"{namespace}-ignoring"
    config = tmp_path / "ignoring.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": profile,
                        "pluginConfig": [
                            {
                                "name": "NodeResourcesFit",
                                "args": {"ignoredResourceGroups": ["example.com"]},
                            }
                        ],
                    },
                    {"schedulerName": f"{namespace}-strict"},
                ],
            }
        )
    )
    with scheduler(plane, plane_state, "ascheduler-huge", None, "--config", str(config)) as me:
        await create_pods(
            kube,
            namespace,
            [
                two_containers_of(
                    "bound-by-hand", "4Ei", scheduler_name="nobody", nodeName=names[0]
                ),
                two_containers_of(
                    "ignored",
                    "4Ei",
                    scheduler_name=profile,
                    nodeSelector={"kubernetes.io/hostname": names[0]},
                ),
            ],
        )
        assert (await wait_bound(kube, namespace, ["ignored"])) == {"ignored": names[0]}
        # The hand-bound pod fills names[0]'s example.com/foo for good: a strict profile puts a
        # small request only on the other node.
        await create_pods(
            kube,
            namespace,
            [
                two_containers_of(f"small-{i}", "1", scheduler_name=f"{namespace}-strict")
                for i in range(2)
            ],
        )
        placed = await wait_bound(kube, namespace, ["small-0", "small-1"])
        assert set(placed.values()) == {names[1]}
        assert is_alive(me)
