"""DefaultBinder: POST a Binding to `pods/<name>/binding`, carrying the pod's UID so a pod
deleted and recreated under the same name is never bound by mistake.

A bind is a write whose answer can be lost (the connection drops after the API server applied
it). Transient failures are retried a few times; a retry of a bind that did land answers 409,
so a conflict is settled by reading the pod back: bound to this node (with this UID) is a
success. Without that, a lost answer would make the scheduler forget a pod that is in fact on
the node, and hand its room to the next pod.
"""

from __future__ import annotations

import asyncio
from typing import Final

from ascheduler.framework import (
    BINDING_ANNOTATIONS,
    SUCCESS,
    BindPlugin,
    CycleState,
    Handle,
    KubeClient,
    KubeError,
    NoArgs,
    Registration,
    Status,
)
from ascheduler.model import PodInfo

NAME: Final = "DefaultBinder"
ATTEMPTS: Final = 5
FIRST_RETRY_DELAY: Final = 0.1


class DefaultBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        kube = self.handle.kube
        if kube is None:
            return Status.error("DefaultBinder has no API client", NAME)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "annotations": state.read(BINDING_ANNOTATIONS) or {},
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        delay = FIRST_RETRY_DELAY
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await kube.request("POST", path, body=body)
                return SUCCESS
            except KubeError as exc:
                if exc.conflict:
                    return await _settle_conflict(kube, pod, node, exc)
                if not exc.transient or attempt == ATTEMPTS:
                    return Status.error(f"binding failed ({exc.kind.value}): {exc}", NAME)
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")


async def _settle_conflict(kube: KubeClient, pod: PodInfo, node: str, exc: KubeError) -> Status:
    """A 409: the pod is bound already (by an earlier attempt of ours whose answer was lost, or
    by someone else), or was recreated under its name. Read it back to know which."""
    try:
        current = await kube.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
    except KubeError as err:
        return Status.error(f"binding refused ({exc}); reading the pod back failed: {err}", NAME)
    meta = current.get("metadata") or {}
    bound_to = (current.get("spec") or {}).get("nodeName") or ""
    if meta.get("uid") == pod.uid and bound_to == node:
        return SUCCESS
    if meta.get("uid") != pod.uid:
        return Status.error(f"binding refused: pod {pod.key} was recreated ({exc})", NAME)
    if bound_to:
        return Status.error(f"binding refused: pod {pod.key} is bound to {bound_to} ({exc})", NAME)
    return Status.error(f"binding refused: {exc}", NAME)


def new(args: NoArgs, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)


REGISTRATION: Final = Registration(NAME, new, NoArgs, events=frozenset(), default_weight=1)
