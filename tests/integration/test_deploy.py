"""deploy/base on the real API server: every manifest is accepted (server-side apply), and the
scheduler runs under the deployed ServiceAccount's own token, so a missing RBAC verb fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.kube import ApiError, KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    create_pods,
    events_for,
    eventually,
    pause_pod,
    wait_bound,
    wait_unschedulable,
)

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"
NAMESPACE = "ascheduler-system"
#: kind -> (API path prefix, plural, namespaced)
KINDS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
}


def manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((BASE / name).read_text()) if d]
    return docs


async def apply(kube: KubeClient, doc: dict[str, Any]) -> dict[str, Any]:
    prefix, plural, namespaced = KINDS[doc["kind"]]
    meta = doc["metadata"]
    where = f"/namespaces/{meta.get('namespace', NAMESPACE)}" if namespaced else ""
    path = f"{prefix}{where}/{plural}/{meta['name']}"
    response = await kube.request(
        "PATCH",
        path,
        body=doc,
        params={"fieldManager": "ascheduler-deploy-test", "force": "true"},
        content_type="application/apply-patch+yaml",
    )
    return response.json()


async def service_account_kubeconfig(
    kube: KubeClient, plane_state: PlaneState, account: str, where: Path
) -> Path:
    """A kubeconfig with a token of the deployed ServiceAccount `account`."""
    token = (
        await kube.post(
            f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
    )["status"]["token"]
    kubeconfig = where / f"{account}.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": plane_state.server,
                            "certificate-authority": str(plane_state.ca_cert),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    return kubeconfig


def assert_authorized(log: str) -> None:
    # An authorization failure reads `<METHOD> <path>: 403 Forbidden: ...` (not a digit run
    # that a timestamp may contain).
    assert ": 403 " not in log
    assert "forbidden" not in log.lower()


async def test_deploy_base_applies_and_its_service_account_can_schedule(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    docs = manifests()
    assert {d["kind"] for d in docs} == set(KINDS)
    for doc in docs:
        applied = await apply(kube, doc)
        assert applied["metadata"]["name"] == doc["metadata"]["name"]

    kubeconfig = await service_account_kubeconfig(kube, plane_state, "ascheduler", tmp_path)

    # The deployed configuration, with its own profile name and node locks on every bind
    # (so the lock Lease writes are exercised too).
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    profile = f"{namespace}-deployed"
    config["profiles"][0]["schedulerName"] = profile
    config["ascheduler"]["httpAddress"] = "127.0.0.1:0"
    config["ascheduler"]["nodeLock"]["policy"] = "all"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))

    async with await KubeClient.connect(str(kubeconfig)) as as_sa:
        with pytest.raises(ApiError) as denied:
            await as_sa.request("DELETE", "/api/v1/nodes/anything")
        assert denied.value.status == 403  # it really is the ServiceAccount, not an admin

    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    port = free_port()
    record = plane.start_ascheduler(
        "ascheduler-deployed",
        "--config",
        str(config_file),
        kubeconfig=str(kubeconfig),
        http_address=None,  # the deployed config's
        secure_port=port,
    )
    try:
        await create_pods(
            kube,
            namespace,
            [
                *(pause_pod(f"p{i}", scheduler_name=profile) for i in range(3)),
                pause_pod("huge", scheduler_name=profile, cpu="1000"),
            ],
        )
        await wait_bound(kube, namespace, [f"p{i}" for i in range(3)], timeout=90)
        await wait_unschedulable(kube, namespace, "huge")  # pods/status patch allowed
        await eventually(
            lambda: events_for(kube, namespace, "Scheduled"),
            what="Scheduled events written by the ServiceAccount",
        )
        lease = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/ascheduler"
        )
        assert lease["spec"]["holderIdentity"]
        # The secure port reviews tokens and access under the deployed role: the
        # ServiceAccount's own token is authenticated (not 401) and its access reviewed and
        # refused (403, not the 500 of a review the role does not allow).
        token = json.loads(kubeconfig.read_text())["users"][0]["user"]["token"]
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{port}/metrics"
            headers = {"Authorization": f"Bearer {token}"}
            async with session.get(url, headers=headers, ssl=False) as resp:
                assert resp.status == 403, await resp.text()
                assert "system:serviceaccount:ascheduler-system:ascheduler" in await resp.text()
            async with session.get(url, ssl=False) as resp:
                assert resp.status == 401
        assert_authorized(await asyncio.to_thread(Path(record.log).read_text))
    finally:
        plane.stop_process(record)


async def test_the_deployed_binder_binds_what_the_deployed_scheduler_requests(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
) -> None:
    """bindrequest mode under the two deployed ServiceAccounts, node locks on every bind: a
    verb missing from either role fails it."""
    docs = manifests()
    for doc in docs:
        await apply(kube, doc)
    scheduler_config = await service_account_kubeconfig(kube, plane_state, "ascheduler", tmp_path)
    binder_config = await service_account_kubeconfig(
        kube, plane_state, "ascheduler-binder", tmp_path
    )
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    profile = f"{namespace}-durable"
    config["profiles"][0]["schedulerName"] = profile
    config["ascheduler"]["httpAddress"] = "127.0.0.1:0"
    config["ascheduler"]["nodeLock"]["policy"] = "all"
    config["ascheduler"]["binding"] = "bindrequest"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    records = [
        plane.start_ascheduler(
            "ascheduler-deployed-durable",
            "--config",
            str(config_file),
            kubeconfig=str(scheduler_config),
            http_address=None,
        ),
        plane.start_ascheduler(
            "ascheduler-deployed-binder",
            "--config",
            str(config_file),
            kubeconfig=str(binder_config),
            http_address="127.0.0.1:0",
            command="binder",
        ),
    ]
    try:
        await create_pods(
            kube, namespace, [pause_pod(f"p{i}", scheduler_name=profile) for i in range(3)]
        )
        await wait_bound(kube, namespace, [f"p{i}" for i in range(3)], timeout=90)
        lease = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/ascheduler-binder"
        )
        assert lease["spec"]["holderIdentity"]
        for record in records:
            assert_authorized(await asyncio.to_thread(Path(record.log).read_text))
    finally:
        for record in records:
            plane.stop_process(record)
