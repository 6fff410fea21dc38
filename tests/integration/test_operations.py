"""Operating ascheduler: health and metrics endpoints, and a graceful SIGTERM."""

from __future__ import annotations

import os
import signal

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane, versions
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import exit_code, is_alive
from ascheduler.features import Release
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    lock_annotations,
    node_of,
    pause_pod,
    pods_in,
    wait_bound,
)

METRICS = (
    "scheduler_schedule_attempts",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_pending_pods",
    "scheduler_framework_extension_point_duration_seconds",
    "scheduler_queue_incoming_pods",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "ascheduler_binding_duration_seconds",
    "ascheduler_node_lock_wait_seconds",
)


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


@pytest.mark.smoke
async def test_health_metrics_and_graceful_sigterm(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=3, prefix=f"{namespace}-n"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    profile = f"{namespace}-ops"
    record = plane.start_ascheduler(
        "ascheduler-ops",
        "--scheduler-name",
        profile,
        "--node-lock-policy",
        "all",
        http_address=f"127.0.0.1:{port}",
    )
    try:

        async def ready() -> bool:
            try:
                return await fetch(f"{base}/readyz") == (200, "ok")
            except aiohttp.ClientError:
                return False

        await eventually(ready, what="/readyz ok once informers synced")
        assert await fetch(f"{base}/livez") == (200, "ok")
        assert await fetch(f"{base}/healthz") == (200, "ok")

        await create_pods(
            kube, namespace, [pause_pod(f"a{i}", scheduler_name=profile) for i in range(5)]
        )
        await wait_bound(kube, namespace, [f"a{i}" for i in range(5)])
        status, text = await fetch(f"{base}/metrics")
        assert status == 200
        families = {f.name: f for f in text_string_to_metric_families(text)}
        for name in METRICS:
            assert name in families, name
        attempts = {
            s.labels["result"]: s.value
            for s in families["scheduler_schedule_attempts"].samples
            if s.labels.get("profile") == profile
        }
        assert attempts.get("scheduled") == 5.0
        queues = {s.labels["queue"] for s in families["scheduler_pending_pods"].samples}
        assert {"active", "backoff", "unschedulable", "gated"} <= queues
        # 1.37's entities: each new pod entered the active queue once, as a `pod`.
        entities = families.get("scheduler_queue_incoming_entities")
        if Release.parse(versions.release().kubernetes) < Release(1, 37):
            assert entities is None
        else:
            assert entities is not None
            added = {
                s.labels["type"]: s.value
                for s in entities.samples
                if s.name.endswith("_total")
                and (s.labels["queue"], s.labels["event"]) == ("active", "PodAdd")
            }
            assert added.get("pod", 0.0) >= 5.0

        # SIGTERM during a burst: in-flight binds finish, locks are released, exit 0.
        await create_pods(
            kube, namespace, [pause_pod(f"b{i}", scheduler_name=profile) for i in range(60)]
        )
        os.kill(record.pid, signal.SIGTERM)

        async def exited() -> bool:
            return not is_alive(record)

        await eventually(exited, what="ascheduler exits after SIGTERM", timeout=60)
        assert exit_code(record) == 0
    finally:
        plane.stop_process(record)
    assert await lock_annotations(kube, names) == {}
    # No pod was lost: whatever was not bound before the stop is bound by the next instance.
    with_next = plane.start_ascheduler("ascheduler-ops-2", "--scheduler-name", profile)
    try:
        await wait_bound(kube, namespace, [f"b{i}" for i in range(60)], timeout=90)
    finally:
        plane.stop_process(with_next)
    pods = await pods_in(kube, namespace)
    assert all(node_of(p) in names for p in pods.values())
