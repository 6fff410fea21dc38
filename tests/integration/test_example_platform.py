"""The example plugin package examples/platform, installed as a user would install it and
enabled by name in a configuration file: SpotAvoidance (columnar over the node table) and
TeamQuota (PreFilter state, Permit, queueing hints) change what the real plane's pods do."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    eventually,
    get_pod,
    node_of,
    pause_pod,
    scheduled_condition,
    scheduler,
    wait_bound,
    wait_unschedulable,
)

CAPACITY = "example.com/capacity-type"
RATE = "example.com/interruption-rate"
RECLAIMING = "example.com/reclaiming"
TEAM = "example.com/team"


def profile(name: str, plugin: str, args: dict[str, Any], weight: int = 1) -> dict[str, Any]:
    return {
        "schedulerName": name,
        "plugins": {"multiPoint": {"enabled": [{"name": plugin, "weight": weight}]}},
        "pluginConfig": [{"name": plugin, "args": args}],
    }


def labelled(body: dict[str, Any], labels: dict[str, str] | None) -> dict[str, Any]:
    if labels:
        body["metadata"]["labels"] = labels
    return body


def write_config(path: Path, *profiles: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": list(profiles),
            }
        )
    )
    return path


def unresolvable(reason: str) -> str:
    """The message of a pod pinned to one of 4 nodes that SpotAvoidance rejects."""
    return (
        f"0/4 nodes are available: {reason}, 3 node(s) didn't match Pod's node "
        f"affinity/selector. {NO_NEW_CLAIMS}preemption: 0/4 nodes are available: "
        "4 Preemption is not helpful for scheduling."
    )


async def test_spot_avoidance_changes_placements_on_the_plane(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    async def one(suffix: str, labels: dict[str, str]) -> str:
        (name,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-{suffix}", labels=labels))
        return name

    steady = await one("steady", {RATE: "0"})
    flaky = await one("flaky", {RATE: "90"})
    spot = await one("spot", {CAPACITY: "spot", RATE: "0"})
    reclaiming = await one("reclaiming", {RECLAIMING: "soon", RATE: "0"})
    name = f"{namespace}-spot"
    config = write_config(tmp_path / "config.yaml", profile(name, "SpotAvoidance", {}, 10))
    with scheduler(plane, plane_state, "ascheduler-spot", None, "--config", str(config)):
        await create_pods(
            kube, namespace, [pause_pod(f"p{i}", scheduler_name=name) for i in range(3)]
        )
        placed = await wait_bound(kube, namespace, ["p0", "p1", "p2"])
        # Off spot and reclaiming nodes, and on the steadiest of the rest, whatever the spread.
        assert set(placed.values()) == {steady}

        tolerant = {"example.com/spot-tolerant": "true"}
        await create_pods(
            kube,
            namespace,
            [
                labelled(
                    pause_pod(
                        "on-spot",
                        scheduler_name=name,
                        nodeSelector={"kubernetes.io/hostname": spot},
                    ),
                    tolerant,
                ),
                pause_pod(
                    "refused", scheduler_name=name, nodeSelector={"kubernetes.io/hostname": spot}
                ),
                labelled(
                    pause_pod(
                        "pinned",
                        scheduler_name=name,
                        nodeSelector={"kubernetes.io/hostname": reclaiming},
                    ),
                    tolerant,
                ),
            ],
        )
        assert await wait_bound(kube, namespace, ["on-spot"]) == {"on-spot": spot}
        refused = await wait_unschedulable(kube, namespace, "refused")
        assert refused == unresolvable("1 node(s) are spot capacity the pod does not tolerate")
        pinned = await wait_unschedulable(kube, namespace, "pinned")
        assert pinned == unresolvable("1 node(s) are being reclaimed")
        # Reclaiming called off: the label's removal is the event SpotAvoidance registered.
        await kube.patch(
            f"/api/v1/nodes/{reclaiming}", {"metadata": {"labels": {RECLAIMING: None}}}
        )
        assert await wait_bound(kube, namespace, ["pinned"]) == {"pinned": reclaiming}
    assert flaky not in placed.values()


def team_pod(name: str, profile_name: str, team: str | None) -> dict[str, Any]:
    labels = {TEAM: team} if team is not None else None
    return labelled(pause_pod(name, scheduler_name=profile_name), labels)


async def delete_pod(kube: KubeClient, namespace: str, name: str) -> None:
    await kube.request(
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        params={"gracePeriodSeconds": 0},
    )


async def waits_at_permit(record: ProcessRecord, namespace: str, name: str) -> None:
    """Until the scheduler's log says the pod waits at TeamQuota's Permit."""
    needle = f"pod {namespace}/{name} of team"

    async def said() -> bool:
        text = await asyncio.to_thread(Path(record.log).read_text, errors="replace")
        return any(needle in line and "waits at Permit" in line for line in text.splitlines())

    await eventually(said, what=f"{name} waiting at Permit")


async def test_team_quota_holds_pods_at_permit_and_lets_them_go(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    (shared,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-shared"))
    (dedicated,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-ml", labels={TEAM: "ml"}))
    hold, brief = f"{namespace}-hold", f"{namespace}-brief"
    config = write_config(
        tmp_path / "config.yaml",
        profile(hold, "TeamQuota", {"quotas": {"ml": 1}, "recheckSeconds": 0.2}),
        profile(brief, "TeamQuota", {"quotas": {"web": 1}, "permitWaitSeconds": 2}),
    )
    with scheduler(
        plane, plane_state, "ascheduler-teamquota", None, "--config", str(config)
    ) as record:
        # Filter: pods of no team stay off the node dedicated to ml, whatever the spread.
        await create_pods(kube, namespace, [team_pod(f"t{i}", hold, None) for i in range(3)])
        placed = await wait_bound(kube, namespace, ["t0", "t1", "t2"])
        assert set(placed.values()) == {shared}

        # Permit: ml runs its quota of one; the next ml pod holds its node until it ends.
        await create_pods(kube, namespace, [team_pod("a1", hold, "ml")])
        await wait_bound(kube, namespace, ["a1"])
        await create_pods(kube, namespace, [team_pod("a2", hold, "ml")])
        await waits_at_permit(record, namespace, "a2")
        held = await get_pod(kube, namespace, "a2")
        assert node_of(held) == ""
        assert scheduled_condition(held) is None  # waiting, not rejected
        await delete_pod(kube, namespace, "a1")
        await wait_bound(kube, namespace, ["a2"])

        # A pod that waits past permitWaitSeconds is rejected; a pod of its own team ending
        # is the event its queueing hint lets through, and it is placed.
        await create_pods(kube, namespace, [team_pod("b1", brief, "web")])
        assert await wait_bound(kube, namespace, ["b1"]) == {"b1": shared}
        await create_pods(kube, namespace, [team_pod("b2", brief, "web")])
        message = await wait_unschedulable(kube, namespace, "b2")
        assert "rejected due to timeout after waiting 2s at plugin TeamQuota" in message
        await delete_pod(kube, namespace, "b1")
        assert await wait_bound(kube, namespace, ["b2"]) == {"b2": shared}
    assert dedicated not in placed.values()
