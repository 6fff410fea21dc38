"""Sharding mode on the real plane: three active instances of one scheduler name split the
pods, one is killed with SIGKILL mid-run, and still every pod is bound once, no node is
overcommitted, and the dead member's share is taken over once its Lease expires."""

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
