"""Sharding mode on the real plane: three active instances of one scheduler name split the
pods, one is killed with SIGKILL mid-run, and still every pod is bound once, no node is
overcommitted, and the dead member's share is taken over once its Lease expires; a member
stopped gracefully hands its share over at once, its Lease deleted."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import ApiError, KubeClient
from ascheduler.shards import owner
from ascheduler.shards.members import GROUP_LABEL
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    LOCK_NAMESPACE,
    create_pods,
    eventually,
    node_of,
    pause_pod,
    pods_in,
    scheduler,
    wait_bound,
)

GPU = "nvidia.com/gpu"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases"


def log_events(record: ProcessRecord, event: str) -> list[dict[str, Any]]:
    """The instance's JSON log lines of `event`."""
    found = []
    for line in Path(record.log).read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == event:
                found.append(entry)
    return found


async def group_leases(kube: KubeClient, group: str) -> dict[str, str]:
    """The sharding group's member Leases: name -> holder."""
    listing = await kube.get(LEASES, params={"labelSelector": f"{GROUP_LABEL}={group}"})
    return {
        item["metadata"]["name"]: item["spec"].get("holderIdentity", "")
        for item in listing.get("items") or []
    }


async def test_members_split_the_pods_and_survive_one_killed_mid_run(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    """28 GPU pods for 24 GPUs on 6 nodes, then a node for the last 4; the first wave is
    being bound when one of the three members is killed -9, the second wave comes after."""
    per_node = 4
    names = await nodes(FakeNodes(count=6, prefix=f"{namespace}-g", extended={GPU: str(per_node)}))
    shared = f"{namespace}-shared"
    group = "s" + namespace.removeprefix("t-")[-30:].strip("-")
    flags = (
        "--sharding",
        "--sharding-group",
        group,
        "--node-lock-policy",
        "all",
        # A dead member's node locks stand until this; the survivors wait out no more.
        "--node-lock-timeout",
        "20s",
    )
    pods = [pause_pod(f"g{i}", scheduler_name=shared, extra={GPU: "1"}) for i in range(28)]
    records: list[ProcessRecord] = []
    try:
        with contextlib.ExitStack() as running:
            for i in range(3):
                records.append(
                    running.enter_context(
                        scheduler(plane, plane_state, f"ascheduler-shard-{i}", shared, *flags)
                    )
                )

            async def three_members() -> bool:
                return len(await group_leases(kube, group)) == 3

            await eventually(three_members, what="three member Leases", timeout=60)
            await create_pods(kube, namespace, pods[:14])

            async def some_bound() -> bool:
                placed = await pods_in(kube, namespace)
                return sum(1 for p in placed.values() if node_of(p)) >= 4

            await eventually(some_bound, what="the first binds", timeout=60)
            victim = records[0]
            os.kill(victim.pid, signal.SIGKILL)
            await create_pods(kube, namespace, pods[14:])

            async def all_room_used() -> dict[str, str]:
                placed = {n: node_of(p) for n, p in (await pods_in(kube, namespace)).items()}
                bound = {n: node for n, node in placed.items() if node}
                return bound if len(bound) == per_node * len(names) else {}

            placed = await eventually(all_room_used, what="24 GPU pods bound", timeout=150)
            assert not is_alive(victim)
            # The survivors keep trying the 4 that do not fit; none may land anywhere.
            current = await pods_in(kube, namespace)
            assert sum(1 for p in current.values() if node_of(p)) == per_node * len(names)
            assert Counter(placed.values()) == {n: per_node for n in names}
            (extra,) = await nodes(
                FakeNodes(count=1, prefix=f"{namespace}-x", extended={GPU: str(per_node)})
            )
            every = [p["metadata"]["name"] for p in pods]
            placed = await wait_bound(kube, namespace, every, timeout=120)
            assert Counter(placed.values()) == {**{n: per_node for n in names}, extra: per_node}
            current = await pods_in(kube, namespace)
        # Gracefully stopped members delete their Leases; the victim's stays until collected.
        leases = await group_leases(kube, group)
        identities = [log_events(r, "shard_joined")[0]["identity"] for r in records]
        assert set(leases.values()) <= {identities[0]}
        bound_by = [Counter(e["pod"] for e in log_events(r, "pod_bound")) for r in records]
        everyone = sum(bound_by, Counter())
        # No pod bound twice, by one member or two; the survivors bound the rest.
        assert everyone
        assert max(everyone.values()) == 1
        assert set(everyone) <= {f"{namespace}/{name}" for name in every}
        survivors = set(bound_by[1]) | set(bound_by[2])
        assert survivors
        assert len([b for b in bound_by if b]) >= 2  # the pods were split, not all one's
        # The second wave's pods the dead member owned were taken over by the others.
        taken_over = {
            f"{namespace}/{name}"
            for name, pod in current.items()
            if name in every[14:] and owner(pod["metadata"]["uid"], identities) == identities[0]
        }
        assert taken_over <= survivors
    finally:
        for name in await group_leases(kube, group):
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"{LEASES}/{name}")


async def test_a_member_stopped_gracefully_hands_its_share_over_at_once(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    """Pods pending (no room yet) split between two members; one is stopped (SIGTERM). Its
    Lease would stay live unrenewed far longer than the test waits: the survivor can bind the
    stopped member's share only because it saw that Lease deleted and re-split at once."""
    shared = f"{namespace}-shared"
    group = "s" + namespace.removeprefix("t-")[-30:].strip("-")
    config = tmp_path / "sharding.json"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": shared}],
                "ascheduler": {
                    "sharding": {"enabled": True, "group": group, "memberDuration": "10m"},
                    "nodeLock": {"policy": "all"},
                },
            }
        )
    )
    wanted = [f"g{i}" for i in range(12)]
    try:
        with scheduler(
            plane, plane_state, "ascheduler-shard-stays", None, "--config", str(config)
        ) as stays:
            with scheduler(
                plane, plane_state, "ascheduler-shard-goes", None, "--config", str(config)
            ) as goes:

                async def both_met() -> bool:
                    met = [
                        e
                        for r in (stays, goes)
                        for e in log_events(r, "shard_members_changed")
                        if len(e["members"]) == 2
                    ]
                    return len(met) >= 2

                await eventually(both_met, what="each member counting the other", timeout=60)
                pods = [pause_pod(name, scheduler_name=shared, extra={GPU: "1"}) for name in wanted]
                await create_pods(kube, namespace, pods)

                async def all_tried() -> bool:
                    listed = await pods_in(kube, namespace)
                    return len(listed) == len(wanted) and all(
                        any(
                            c.get("type") == "PodScheduled"
                            for c in p["status"].get("conditions") or []
                        )
                        for p in listed.values()
                    )

                # Each member has tried its share: no node has the GPUs.
                await eventually(all_tried, what="every pod tried once", timeout=60)
            identities = [log_events(r, "shard_joined")[0]["identity"] for r in (stays, goes)]
            assert identities[1] not in (await group_leases(kube, group)).values()
            names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-g", extended={GPU: "8"}))
            placed = await wait_bound(kube, namespace, wanted, timeout=90)
            assert set(placed.values()) <= set(names)
            uids = {p["metadata"]["uid"] for p in (await pods_in(kube, namespace)).values()}
            handed = sum(1 for uid in uids if owner(uid, identities) == identities[1])
            moved = sum(e["moved_in"] for e in log_events(stays, "shard_resplit"))
            assert moved == handed  # exactly the stopped member's share came over
            bound = {e["pod"] for e in log_events(stays, "pod_bound")}
            assert bound == {f"{namespace}/{name}" for name in wanted}
    finally:
        for name in await group_leases(kube, group):
            with contextlib.suppress(ApiError):
                await kube.request("DELETE", f"{LEASES}/{name}")
