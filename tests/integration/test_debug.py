"""The running scheduler's debug endpoints on the real plane: the last attempt of a pending pod
as the live instance saw it (dropped once bound), the queue, the cache and its consistency
with the API server; and their protection: loopback without a token, or bearer tokens the
API server authenticates and authorizes (none, one without rights, one with rights)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    pause_pod,
    scheduler,
    serving,
    wait_bound,
    wait_unschedulable,
)
from tests.integration.helpers import (
    fetch as fetch_text,
)

SCHEDULER = "debug-sched"


async def fetch(url: str, token: str | None = None) -> tuple[int, Any]:
    """`helpers.fetch`, its body parsed as JSON where it is."""
    status, text = await fetch_text(url, token)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


async def served(port: int, scheme: str = "http") -> bool:
    return await serving(f"{scheme}://127.0.0.1:{port}")


async def test_a_pending_pod_s_last_attempt_queue_and_cache_from_the_live_scheduler(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="2"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with scheduler(
        plane,
        plane_state,
        "debug-sched",
        SCHEDULER,
        "--debug-endpoints",
        "loopback",
        http_address=f"127.0.0.1:{port}",
    ) as record:
        await eventually(lambda: served(port), what="the scheduler ready")
        await create_pods(
            kube,
            namespace,
            [
                pause_pod("fits", cpu="1", scheduler_name=SCHEDULER),
                pause_pod("huge", cpu="3", scheduler_name=SCHEDULER),
            ],
        )
        await wait_bound(kube, namespace, ["fits"])
        message = await wait_unschedulable(kube, namespace, "huge")

        status, doc = await fetch(f"{base}/debug/pods/{namespace}/huge")
        assert status == 200
        last = doc["lastAttempt"]
        assert last["message"] == message
        assert last["reason"] == "Unschedulable"
        assert last["rejectedBy"] == ["NodeResourcesFit"]
        assert last["reasons"]["Insufficient cpu"] >= 2
        assert set(last["examples"]["Insufficient cpu"]) & set(names)
        assert doc["queue"] in ("unschedulable", "backoff", "active")
        now = doc["now"]
        assert now["message"] == message
        details = {n["name"]: n["details"] for g in now["rejected"] for n in g["nodes"]}
        assert sorted(details[n][0] for n in names) == [
            "cpu: requested 3, free 1 of 2",
            "cpu: requested 3, free 2 of 2",
        ]

        status, queue = await fetch(f"{base}/debug/queue")
        assert status == 200
        key = f"{namespace}/huge"
        waiting = [(name, p) for name, q in queue["queues"].items() for p in q if p["pod"] == key]
        assert len(waiting) == 1
        where, entry = waiting[0]
        assert entry["rejectedBy"] == ["NodeResourcesFit"]
        assert entry["attempts"] >= 1
        if where == "unschedulable":
            # Room appearing (a node added, a pod deleted) may help it.
            assert "NodeAdd" in entry["movedBy"]

        status, cache = await fetch(f"{base}/debug/cache?check=true")
        assert status == 200
        by_name = {n["name"]: n for n in cache["nodes"]}
        used = [by_name[n]["usage"]["cpu"]["requested"] for n in names]
        assert sorted(used) == ["0", "1"]
        assert cache["consistency"]["consistent"] is True
        # SIGUSR2, as kube-scheduler's: the cache dumped and compared, into the log.
        os.kill(record.pid, signal.SIGUSR2)

        async def logged() -> bool:
            text = await asyncio.to_thread(Path(record.log).read_text, errors="replace")
            return "cache_dump" in text and "cache_consistent" in text

        assert await eventually(logged, what="the SIGUSR2 check logged")

        # Room appears: the pod is bound and its record dropped.
        (roomy,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-big", cpu="4"))
        assert (await wait_bound(kube, namespace, ["huge"]))["huge"] == roomy
        status, doc = await fetch(f"{base}/debug/pods/{namespace}/huge")
        assert status == 200
        assert doc["boundTo"] == roomy
        assert doc["lastAttempt"] is None
        assert doc["now"] is None
        status, _missing = await fetch(f"{base}/debug/pods/{namespace}/nothing-here")
        assert status == 404


async def test_authorized_mode_asks_the_api_server_about_each_token(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    role = f"{namespace}-debug"
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": role},
            "rules": [{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}],
        },
    )
    cluster_objects.append(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")
    for account in ("reader", "nobody"):
        await kube.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}
        )
    await kube.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )
    cluster_objects.append(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{role}")

    async def token(account: str) -> str:
        answer = await kube.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
        return str(answer["status"]["token"])

    reader, nobody = await token("reader"), await token("nobody")
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    with scheduler(
        plane,
        plane_state,
        "debug-sched",
        SCHEDULER,
        "--debug-endpoints",
        "authorized",
        http_address=None,
        secure_port=port,
    ):
        await eventually(lambda: served(port, "https"), what="the scheduler ready")
        await create_pods(kube, namespace, [pause_pod("p", scheduler_name=SCHEDULER)])
        await wait_bound(kube, namespace, ["p"])
        for path in (f"/debug/pods/{namespace}/p", "/debug/queue", "/debug/cache"):
            status, _ = await fetch(base + path)
            assert status == 401, path
            status, _ = await fetch(base + path, "not-a-token")
            assert status == 401, path
            status, refusal = await fetch(base + path, nobody)
            assert status == 403, path
            assert refusal["message"] == (
                f'forbidden: User "system:serviceaccount:{namespace}:nobody" '
                f'cannot get path "{path}"'
            )
            status, doc = await fetch(base + path, reader)
            assert status == 200, (path, doc)
        _, pod = await fetch(f"{base}/debug/pods/{namespace}/p", reader)
        assert pod["boundTo"]
        assert pod["lastAttempt"] is None
        # Health stays open; /metrics is not the debug readers' (its own grant).
        status, _ = await fetch(f"{base}/readyz")
        assert status == 200
        status, _ = await fetch(f"{base}/metrics", reader)
        assert status == 403
