"""Device binding conditions on the real plane (DRADeviceBindingConditions, on from 1.36): a
pod whose device has binding conditions is bound only once a controller (here the test,
through the API) sets them True in the claim's status, while other pods keep binding; a
failure condition fails its binding cycle, and so does the `bindingTimeout` passing, the claim
then being deallocated and allocated again on a later attempt, as kube-scheduler does."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane, versions
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import is_alive
from ascheduler.kube import KubeClient, KubeError
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    claiming_pod,
    create_pods,
    eventually,
    get_pod,
    pause_pod,
    plane_since,
    scheduler,
    wait_bound,
)

pytestmark = pytest.mark.skipif(
    not plane_since(1, 36), reason="DRADeviceBindingConditions is off before 1.36"
)

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "attach.example.com"
TIMEOUT = 20


async def attachable(kube: KubeClient, created: list[str], node: str, count: int) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-attach"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"dev-{i}",
                    "bindingConditions": ["Attached"],
                    "bindingFailureConditions": ["AttachFailed"],
                }
                for i in range(count)
            ],
        },
    }
    await kube.post(f"{RESOURCE}/resourceslices", body)
    created.append(f"{RESOURCE}/resourceslices/{node}-attach")


def claim(name: str, klass: str) -> dict[str, Any]:
    request = {"deviceClassName": klass, "allocationMode": "ExactCount", "count": 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": request}]}},
    }


async def reserved(kube: KubeClient, namespace: str, name: str, pod: str) -> dict[str, Any]:
    """The claim once it is allocated and reserved for `pod` (by uid)."""
    uid = (await get_pod(kube, namespace, pod))["metadata"]["uid"]
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{name}"

    async def probe() -> dict[str, Any] | None:
        body = await kube.get(path)
        status = body.get("status") or {}
        users = [r.get("uid") for r in status.get("reservedFor") or []]
        return body if status.get("allocation") and uid in users else None

    return await eventually(probe, what=f"claim {name} reserved for {pod}", timeout=90)


async def set_condition(
    kube: KubeClient, namespace: str, name: str, kind: str, reason: str
) -> dict[str, Any]:
    """What a driver's controller does: the condition True on the claim's allocated device."""
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{name}"
    for _ in range(10):
        body = await kube.get(path)
        (result,) = body["status"]["allocation"]["devices"]["results"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body["status"]["devices"] = [
            {
                "driver": result["driver"],
                "pool": result["pool"],
                "device": result["device"],
                "conditions": [
                    {
                        "type": kind,
                        "status": "True",
                        "reason": reason,
                        "message": f"{kind} by the test",
                        "lastTransitionTime": now,
                    }
                ],
            }
        ]
        try:
            answer: dict[str, Any] = (await kube.request("PUT", f"{path}/status", body=body)).json()
            return answer
        except KubeError as exc:
            if not exc.conflict:
                raise
    raise AssertionError(f"claim {name}: too many conflicts")


async def condition_message(kube: KubeClient, namespace: str, pod: str, text: str) -> str:
    """The failure saying `text`, from the pod's condition or its FailedScheduling Events
    (which stay when a later attempt's condition replaces it)."""

    async def probe() -> str | None:
        found = await get_pod(kube, namespace, pod)
        messages = [
            str(cond.get("message") or "")
            for cond in found.get("status", {}).get("conditions") or []
            if cond.get("type") == "PodScheduled"
        ]
        events = await kube.get(
            f"/api/v1/namespaces/{namespace}/events",
            params={"fieldSelector": f"involvedObject.name={pod}"},
        )
        messages += [str(e.get("message") or "") for e in events.get("items") or []]
        return next((m for m in messages if text in m), None)

    return await eventually(probe, what=f"{pod}'s condition saying {text!r}", timeout=120)


async def test_a_pod_binds_once_its_devices_binding_conditions_are_true(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
    tmp_path: Path,
) -> None:
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    await attachable(kube, cluster_objects, names[0], 3)
    klass = f"{namespace}-attach"
    await kube.post(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": klass},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    cluster_objects.append(f"{RESOURCE}/deviceclasses/{klass}")
    ns = f"{RESOURCE}/namespaces/{namespace}"
    for name in ("ok", "bad", "slow"):
        await kube.post(f"{ns}/resourceclaims", claim(name, klass))
    profile = f"{namespace}-bc"
    path = tmp_path / "bindcond.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": profile,
                        "pluginConfig": [
                            {"name": "DynamicResources", "args": {"bindingTimeout": f"{TIMEOUT}s"}}
                        ],
                    }
                ],
            }
        )
    )
    # The file is read at the default release unless one is named (1.35 refuses the field).
    release = versions.release().kubernetes
    with scheduler(
        plane,
        plane_state,
        "ascheduler-bindcond",
        None,
        "--config",
        str(path),
        "--emulated-version",
        ".".join(release.lstrip("v").split(".")[:2]),
    ) as rec:
        pods = [
            claiming_pod(pod, claim=name, scheduler_name=profile)
            for pod, name in (("waits", "ok"), ("fails", "bad"), ("times-out", "slow"))
        ]
        await create_pods(kube, namespace, pods)

        # Allocated (the conditions recorded, the timestamp written) and reserved, not bound.
        ok = await reserved(kube, namespace, "ok", "waits")
        (result,) = ok["status"]["allocation"]["devices"]["results"]
        assert result["bindingConditions"] == ["Attached"]
        assert result["bindingFailureConditions"] == ["AttachFailed"]
        assert result["pool"] == names[0]
        assert ok["status"]["allocation"]["allocationTimestamp"]
        assert not (await get_pod(kube, namespace, "waits"))["spec"].get("nodeName")

        # Other pods keep binding meanwhile (no binding slot or lock is held by the waits).
        others = [pause_pod(f"other-{i}", scheduler_name=profile, cpu="10m") for i in range(3)]
        await create_pods(kube, namespace, others)
        await wait_bound(kube, namespace, [f"other-{i}" for i in range(3)], timeout=60)
        assert not (await get_pod(kube, namespace, "waits"))["spec"].get("nodeName")

        # The controller attaches the device: the pod binds.
        await set_condition(kube, namespace, "ok", "Attached", "Attached")
        where = await wait_bound(kube, namespace, ["waits"], timeout=60)
        assert where["waits"] == names[0]

        # A failure condition fails the binding cycle with kube-scheduler's words; the claim
        # is deallocated by a later attempt's PostFilter and allocated again.
        bad = await reserved(kube, namespace, "bad", "fails")
        first = bad["status"]["allocation"]["allocationTimestamp"]
        await set_condition(kube, namespace, "bad", "AttachFailed", "NoPath")
        message = await condition_message(kube, namespace, "fails", "device binding failed")
        assert "device binding failed: claim=bad, reason=NoPath" in message, message

        async def reallocated() -> bool:
            body = await kube.get(f"{ns}/resourceclaims/bad")
            allocation = (body.get("status") or {}).get("allocation")
            return allocation is None or allocation.get("allocationTimestamp") != first

        assert await eventually(reallocated, what="claim bad deallocated", timeout=120)
        assert not (await get_pod(kube, namespace, "fails"))["spec"].get("nodeName")

        # Nobody attaches the third device: the wait ends at the bindingTimeout.
        message = await condition_message(kube, namespace, "times-out", "device binding timeout")
        assert not (await get_pod(kube, namespace, "times-out"))["spec"].get("nodeName")
        assert is_alive(rec)
