"""Preemption on the real plane: victims get kube-scheduler's DisruptionTarget condition, are
deleted and told (`Preempted`), the preemptor is nominated and then bound; a budget that
covers every victim, priorities at int32's ends, and a victim a finalizer keeps terminating
neither crash the scheduler nor stall it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ascheduler.devcluster import versions
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.features import Release
from ascheduler.kube import ApiError, KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    events_for,
    eventually,
    get_pod,
    pause_pod,
    pods_in,
    priority_classes,
    wait_bound,
)

CLASSES = {"it-lowest": -2147483648, "it-low": 10, "it-top": 1000000000}


@pytest.fixture
async def classes(kube: KubeClient) -> AsyncIterator[None]:
    async with priority_classes(kube, CLASSES):
        yield


def prio(name: str, cls: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return pause_pod(name, cpu=cpu, memory="100Mi", priorityClassName=f"it-{cls}", **spec)


async def gone_or_going(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        pod = await get_pod(kube, namespace, name)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return bool(pod["metadata"].get("deletionTimestamp"))


async def test_a_high_priority_pod_evicts_the_least_important_and_takes_its_place(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory, classes: None
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="2"))
    await create_pods(kube, namespace, [prio("lowest", "lowest", "1"), prio("low", "low", "1")])
    await wait_bound(kube, namespace, ["lowest", "low"])
    await create_pods(kube, namespace, [prio("vip", "top", "1")])

    async def nominated() -> str:
        pod = await get_pod(kube, namespace, "vip")
        status = pod.get("status", {})
        return str(status.get("nominatedNodeName") or pod["spec"].get("nodeName") or "")

    assert await eventually(nominated, what="vip nominated") == node
    placed = await wait_bound(kube, namespace, ["vip"])
    assert placed["vip"] == node
    assert await gone_or_going(kube, namespace, "lowest")  # int32's lowest priority goes
    pods = await pods_in(kube, namespace)
    assert pods["low"]["spec"]["nodeName"] == node  # reprieved: one victim was enough
    assert not pods["low"]["metadata"].get("deletionTimestamp")
    events = await eventually(
        lambda: events_for(kube, namespace, "Preempted"), what="a Preempted event"
    )
    assert [e["regarding"]["name"] for e in events] == ["lowest"]
    assert events[0]["note"] == f"Preempted by pod {pods['vip']['metadata']['uid']} on node {node}"
    # The preemptor's failure: from 1.37 it ends with where preemption made room.
    failed = await eventually(
        lambda: events_for(kube, namespace, "FailedScheduling"), what="vip's FailedScheduling"
    )
    found = ""
    if Release.parse(versions.release().kubernetes) >= Release(1, 37):
        found = (
            f" preemption: found a potential placement for pod on node {node}, preempting 1 victims"
        )
    first = min(failed, key=lambda e: str(e.get("eventTime") or ""))
    assert first["note"] == f"0/1 nodes are available: 1 Insufficient cpu.{found}"
    assert is_alive(ascheduler)


async def test_a_budget_covering_every_victim_is_weighed_not_obeyed(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory, classes: None
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="1"))
    everything = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    await kube.post(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {"metadata": {"name": "all"}, "spec": {"minAvailable": "100%", "selector": everything}},
    )
    guarded = prio("guarded", "low", "1")
    guarded["metadata"]["labels"] = {"app": "web"}
    await create_pods(kube, namespace, [guarded])
    await wait_bound(kube, namespace, ["guarded"])
    await create_pods(kube, namespace, [prio("vip", "top", "1")])
    # kube-scheduler's rule: a budget only ranks candidates; the only node is still used.
    assert (await wait_bound(kube, namespace, ["vip"], timeout=90))["vip"] == node
    assert await gone_or_going(kube, namespace, "guarded")
    assert is_alive(ascheduler)


async def test_a_victim_kept_by_a_finalizer_holds_its_preemptor_not_the_scheduler(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory, classes: None
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-full", cpu="1"))
    stuck = prio("stuck", "low", "1")
    stuck["metadata"]["finalizers"] = ["example.com/keep"]
    await create_pods(kube, namespace, [stuck])
    await wait_bound(kube, namespace, ["stuck"])
    try:
        await create_pods(kube, namespace, [prio("vip", "top", "1")])
        await eventually(
            lambda: gone_or_going(kube, namespace, "stuck"), what="the victim terminating"
        )
        # Nothing moves the preemptor while its victim terminates (kube-scheduler leaves it
        # to the events that may help it); a new node is such an event. That node is tainted:
        # the preemptor may not use it, pods that tolerate the taint may.
        taint = {"key": "dedicated", "value": "bystanders", "effect": "NoSchedule"}
        (other,) = await nodes(
            FakeNodes(count=1, prefix=f"{namespace}-free", cpu="1", taints=[taint])
        )

        async def waiting_message() -> str:
            pod = await get_pod(kube, namespace, "vip")
            for c in pod.get("status", {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and "terminating pod" in c.get("message", ""):
                    return str(c["message"])
            return ""

        message = await eventually(waiting_message, what="vip waiting on its victim")
        assert message.endswith(
            "preemption: not eligible due to a terminating pod on the nominated node."
        )
        # Everything else is still scheduled meanwhile.
        toleration = {**taint, "operator": "Equal"}
        await create_pods(
            kube, namespace, [prio("bystander", "low", "500m", tolerations=[toleration])]
        )
        assert (await wait_bound(kube, namespace, ["bystander"]))["bystander"] == other
        assert node_of_pod(await get_pod(kube, namespace, "vip")) == ""
    finally:
        await kube.patch(
            f"/api/v1/namespaces/{namespace}/pods/stuck", {"metadata": {"finalizers": None}}
        )
    # The finalizer gone, the victim is gone, and the preemptor takes its place.
    await wait_bound(kube, namespace, ["vip"], timeout=90)
    assert is_alive(ascheduler)


def node_of_pod(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


async def test_a_victim_in_pre_bind_is_cancelled_from_1_36_and_deleted_before(
    ascheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    classes: None,
    cluster_objects: list[str],
) -> None:
    """A victim whose binding cycle waits in VolumeBinding's PreBind (its claim's class has
    no provisioner, so the wait lasts): from 1.36 kube-scheduler cancels that binding in
    memory (the pod stays, fails with the cancellation's cause and is told `in
    kube-scheduler memory`); 1.35 deletes it through the API. The preemptor is bound."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="1"))
    klass = f"{namespace}-never"
    await kube.post(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": klass},
            "provisioner": "example.com/never",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    cluster_objects.append(f"/apis/storage.k8s.io/v1/storageclasses/{klass}")
    await kube.post(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": klass,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    victim = prio("binding", "low", "1")
    victim["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    await create_pods(kube, namespace, [victim])

    async def selected() -> str:
        claim = await kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
        annotations = claim["metadata"].get("annotations") or {}
        return str(annotations.get("volume.kubernetes.io/selected-node", ""))

    # PreBind wrote the claim's node: the victim's binding cycle now waits for a provisioner.
    assert await eventually(selected, what="the claim's selected node") == node
    await create_pods(kube, namespace, [prio("vip", "top", "1")])
    assert (await wait_bound(kube, namespace, ["vip"], timeout=90))["vip"] == node
    events = await eventually(
        lambda: events_for(kube, namespace, "Preempted"), what="a Preempted event"
    )
    vip = await get_pod(kube, namespace, "vip")
    note = f"Preempted by pod {vip['metadata']['uid']} on node {node}"
    if Release.parse(versions.release().kubernetes) < Release(1, 36):
        assert [e["note"] for e in events] == [note]
        assert await gone_or_going(kube, namespace, "binding")
        assert is_alive(ascheduler)
        return
    assert [e["note"] for e in events] == [note + " (in kube-scheduler memory)."]
    cause = 'running PreBind plugin "VolumeBinding": preempted by DefaultPreemption'

    async def failed() -> list[str]:
        # The event, not the condition: the victim's next attempt (unschedulable, the node
        # taken) overwrites the condition.
        events = await events_for(kube, namespace, "FailedScheduling")
        return [e["note"] for e in events if e["regarding"]["name"] == "binding"]

    assert cause in await eventually(failed, what="the victim's cancelled binding")
    pod = await get_pod(kube, namespace, "binding")
    assert not pod["metadata"].get("deletionTimestamp")  # no API call deleted it
    assert node_of_pod(pod) == ""
    assert is_alive(ascheduler)
