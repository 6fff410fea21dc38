"""VolumeBinding's PreBind: the writes Reserve assumed, then the wait for the volume controller.

The writes are merge patches with the assumed objects' resourceVersion as a precondition
(each volume's claimRef, then each claim's selected-node); then the informers' objects are
polled every second until the volume controller has bound them all, or the wait fails with
kube-scheduler's messages (a volume or claim deleted, a claimRef reset, provisioning failed)
or after `bindTimeoutSeconds`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from ascheduler.framework import SUCCESS, Handle, KubeClient, Status
from ascheduler.model import version_number
from ascheduler.model.storage import BOUND_BY_CONTROLLER, SELECTED_NODE, Volume
from ascheduler.plugins.volumematching import VolumeState, bound_to, fully_bound

#: How often PreBind looks whether the volume controller has finished.
POLL_INTERVAL: Final = 1.0


class BindingFailed(Exception):
    pass


async def write_bindings(kube: KubeClient, s: VolumeState, node: str) -> dict[str, int]:
    """The writes kube-scheduler makes; the resourceVersion each answer carries, by
    `pv/<name>` and `pvc/<key>`. Fails with KubeError."""
    written: dict[str, int] = {}
    for volume, claim in s.bindings:
        meta: dict[str, Any] = {"resourceVersion": volume.resource_version}
        if not bound_to(volume, claim):
            meta["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
        body = {
            "metadata": meta,
            "spec": {
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": claim.namespace,
                    "name": claim.name,
                    "uid": claim.uid,
                    "resourceVersion": claim.resource_version,
                }
            },
        }
        answer = await kube.patch(f"/api/v1/persistentvolumes/{volume.name}", body)
        written[f"pv/{volume.name}"] = _answer_version(answer)
    for claim in s.provisions:
        body = {
            "metadata": {
                "resourceVersion": claim.resource_version,
                "annotations": {SELECTED_NODE: node},
            }
        }
        answer = await kube.patch(
            f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}",
            body,
        )
        written[f"pvc/{claim.key}"] = _answer_version(answer)
    return written


async def wait_bound(
    handle: Handle, s: VolumeState, node: str, written: dict[str, int], timeout: int
) -> Status:
    """Polled every second up to `timeout` seconds: the volume controller's answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if loop.time() + POLL_INTERVAL > deadline:
            return Status.error("binding volumes: context deadline exceeded")
        await asyncio.sleep(POLL_INTERVAL)
        try:
            if check_bindings(handle, s, node, written):
                return SUCCESS
        except BindingFailed as exc:
            return Status.error(f"binding volumes: {exc}")


def check_bindings(handle: Handle, s: VolumeState, node: str, written: dict[str, int]) -> bool:
    """kube-scheduler's checkBindings on the informers' objects: True once every volume
    and claim is bound; BindingFailed when the binding cannot complete."""
    storage = handle.storage
    info = handle.nodes.node(node)
    if info is None:
        raise BindingFailed(f'failed to get node "{node}": node "{node}" not found')
    done = True
    for volume, claim in s.bindings:
        pv = storage.volumes.informed.get(volume.name)
        if pv is None:
            raise BindingFailed(
                f'failed to check binding: persistentvolumes "{volume.name}" not found'
            )
        pvc = storage.claims.informed.get(claim.key)
        if pvc is None:
            raise BindingFailed(
                f'failed to check binding: persistentvolumeclaims "{claim.key}" not found'
            )
        if version_number(pv) < written.get(f"pv/{volume.name}", 0):
            done = False
            continue
        _check_affinity(pv, info.name, info.labels)
        if pv.claim_ref is None or not pv.claim_ref.uid:
            raise BindingFailed(f'ClaimRef got reset for pv "{pv.name}"')
        if not fully_bound(pvc):
            done = False
    for claim in s.provisions:
        pvc = storage.claims.informed.get(claim.key)
        if pvc is None:
            raise BindingFailed(
                f'failed to check provisioning pvc: persistentvolumeclaims "{claim.key}" not found'
            )
        if version_number(pvc) < written.get(f"pvc/{claim.key}", 0):
            done = False
            continue
        if not pvc.annotations:
            raise BindingFailed(f'selectedNode annotation reset for PVC "{pvc.name}"')
        if pvc.annotations.get(SELECTED_NODE) != node:
            raise BindingFailed(f'provisioning failed for PVC "{pvc.name}"')
        if pvc.volume_name:
            pv = storage.volumes.informed.get(pvc.volume_name)
            if pv is None:
                done = False
                continue
            _check_affinity(pv, info.name, info.labels)
        if not fully_bound(pvc):
            done = False
    return done


def _answer_version(answer: Any) -> int:
    meta = answer.get("metadata") if isinstance(answer, dict) else None
    try:
        return int(meta.get("resourceVersion", 0)) if isinstance(meta, dict) else 0
    except (TypeError, ValueError):
        return 0


def _check_affinity(pv: Volume, node: str, labels: Any) -> None:
    if pv.node_affinity is not None and not any(t.matches("", labels) for t in pv.node_affinity):
        raise BindingFailed(
            f'pv "{pv.name}" node affinity doesn\'t match node "{node}": '
            "no matching NodeSelectorTerms"
        )
