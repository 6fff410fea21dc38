"""Two replicas with leader election on a Lease: one schedules, the other takes over when it
dies, and a graceful stop releases the Lease."""

from __future__ import annotations

import os
import signal
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord, exit_code, is_alive
from ascheduler.kube import ApiError, KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import create_pods, eventually, pause_pod, wait_bound


async def lease_holder(kube: KubeClient, namespace: str) -> str | None:
    try:
        lease: dict[str, Any] = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/ascheduler"
        )
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    return str(lease["spec"].get("holderIdentity") or "")


async def test_standby_takes_over_and_stop_releases_the_lease(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    profile = f"{namespace}-le"

    def replica(name: str) -> ProcessRecord:
        return plane.start_ascheduler(
            f"ascheduler-{name}",
            "--scheduler-name",
            profile,
            "--leader-elect",
            "--leader-elect-resource-namespace",
            namespace,
            "--leader-elect-lease-duration",
            "3",
            env={**os.environ, "POD_NAME": name},
        )

    replicas = {"a": replica("a"), "b": replica("b")}
    try:

        async def elected() -> str | None:
            holder = await lease_holder(kube, namespace)
            return holder if holder in replicas else None

        leader = await eventually(elected, what="a leader elected")
        await create_pods(kube, namespace, [pause_pod("first", scheduler_name=profile)])
        await wait_bound(kube, namespace, ["first"])

        os.kill(replicas[leader].pid, signal.SIGKILL)  # no chance to release anything
        standby = "b" if leader == "a" else "a"
        await create_pods(kube, namespace, [pause_pod("second", scheduler_name=profile)])
        await wait_bound(kube, namespace, ["second"], timeout=60)
        assert await lease_holder(kube, namespace) == standby

        os.kill(replicas[standby].pid, signal.SIGTERM)

        async def stopped() -> bool:
            return not is_alive(replicas[standby])

        await eventually(stopped, what="the leader exits on SIGTERM")
        assert exit_code(replicas[standby]) == 0
        assert await lease_holder(kube, namespace) == ""  # released, not left to expire
    finally:
        for record in replicas.values():
            plane.stop_process(record)
