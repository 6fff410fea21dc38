"""An instance alone binds without node locks; a second instance joining turns them on for
both, and once it has left the first binds alone again; one cut off for longer than its
duration comes back as a newcomer: on the real plane. The instances keep
their Leases in a namespace of the test's own, away from the session's scheduler."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.faultproxy import WriteFaults
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient
from ascheduler.locks.keys import DEFAULT_KEY, GROUP_LEASE_PREFIX, NODE_LEASE_PREFIX
from ascheduler.locks.memberlease import MEMBER_KEY, MEMBER_PREFIX, PEERS_KEY
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import create_pods, eventually, pause_pod, scheduler, wait_bound

GPU = "nvidia.com/gpu"


async def metric(port: int, name: str) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        text = await resp.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"no {name} in the metrics")


async def leases(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    body = await kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")
    return {item["metadata"]["name"]: item for item in body["items"]}


def members(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    """identity -> the peers its member Lease acknowledges."""
    return {
        lease["metadata"]["annotations"][MEMBER_KEY]: lease["metadata"]["annotations"][PEERS_KEY]
        for name, lease in found.items()
        if name.startswith(MEMBER_PREFIX)
    }


def member_config(directory: Path, locks: str, profile: str, duration: str) -> Path:
    """A configuration with one profile, its Leases in `locks`, members counted gone after
    `duration`."""
    path = directory / f"{profile}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False, "resourceNamespace": locks},
                "profiles": [{"schedulerName": profile}],
                "ascheduler": {"nodeLock": {"memberDuration": duration}},
            }
        )
    )
    return path


async def test_alone_an_instance_binds_without_locks_until_another_joins(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    locks = f"{namespace}-locks"
    await kube.post("/api/v1/namespaces", {"metadata": {"name": locks}})
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-g", extended={GPU: "8"}))
    mine = f"{namespace}-mine"
    port = free_port()
    args = ("--leader-elect-resource-namespace", locks)

    def gpu(name: str) -> dict[str, Any]:
        return pause_pod(name, scheduler_name=mine, cpu="10m", memory="10Mi", extra={GPU: "1"})

    try:
        with scheduler(
            plane, plane_state, "ascheduler-first", mine, *args, http_address=f"127.0.0.1:{port}"
        ) as first:
            await create_pods(kube, namespace, [gpu(f"a{i}") for i in range(4)])
            await wait_bound(kube, namespace, [f"a{i}" for i in range(4)])
            found = await leases(kube, locks)
            locks_taken = [
                n for n in found if n.startswith((NODE_LEASE_PREFIX, GROUP_LEASE_PREFIX))
            ]
            assert not locks_taken
            assert list(members(found).values()) == [""]
            assert await metric(port, "ascheduler_node_lock_binds_alone_total") == 4
            assert await metric(port, "ascheduler_node_lock_alone") == 1

            with scheduler(plane, plane_state, "ascheduler-second", f"{namespace}-other", *args):

                async def acknowledged() -> dict[str, str] | None:
                    seen = members(await leases(kube, locks))
                    both = len(seen) == 2 and all(seen.values())
                    return seen if both else None

                seen = await eventually(acknowledged, what="both members acknowledging the other")
                (one, two) = seen
                assert (seen[one], seen[two]) == (two, one)
                assert await metric(port, "ascheduler_node_lock_alone") == 0
                await create_pods(kube, namespace, [gpu(f"b{i}") for i in range(4)])
                await wait_bound(kube, namespace, [f"b{i}" for i in range(4)])
                node_leases = [
                    lease
                    for name, lease in (await leases(kube, locks)).items()
                    if name.startswith((NODE_LEASE_PREFIX, GROUP_LEASE_PREFIX))
                ]
                assert node_leases  # the binds took their nodes' (groups') locks
                assert all(
                    DEFAULT_KEY in (lease["metadata"].get("annotations") or {})
                    or f"{DEFAULT_KEY}-bound" in (lease["metadata"].get("annotations") or {})
                    for lease in node_leases
                )
                assert await metric(port, "ascheduler_node_lock_binds_alone_total") == 4

            # The second stopped (its member Lease deleted): the first is alone again.
            async def alone_again() -> bool:
                return await metric(port, "ascheduler_node_lock_alone") == 1

            await eventually(alone_again, what="the first instance alone again")
            assert len(members(await leases(kube, locks))) == 1
            await create_pods(kube, namespace, [gpu(f"c{i}") for i in range(2)])
            await wait_bound(kube, namespace, ["c0", "c1"])
            assert await metric(port, "ascheduler_node_lock_binds_alone_total") == 6
            assert is_alive(first)
        # Stopped gracefully: no member Lease is left behind.
        assert not members(await leases(kube, locks))
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{locks}")


async def test_a_crashed_instance_is_waited_for_then_its_member_lease_removed(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    """kill -9 of an instance binding alone: its successor binds only once the dead one's
    member Lease has gone unrenewed for memberDuration (it might still be binding, for all the
    successor knows), then removes that Lease and binds alone."""
    locks = f"{namespace}-locks"
    await kube.post("/api/v1/namespaces", {"metadata": {"name": locks}})
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-g", extended={GPU: "8"}))
    mine = f"{namespace}-mine"
    config = member_config(tmp_path, locks, mine, "5s")

    def gpu(name: str) -> dict[str, Any]:
        return pause_pod(name, scheduler_name=mine, cpu="10m", memory="10Mi", extra={GPU: "1"})

    try:
        with scheduler(
            plane, plane_state, "ascheduler-crashes", None, "--config", str(config)
        ) as a:
            await create_pods(kube, namespace, [gpu("a0"), gpu("a1")])
            await wait_bound(kube, namespace, ["a0", "a1"])
            (dead,) = members(await leases(kube, locks))
            os.kill(a.pid, signal.SIGKILL)
        port = free_port()
        with scheduler(
            plane,
            plane_state,
            "ascheduler-successor",
            None,
            "--config",
            str(config),
            http_address=f"127.0.0.1:{port}",
        ) as b:
            await create_pods(kube, namespace, [gpu("b0"), gpu("b1")])
            await wait_bound(kube, namespace, ["b0", "b1"], timeout=60)

            async def removed() -> bool:
                return dead not in members(await leases(kube, locks))

            await eventually(removed, what="the dead instance's member Lease removed")
            assert await metric(port, "ascheduler_node_lock_alone") == 1
            log = await asyncio.to_thread(Path(b.log).read_text)
            assert f'"member": "{dead}", "event": "node_lock_member_expired"' in log
            assert is_alive(b)
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{locks}")


async def test_an_instance_cut_off_past_its_duration_comes_back_as_a_newcomer(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    """Two instances share GPU nodes; every write of one fails (a partition) for longer than
    memberDuration. The other counts it gone, removes its member Lease and binds alone. When
    the partition heals, the cut-off one finds its Lease gone and registers under a new
    identity, so nothing it had seen acknowledged counts: the other stops binding alone and
    acknowledges the newcomer, and pods of both bind without a node over capacity."""
    locks = f"{namespace}-locks"
    await kube.post("/api/v1/namespaces", {"metadata": {"name": locks}})
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-g", extended={GPU: "4"}))
    profiles = (f"{namespace}-a", f"{namespace}-b")

    def config(profile: str) -> str:
        return str(member_config(tmp_path, locks, profile, "3s"))

    def gpu(name: str, profile: str) -> dict[str, Any]:
        return pause_pod(name, scheduler_name=profile, cpu="10m", memory="10Mi", extra={GPU: "1"})

    port = free_port()
    try:
        with (
            plane.fault_proxy(seed=3) as proxy,
            scheduler(
                plane,
                plane_state,
                "ascheduler-stays",
                None,
                "--config",
                config(profiles[0]),
                http_address=f"127.0.0.1:{port}",
            ) as stays,
            scheduler(
                plane,
                plane_state,
                "ascheduler-cut-off",
                None,
                "--config",
                config(profiles[1]),
                kubeconfig=str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")),
            ) as cut,
        ):

            async def acknowledged() -> dict[str, str] | None:
                seen = members(await leases(kube, locks))
                return seen if len(seen) == 2 and all(seen.values()) else None

            (first, second) = await eventually(acknowledged, what="both members acknowledged")
            with proxy.faults(WriteFaults(share=1.0, kinds=("503",))):

                async def alone() -> bool:
                    return await metric(port, "ascheduler_node_lock_alone") == 1

                await eventually(alone, what="the other counted gone", timeout=60)
                gone = [m for m in (first, second) if m not in members(await leases(kube, locks))]
                assert len(gone) == 1
            # Healed: it comes back under a new identity, acknowledged anew.
            seen = await eventually(acknowledged, what="the newcomer acknowledged", timeout=60)
            assert gone[0] not in seen
            assert [m for m in seen if m.startswith(gone[0] + "~")]
            assert await metric(port, "ascheduler_node_lock_alone") == 0
            log = await asyncio.to_thread(Path(cut.log).read_text)
            assert '"event": "node_lock_member_readmitted"' in log
            pods = [gpu(f"p{i}-{k}", p) for i in range(5) for k, p in enumerate(profiles)]
            await create_pods(kube, namespace, pods)

            async def settled() -> dict[str, int] | None:
                on_api = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
                placed = Counter(
                    p["spec"]["nodeName"] for p in on_api["items"] if p["spec"].get("nodeName")
                )
                return dict(placed) if sum(placed.values()) == 8 else None

            placed = await eventually(settled, what="8 of 10 GPU pods bound", timeout=120)
            assert placed == {n: 4 for n in names}  # exactly full, never a fifth
            assert is_alive(stays)
            assert is_alive(cut)
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{locks}")
