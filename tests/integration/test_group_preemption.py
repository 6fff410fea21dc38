"""Workload-aware preemption on the real plane (1.37, GenericWorkload): a gang that fits only
once lower-priority pods are gone evicts them as one preemption (kube-scheduler's
DisruptionTarget for a `podgroup`, `Preempted` events naming the PodGroup), keeps the
victims it does not need, and is then bound whole; a victim PodGroup whose disruption mode
is `all` goes whole or not at all."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    events_for,
    eventually,
    pause_pod,
    plane_since,
    pods_in,
    priority_classes,
    scheduler,
    wait_bound,
)
from tests.integration.test_podgroup_status import groups, pod_group, wait_condition
from tests.integration.test_preemption import gone_or_going

pytestmark = pytest.mark.skipif(not plane_since(1, 37), reason="workload-aware preemption: 1.37")

NAME = "group-preemption"
CLASSES = {"gp-low": 10, "gp-mid": 20, "gp-high": 1000}


@pytest.fixture(scope="module")
def group_scheduler(plane: ControlPlane, plane_state: PlaneState) -> Iterator[ProcessRecord]:
    with scheduler(
        plane, plane_state, NAME, NAME, "--no-leader-elect", "--feature-gates=GenericWorkload=true"
    ) as record:
        yield record


@pytest.fixture
async def classes(kube: KubeClient) -> AsyncIterator[None]:
    async with priority_classes(kube, CLASSES):
        yield


def pod(name: str, cls: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return pause_pod(
        name, scheduler_name=NAME, cpu=cpu, memory="100Mi", priorityClassName=cls, **spec
    )


def on(node: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}}


def within(names: list[str]) -> dict[str, Any]:
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": names}]
    }
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    }


async def test_a_gang_evicts_what_it_needs_and_is_bound_whole(
    group_scheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    classes: None,
) -> None:
    a, b = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2"))
    # a: two low pods; b: a mid pod and a low one. The gang needs all of a, and 1 CPU on
    # either: every lower-priority pod is taken off, both members placed (w-small then fits
    # only on b), and the victims reprieved, the most important first: mid-b stays (w-small
    # still fits beside it), low-b then does not.
    await create_pods(
        kube,
        namespace,
        [
            pod("low-a0", "gp-low", "1", **on(a)),
            pod("low-a1", "gp-low", "1", **on(a)),
            pod("mid-b", "gp-mid", "1", **on(b)),
            pod("low-b", "gp-low", "1", **on(b)),
        ],
    )
    await wait_bound(kube, namespace, ["low-a0", "low-a1", "mid-b", "low-b"])
    await pod_group(kube, namespace, "train", 2, priorityClassName="gp-high")
    await create_pods(
        kube,
        namespace,
        [
            pod("w-big", "gp-high", "2", schedulingGroup={"podGroupName": "train"}, **on(a)),
            pod(
                "w-small",
                "gp-high",
                "1",
                schedulingGroup={"podGroupName": "train"},
                **within([a, b]),
            ),
        ],
    )
    placed = await wait_bound(kube, namespace, ["w-big", "w-small"], timeout=120)
    assert placed == {"w-big": a, "w-small": b}
    for victim in ("low-a0", "low-a1", "low-b"):
        assert await gone_or_going(kube, namespace, victim)
    pods = await pods_in(kube, namespace)
    assert not pods["mid-b"]["metadata"].get("deletionTimestamp")  # reprieved
    group = await kube.get(f"{groups(namespace)}/train")
    events = await eventually(
        lambda: events_for(kube, namespace, "Preempted"), what="Preempted events"
    )
    assert sorted(e["regarding"]["name"] for e in events) == ["low-a0", "low-a1", "low-b"]
    assert {e["note"] for e in events} == {
        f"Preempted by podgroup {group['metadata']['uid']} on node cluster"
    }
    assert {e["related"]["kind"] for e in events} == {"PodGroup"}
    assert (await wait_condition(kube, namespace, "train", "True"))["reason"] == "Scheduled"
    assert is_alive(group_scheduler)


async def test_a_victim_group_that_goes_whole_takes_all_its_pods(
    group_scheduler: ProcessRecord,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    classes: None,
) -> None:
    a, b = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="1"))
    # A low gang disrupted as a whole, one pod on each node; the preemptor needs one node.
    await pod_group(
        kube, namespace, "batch", 2, priorityClassName="gp-low", disruptionMode={"all": {}}
    )
    await create_pods(
        kube,
        namespace,
        [
            pod(f"batch-{i}", "gp-low", "1", schedulingGroup={"podGroupName": "batch"}, **on(n))
            for i, n in enumerate((a, b))
        ],
    )
    await wait_bound(kube, namespace, ["batch-0", "batch-1"])
    await pod_group(kube, namespace, "solo", 1, priorityClassName="gp-high")
    await create_pods(
        kube,
        namespace,
        [pod("vip", "gp-high", "1", schedulingGroup={"podGroupName": "solo"}, **on(a))],
    )
    assert (await wait_bound(kube, namespace, ["vip"], timeout=120))["vip"] == a
    # Both pods of the victim group went, though only the one on a was in the way.
    assert await gone_or_going(kube, namespace, "batch-0")
    assert await eventually(
        lambda: gone_or_going(kube, namespace, "batch-1"), what="batch-1 preempted with its group"
    )
    assert is_alive(group_scheduler)
