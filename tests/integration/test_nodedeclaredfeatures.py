"""NodeDeclaredFeatures on the real plane (1.36 on, where its gate is on by default): the API
server keeps a kwok node's `status.declaredFeatures` through kwok's own status updates, a pod
needing a feature no node declares is reported with kube-scheduler's reason, and a node that
comes to declare it (its status patched, as a kubelet would) wakes the pod, which binds
there. kwok heartbeats through leases and leaves a Ready node's status alone after that."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.devcluster import versions
from ascheduler.devcluster.nodes import (
    FakeNodes,
    delete_fake_nodes,
    fake_node_body,
    wait_nodes_ready,
)
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.features import Release
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    get_pod,
    pause_pod,
    wait_bound,
    wait_unschedulable,
)

RESTART_ALL = "RestartAllContainersOnContainerExits"
REASON = "node(s) didn't match Pod's required features"

pytestmark = pytest.mark.skipif(
    Release.parse(versions.release().kubernetes) < Release(1, 36),
    reason="NodeDeclaredFeatures and RestartAllContainers are off by default before 1.36",
)


def restarting_pod(name: str) -> dict[str, Any]:
    body = pause_pod(name)
    main = body["spec"]["containers"][0]
    main["restartPolicy"] = "Never"
    main["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
    ]
    return body


async def test_a_node_declaring_the_feature_wakes_the_pod_needing_it(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    (name,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-ndf"))
    await kube.post(f"/api/v1/namespaces/{namespace}/pods", restarting_pod("restarts"))
    message = await wait_unschedulable(kube, namespace, "restarts")
    assert REASON in message

    declared = await kube.patch(
        f"/api/v1/nodes/{name}/status", {"status": {"declaredFeatures": [RESTART_ALL]}}
    )
    assert declared["status"].get("declaredFeatures") == [RESTART_ALL]
    assert await wait_bound(kube, namespace, ["restarts"]) == {"restarts": name}
    pod = await get_pod(kube, namespace, "restarts")
    assert pod["spec"]["nodeName"] == name


async def test_kwok_keeps_the_declared_features_a_node_is_created_with(kube: KubeClient) -> None:
    """kwok makes a node Ready by writing its status (conditions, addresses); what the node
    was created with in `status.declaredFeatures` stays (the differential scenarios create
    their nodes so)."""
    name = "ndf-created-declaring"
    body = fake_node_body(name, FakeNodes(count=1, prefix=name))
    body["status"]["declaredFeatures"] = [RESTART_ALL]
    created = await kube.post("/api/v1/nodes", body)
    try:
        assert created["status"].get("declaredFeatures") == [RESTART_ALL]
        await wait_nodes_ready(kube, [name])
        node = await kube.get(f"/api/v1/nodes/{name}")
        assert int(node["metadata"]["resourceVersion"]) > int(
            created["metadata"]["resourceVersion"]
        ), "kwok wrote the node's status"
        assert node["status"].get("declaredFeatures") == [RESTART_ALL]
    finally:
        await delete_fake_nodes(kube, [name])
