"""The secure port on the real plane, as kube-scheduler's: health open to anyone, `/metrics`
refused without credentials (401) and to a ServiceAccount the API server does not authorize
(403, kube's wording), read by one bound to a ClusterRole granting `get` on it; the grant
is per path; and plain HTTP is not spoken there."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    eventually,
    fetch,
    pause_pod,
    scheduler,
    serving,
    wait_bound,
)

SCHEDULER = "secure-sched"


async def service_account_token(kube: KubeClient, namespace: str, account: str) -> str:
    await kube.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}}
    )
    answer = await kube.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


async def grant(
    kube: KubeClient,
    cluster_objects: list[str],
    name: str,
    rules: list[dict[str, Any]],
    namespace: str,
    account: str,
) -> None:
    """A ClusterRole with `rules` bound to the ServiceAccount `namespace/account`."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await kube.post(f"{rbac}/clusterroles", {"metadata": {"name": name}, "rules": rules})
    cluster_objects.append(f"{rbac}/clusterroles/{name}")
    await kube.post(
        f"{rbac}/clusterrolebindings",
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    cluster_objects.append(f"{rbac}/clusterrolebindings/{name}")


async def test_metrics_on_the_secure_port_only_for_who_may_get_them(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    reader = await service_account_token(kube, namespace, "prometheus")
    nobody = await service_account_token(kube, namespace, "nobody")
    await grant(
        kube,
        cluster_objects,
        f"{namespace}-metrics-reader",
        [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        namespace,
        "prometheus",
    )
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    with scheduler(
        plane, plane_state, "secure-sched", SCHEDULER, secure_port=port, http_address=None
    ):
        await eventually(lambda: serving(base), what="the secure port ready")
        await create_pods(kube, namespace, [pause_pod("p", scheduler_name=SCHEDULER)])
        await wait_bound(kube, namespace, ["p"])

        for path in ("/healthz", "/readyz", "/livez"):
            assert await fetch(base + path) == (200, "ok"), path

        status, text = await fetch(f"{base}/metrics")
        assert status == 401
        assert json.loads(text)["reason"] == "Unauthorized"
        status, _ = await fetch(f"{base}/metrics", "not-a-token")
        assert status == 401

        status, text = await fetch(f"{base}/metrics", nobody)
        assert status == 403
        refusal = json.loads(text)
        assert refusal["reason"] == "Forbidden"
        assert refusal["message"] == (
            f'forbidden: User "system:serviceaccount:{namespace}:nobody" cannot get path "/metrics"'
        )

        status, text = await fetch(f"{base}/metrics", reader)
        assert status == 200, text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        scheduled = [
            s.value
            for s in families["scheduler_schedule_attempts"].samples
            if s.labels.get("profile") == SCHEDULER and s.labels.get("result") == "scheduled"
        ]
        assert scheduled == [1.0]

        # The grant is for /metrics alone; health needs none even with a token.
        status, _ = await fetch(f"{base}/debug/queue", reader)
        assert status == 403
        assert await fetch(f"{base}/healthz", nobody) == (200, "ok")

        with pytest.raises(aiohttp.ClientError):
            await fetch(f"http://127.0.0.1:{port}/healthz")


async def test_a_client_certificate_of_the_ca_given_authenticates(
    plane: ControlPlane,
    plane_state: PlaneState,
    tmp_path: Path,
) -> None:
    """`--client-ca-file`: the plane's admin certificate (group system:masters) reads
    /metrics with no token; the certificate made at start, written to `--cert-dir`, is one
    a client verifies for 127.0.0.1."""
    port = free_port()
    url = f"https://127.0.0.1:{port}/metrics"
    with scheduler(
        plane,
        plane_state,
        "secure-sched-certs",
        SCHEDULER,
        f"--client-ca-file={plane_state.ca_cert}",
        f"--cert-dir={tmp_path}",
        secure_port=port,
        http_address=None,
    ):
        await eventually(lambda: serving(f"https://127.0.0.1:{port}"), what="the secure port ready")
        served = tmp_path / "ascheduler.crt"
        verified = ssl.create_default_context(cafile=str(served))
        admin = ssl.create_default_context(cafile=str(served))
        admin.load_cert_chain(str(plane_state.admin_cert), str(plane_state.admin_key))
        async with aiohttp.ClientSession() as session:
            async with session.get(url, ssl=verified) as resp:
                assert resp.status == 401  # verified TLS, but no credentials
            async with session.get(url, ssl=admin) as resp:
                assert resp.status == 200
                assert "scheduler_pending_pods" in await resp.text()
