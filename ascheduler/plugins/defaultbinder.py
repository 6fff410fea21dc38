"""DefaultBinder: POST a Binding to `pods/<name>/binding`, carrying the pod's UID so a pod
deleted and recreated under the same name is never bound by mistake."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import aiohttp

from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import BINDING_ANNOTATIONS, SUCCESS, CycleState, Status
from ascheduler.kube import ApiError
from ascheduler.model import PodInfo

NAME: Final = "DefaultBinder"


class DefaultBinder:
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
        try:
            await kube.request(
                "POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding", body=body
            )
        except ApiError as exc:
            return Status.error(f"binding rejected: {exc}", NAME)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Status.error(f"binding not confirmed: {exc!r}", NAME)
        return SUCCESS


def new(args: Mapping[str, Any], handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
