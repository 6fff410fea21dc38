"""`scheduling.k8s.io` PodGroups on the real plane (1.36 on): the condition ascheduler writes
on a PodGroup's status as its pod group cycle ends, and 1.37's validation of a group's
members, with a scheduler of the test's own running GenericWorkload (and, at 1.36,
GangScheduling)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.groupstatus import condition_type
from ascheduler.kube import KubeClient
from ascheduler.model.podgroups import scheduling_group_api
from tests.integration.conftest import NodeFactory
from tests.integration.differential.harness import plane_release
from tests.integration.helpers import (
    create_pods,
    eventually,
    get_pod,
    pause_pod,
    plane_since,
    priority_classes,
    scheduled_condition,
    scheduler,
    wait_bound,
)

pytestmark = pytest.mark.skipif(not plane_since(1, 36), reason="PodGroup objects from 1.36")

RELEASE = plane_release()
NAME = "pg-status"
CONDITION = condition_type(RELEASE)
GATES = "GenericWorkload=true" if plane_since(1, 37) else "GenericWorkload=true,GangScheduling=true"


@pytest.fixture(scope="module")
def group_scheduler(plane: ControlPlane, plane_state: PlaneState) -> Iterator[ProcessRecord]:
    with scheduler(
        plane, plane_state, NAME, NAME, "--no-leader-elect", f"--feature-gates={GATES}"
    ) as record:
        yield record


def groups(namespace: str) -> str:
    api = scheduling_group_api(RELEASE)
    assert api is not None
    return api.replace("/podgroups", f"/namespaces/{namespace}/podgroups")


async def pod_group(
    kube: KubeClient, namespace: str, name: str, min_count: int | None, **spec: Any
) -> None:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    await kube.post(
        groups(namespace),
        {"metadata": {"name": name}, "spec": {"schedulingPolicy": policy, **spec}},
    )


def member(name: str, group: str, *, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return pause_pod(
        name, scheduler_name=NAME, cpu=cpu, schedulingGroup={"podGroupName": group}, **spec
    )


async def condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    body = await kube.get(f"{groups(namespace)}/{name}")
    for c in (body.get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION:
            return {**c, "generation": body["metadata"].get("generation")}
    return None


async def wait_condition(
    kube: KubeClient, namespace: str, name: str, status: str
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        found = await condition(kube, namespace, name)
        return found if found is not None and found["status"] == status else None

    return await eventually(probe, what=f"PodGroup {name} {CONDITION}={status}")


async def test_a_gang_placed_whole_is_scheduled_for_good(
    group_scheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2"))
    await pod_group(kube, namespace, "train", 2)
    await create_pods(kube, namespace, [member(f"w-{i}", "train") for i in range(2)])
    await wait_bound(kube, namespace, ["w-0", "w-1"])
    scheduled = await wait_condition(kube, namespace, "train", "True")
    assert (scheduled["reason"], scheduled["message"]) == ("Scheduled", "")
    # (PodGroups carry no metadata.generation: observedGeneration is 0, left out, too.)
    assert scheduled.get("observedGeneration", 0) == (scheduled["generation"] or 0)
    assert scheduled["lastTransitionTime"]
    # A member added later that fits nowhere: its group's cycle fails, but a True stays.
    await create_pods(kube, namespace, [member("w-2", "train", cpu="100")])

    async def refused() -> bool:
        found = scheduled_condition(await get_pod(kube, namespace, "w-2"))
        return found is not None and found.get("status") == "False"

    await eventually(refused, what="the late member refused")
    assert await condition(kube, namespace, "train") == scheduled


async def test_a_gang_out_of_reach_is_unschedulable_with_the_releases_words(
    group_scheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2"))
    await pod_group(kube, namespace, "big", 3)
    await create_pods(kube, namespace, [member(f"b-{i}", "big", cpu="100") for i in range(3)])
    found = await wait_condition(kube, namespace, "big", "False")
    assert found["reason"] == "Unschedulable"
    if plane_since(1, 37):
        # The first member fits nowhere: two remain, too few for three (the cycle keeps
        # GangScheduling's PlacementFeasible verdict as is, then the group preemption's).
        assert found["message"] == (
            "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )
    else:
        assert found["message"] == "pod group is unschedulable"
    assert found.get("observedGeneration", 0) == (found["generation"] or 0)


async def test_members_whose_priority_is_not_their_groups_fail_the_group_at_137(
    group_scheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2"))
    async with priority_classes(kube, {"pg-status-high": 1000}):
        await pod_group(kube, namespace, "mixed", 2)
        await create_pods(
            kube,
            namespace,
            [member(f"m-{i}", "mixed", priorityClassName="pg-status-high") for i in range(2)],
        )
        if not plane_since(1, 37):
            # 1.36 checks only the members' schedulerName: the group is placed.
            await wait_bound(kube, namespace, ["m-0", "m-1"])
            await wait_condition(kube, namespace, "mixed", "True")
            return
        found = await wait_condition(kube, namespace, "mixed", "False")
        message = (
            "all pods in a single pod group should have the same priority as the pod group's "
            "priority, got 1000 and 0"
        )
        assert (found["reason"], found["message"]) == ("SchedulerError", message)
        for name in ("m-0", "m-1"):

            async def failed(pod: str = name) -> dict[str, Any] | None:
                found = scheduled_condition(await get_pod(kube, namespace, pod))
                return found if found and found.get("reason") == "SchedulerError" else None

            pod_condition = await eventually(failed, what=f"{name} failed with its group")
            assert pod_condition["message"] == message
