"""Gangs on the real plane: scheduler-plugins' PodGroups (the plane installs the CRD) placed
all or nothing by the Coscheduling plugin of the session's scheduler."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from ascheduler.model.podgroups import POD_GROUP_LABEL
from benchmarks.common import OPEN_METRICS
from benchmarks.locks import binds_per_hold
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    lock_annotations,
    pause_pod,
    pods_in,
    scheduler,
    wait_bound,
    wait_unschedulable,
)

GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{}/podgroups"


async def pod_group(
    kube: KubeClient, namespace: str, name: str, min_member: int, **spec: Any
) -> None:
    await kube.post(
        GROUPS.format(namespace),
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member, **spec},
        },
    )


def member(name: str, group: str, *, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    body = pause_pod(name, cpu=cpu, memory="100Mi", **spec)
    body["metadata"]["labels"] = {POD_GROUP_LABEL: group}
    return body


async def bound(kube: KubeClient, namespace: str) -> dict[str, str]:
    pods = await pods_in(kube, namespace)
    return {n: p["spec"]["nodeName"] for n, p in pods.items() if p["spec"].get("nodeName")}


async def group_events(kube: KubeClient, namespace: str, reason: str) -> list[str]:
    body = await kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return [
        str(e.get("note", ""))
        for e in body["items"]
        if e.get("reason") == reason and e["regarding"].get("kind") == "PodGroup"
    ]


async def test_a_group_waits_for_its_last_member_then_binds_whole(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="4"))
    await pod_group(kube, namespace, "train", 4)
    await create_pods(kube, namespace, [member(f"w-{i}", "train") for i in range(3)])
    # An ordinary pod created after them is scheduled: the three were seen and held.
    await create_pods(kube, namespace, [pause_pod("canary", cpu="100m", memory="10Mi")])
    await wait_bound(kube, namespace, ["canary"])
    assert set(await bound(kube, namespace)) == {"canary"}

    async def waiting() -> dict[str, Any] | None:
        st = (await kube.get(f"{GROUPS.format(namespace)}/train")).get("status") or {}
        return st if st.get("conditions") else None

    # Still short of its quorum 5 s after its members came: the status and an event say so.
    st = await eventually(waiting, what="the PodGroup's status saying it waits")
    assert (st["phase"], st["scheduled"]) == ("Pending", 0)
    (cond,) = st["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == "3/4 members exist; waiting for 1 more before any is placed"
    notes = await eventually(
        lambda: group_events(kube, namespace, "GangWaiting"), what="a GangWaiting event"
    )
    assert notes == [f"PodGroup {namespace}/train: waiting for 4 members before any is placed"]
    assert set(await bound(kube, namespace)) == {"canary"}

    await create_pods(kube, namespace, [member("w-3", "train")])
    placed = await wait_bound(kube, namespace, [f"w-{i}" for i in range(4)])
    assert len(placed) == 4

    async def status(count: int) -> dict[str, Any] | None:
        body = await kube.get(f"{GROUPS.format(namespace)}/train")
        st = body.get("status") or {}
        return st if st.get("scheduled") == count else None

    st = await eventually(lambda: status(4), what="the PodGroup's status counting 4 scheduled")
    assert st["phase"] == "Scheduled"
    (cond,) = st["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupScheduled",
        "True",
        "Scheduled",
    )
    assert cond["message"] == "4/4 members placed together"
    notes = await eventually(
        lambda: group_events(kube, namespace, "GangScheduled"), what="a GangScheduled event"
    )
    assert notes == [f"PodGroup {namespace}/train: 4/4 members placed together"]
    # A member added once the group is placed binds at once, and is counted.
    await create_pods(kube, namespace, [member("w-4", "train")])
    await wait_bound(kube, namespace, ["w-4"])
    st = await eventually(lambda: status(5), what="the PodGroup's status counting 5 scheduled")
    assert st["phase"] == "Scheduled"
    assert is_alive(ascheduler)


async def test_a_group_that_can_never_fit_binds_none_and_holds_nothing(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="4"))
    await pod_group(kube, namespace, "big", 5)
    await create_pods(kube, namespace, [member(f"g-{i}", "big") for i in range(5)])
    message = await wait_unschedulable(kube, namespace, "g-0")
    # The round's verdict, or (tried again while the group waits before its next round) that.
    doomed = "members fit; member g-" in message and "Insufficient cpu" in message
    assert doomed or f"PodGroup {namespace}/big failed recently (member " in message, message

    # The room the group could not use is free for others at once.
    others = [pause_pod(f"o-{i}", cpu="1", memory="100Mi") for i in range(4)]
    await create_pods(kube, namespace, others)
    placed = await wait_bound(kube, namespace, [f"o-{i}" for i in range(4)])
    assert set(placed.values()) == {node}
    assert not any(n.startswith("g-") for n in await bound(kube, namespace))
    notes = await eventually(
        lambda: group_events(kube, namespace, "GangUnschedulable"),
        what="a GangUnschedulable event on the PodGroup",
    )
    assert any("members fit; member g-" in n and "Insufficient cpu" in n for n in notes), notes

    async def failed() -> dict[str, Any] | None:
        st = (await kube.get(f"{GROUPS.format(namespace)}/big")).get("status") or {}
        conditions = st.get("conditions") or [{}]
        return conditions[0] if conditions[0].get("status") == "False" else None

    cond = await eventually(failed, what="a PodGroupScheduled condition saying False")
    assert (cond["type"], cond["reason"]) == ("PodGroupScheduled", "Unschedulable")
    pattern = r"[0-4]/5 members fit; member g-\d: 0/1 nodes are available: 1 Insufficient cpu\."
    assert re.fullmatch(pattern, cond["message"]), cond
    assert is_alive(ascheduler)


async def test_a_group_times_out_together_and_is_retried_whole(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="4"))
    await pod_group(kube, namespace, "slow", 3, scheduleTimeoutSeconds=2)
    # The third member belongs to a scheduler that does not run: the other two wait for it.
    await create_pods(
        kube,
        namespace,
        [
            member("a", "slow"),
            member("b", "slow"),
            member("c", "slow", scheduler_name="nobody"),
        ],
    )
    timeout = "rejected due to timeout after waiting 2s at plugin Coscheduling"
    for name in ("a", "b"):
        message = await wait_unschedulable(kube, namespace, name)
        # The rejection, or the group backing off from it as a whole: either names it.
        assert timeout in message
    assert await bound(kube, namespace) == {}
    notes = await eventually(
        lambda: group_events(kube, namespace, "GangTimeout"), what="a GangTimeout event"
    )
    assert notes[0].startswith(f"PodGroup {namespace}/slow: timed out after 2s with 0/3 members")

    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/c")
    await create_pods(kube, namespace, [member("c2", "slow")])
    await wait_bound(kube, namespace, ["a", "b", "c2"])
    assert is_alive(ascheduler)


async def test_deleting_a_waiting_member_releases_its_siblings(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="3"))
    await pod_group(kube, namespace, "job", 3, scheduleTimeoutSeconds=600)
    await create_pods(
        kube,
        namespace,
        [member("a", "job"), member("b", "job"), member("c", "job", scheduler_name="nobody")],
    )

    # a and b wait on Permit, each holding a cpu; only one more fits.
    await create_pods(kube, namespace, [pause_pod("x", cpu="1", memory="10Mi")])
    await wait_bound(kube, namespace, ["x"])
    await create_pods(kube, namespace, [pause_pod("y", cpu="2", memory="10Mi")])
    await wait_unschedulable(kube, namespace, "y")

    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/a")
    # b gives its cpu back with a (y needs both), long before the group's timeout.
    await wait_bound(kube, namespace, ["y"], timeout=120)
    message = await wait_unschedulable(kube, namespace, "b")
    # Let go with a, then (retried at once: room appeared) turned away for want of a third.
    assert (
        message.startswith("rejected with member a")
        or f"PodGroup {namespace}/job has 2 of the 3 pods it needs (minMember)" in message
    ), message
    assert set(await bound(kube, namespace)) == {"x", "y"}

    # Room again, and the missing members replaced: the group is placed whole.
    for name in ("x", "y", "c"):
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    await create_pods(kube, namespace, [member("a2", "job"), member("c2", "job")])
    await wait_bound(kube, namespace, ["a2", "b", "c2"], timeout=120)
    assert is_alive(ascheduler)


async def test_fifty_groups_competing_for_room_for_thirty_are_placed_whole_or_not_at_all(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    # 10 nodes of 24 cpu: room for 240 one-cpu pods, 30 groups of 8.
    await nodes(FakeNodes(count=10, prefix=f"{namespace}-n", cpu="24", pods=110))
    groups, size = 50, 8
    for g in range(groups):
        await pod_group(kube, namespace, f"pg-{g}", size)
    await asyncio.gather(
        *(
            create_pods(kube, namespace, [member(f"pg-{g}-{i}", f"pg-{g}") for i in range(size)])
            for g in range(groups)
        )
    )

    async def settled() -> dict[str, str] | None:
        placed = await bound(kube, namespace)
        return placed if len(placed) == 30 * size else None

    placed = await eventually(settled, what="30 groups bound", timeout=180)
    per_group: dict[str, int] = {}
    for name in placed:
        group = name.rsplit("-", 1)[0]
        per_group[group] = per_group.get(group, 0) + 1
    assert set(per_group.values()) == {size}, per_group  # no partial group
    assert len(per_group) == 30
    # Nothing more lands later: the 20 groups left over stay whole and pending.
    await create_pods(kube, namespace, [pause_pod("late", cpu="100m", memory="10Mi")])
    await wait_unschedulable(kube, namespace, "late")
    assert len(await bound(kube, namespace)) == 30 * size
    assert is_alive(ascheduler)


async def lock_holds(port: int) -> tuple[float, float]:
    """(holds, binds) so far of the scheduler serving `port`."""
    seen = await binds_per_hold(port)
    return seen["holds"], seen["binds"]


async def test_members_bound_to_one_node_share_one_lock_hold_and_a_rejected_group_takes_none(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="4"))
    profile = f"{namespace}-locked"
    port = free_port()
    with scheduler(
        plane,
        plane_state,
        "ascheduler-gang-locks",
        profile,
        "--node-lock-policy",
        "all",
        OPEN_METRICS,
        secure_port=port,
    ):

        async def serving() -> bool:
            try:
                await lock_holds(port)
                return True
            except aiohttp.ClientError:
                return False

        await eventually(serving, what="the scheduler's metrics endpoint")
        # A group that can never fit (5 members, room for 4) is rejected before any bind:
        # it takes no lock and leaves none behind.
        await pod_group(kube, namespace, "big", 5)
        await create_pods(
            kube,
            namespace,
            [member(f"g-{i}", "big", scheduler_name=profile) for i in range(5)],
        )
        await wait_unschedulable(kube, namespace, "g-0")
        assert await lock_holds(port) == (0.0, 0.0)
        assert await lock_annotations(kube, [node]) == {}

        # Room for the group of 4 once the big one is gone: its members, let go together at
        # Permit, bind to the one node under a single hold.
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": 0}
        )
        await pod_group(kube, namespace, "four", 4)
        await create_pods(
            kube,
            namespace,
            [member(f"f-{i}", "four", scheduler_name=profile) for i in range(4)],
        )
        placed = await wait_bound(kube, namespace, [f"f-{i}" for i in range(4)])
        assert set(placed.values()) == {node}
        assert await lock_holds(port) == (1.0, 4.0)

        async def released() -> bool:  # once its linger is over
            return await lock_annotations(kube, [node]) == {}

        assert await eventually(released, what="the node's lock released", timeout=60)
