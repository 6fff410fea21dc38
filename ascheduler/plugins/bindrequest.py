"""BindRequestBinder: the Bind extension point of `--binding bindrequest` mode. Instead of a
Binding it writes a BindRequest (`ascheduler.model.bindrequest`) naming the pod, its UID and
the node; `ascheduler binder` binds the pod. The pod stays assumed on its node until the
informer shows it bound, or its request fails for good.

A request of the same name may exist already:
* for this pod (same UID) and node, not Failed: the answer to an earlier write of ours was
  lost, or a restarted scheduler placed the pod again as it was: a success;
* anything else (a Failed request the scheduler has not cleared yet, a request of an earlier
  pod of the same name, another node): it is stale. It is deleted, guarded by its UID, and the
  request written again once.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Final

from ascheduler.framework import (
    SUCCESS,
    BindPlugin,
    CycleState,
    Handle,
    KubeClient,
    KubeError,
    NoArgs,
    PluginRef,
    ProfileSpec,
    Registration,
    Status,
)
from ascheduler.model import PodInfo
from ascheduler.model.bindrequest import (
    DEFAULT_BACKOFF_LIMIT,
    FAILED,
    claim_names,
    collection_path,
    object_path,
    parse_bind_request,
    request_body,
)

NAME: Final = "BindRequestBinder"
ATTEMPTS: Final = 5
FIRST_RETRY_DELAY: Final = 0.1


class BindRequestBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle, backoff_limit: int = DEFAULT_BACKOFF_LIMIT) -> None:
        self.handle = handle
        self.backoff_limit = backoff_limit

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        kube = self.handle.kube
        if kube is None:
            return Status.error(f"{NAME} has no API client", NAME)
        devices = {k: v for k, v in pod.requests.items() if "/" in k and v}
        body = request_body(
            pod,
            node,
            profile=self.handle.profile or "",
            backoff_limit=self.backoff_limit,
            claims=claim_names(pod),
            devices=devices,
        )
        path = collection_path(pod.namespace)
        delay = FIRST_RETRY_DELAY
        replaced = False
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await kube.request("POST", path, body=body)
                return SUCCESS
            except KubeError as exc:
                if exc.conflict:
                    settled = await _settle_existing(kube, pod, node, replace=not replaced)
                    if settled is not None:
                        return settled
                    replaced = True  # the stale request is gone: write ours again
                    continue
                if not exc.transient or attempt == ATTEMPTS:
                    return Status.error(
                        f"writing the BindRequest failed ({exc.kind.value}): {exc}", NAME
                    )
            await asyncio.sleep(delay)
            delay *= 2
        return Status.error(f"writing the BindRequest for {pod.key} failed {ATTEMPTS} times", NAME)


async def _settle_existing(
    kube: KubeClient, pod: PodInfo, node: str, *, replace: bool
) -> Status | None:
    """A request named after the pod exists: SUCCESS if it is this placement, None once a
    stale one was deleted (write again), an error otherwise."""
    where = object_path(pod.namespace, pod.name)
    try:
        existing = parse_bind_request(await kube.get(where))
    except KubeError as exc:
        if exc.not_found:
            return None  # deleted meanwhile: write again
        return Status.error(f"reading the existing BindRequest {pod.key} failed: {exc}", NAME)
    if existing.pod_uid == pod.uid and existing.node == node and existing.phase != FAILED:
        return SUCCESS
    if not replace:
        return Status.error(f"BindRequest {pod.key} keeps coming back as another placement", NAME)
    try:
        await kube.request(
            "DELETE", where, body={"preconditions": {"uid": existing.uid}} if existing.uid else None
        )
    except KubeError as exc:
        if not (exc.not_found or exc.conflict):
            return Status.error(f"deleting the stale BindRequest {pod.key} failed: {exc}", NAME)
    return None


def new(args: NoArgs, handle: Handle) -> BindRequestBinder:
    return BindRequestBinder(handle)


#: Not in the default profile: `--binding bindrequest` puts it in DefaultBinder's place.
REGISTRATION: Final = Registration(NAME, new, NoArgs, events=frozenset())


def with_bind_requests(spec: ProfileSpec) -> ProfileSpec:
    """`spec` binding by BindRequest: BindRequestBinder at the Bind point in place of the
    plugins the profile binds with through multiPoint (DefaultBinder); a bind plugin the
    profile names at the Bind point itself stays, after it."""
    points = dict(spec.points)
    points["bind"] = (PluginRef(NAME), *(r for r in points.get("bind", ()) if r.name != NAME))
    disabled = dict(spec.disabled)
    disabled["bind"] = disabled.get("bind", frozenset()) | {"*"}
    return dataclasses.replace(spec, points=points, disabled=disabled)
