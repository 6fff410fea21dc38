"""The bind-phase protocol around the Bind extension point, for pods the lock policy selects.

    async with node_locks.hold(node, pod) as node_obj:   # asyncio lock, then the annotation
        re-validate the fit on the API server's state   # one LIST of the node's pods
        pod: <prefix>/bind-phase=allocating, <prefix>/bind-time=<unix seconds>
        Bind plugins (POST pods/binding)
        pod: <prefix>/bind-phase=success | failed
    (released on every path: success, error, cancellation)

The re-validation is what makes several instances safe: each instance's cache may be stale
about the others' binds, but under the node's lock the API server's list of pods on the node
is complete, so two instances never overcommit a node.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import structlog

from ascheduler.binding.nodelock import LockContended, LockSettings, NodeLocks
from ascheduler.framework import Code, CycleState, Framework, Status
from ascheduler.framework.interface import BINDING_ANNOTATIONS
from ascheduler.kube import ApiError, KubeClient
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.model import PodInfo, parse_node, parse_pod

log = structlog.get_logger(__name__)

POLICIES: Final = ("devices", "all", "none")
NODE_LOCK: Final = "NodeLock"


@dataclass(frozen=True)
class BindSettings:
    policy: str = "devices"
    device_resources: frozenset[str] = field(default_factory=lambda: frozenset({"nvidia.com/gpu"}))
    annotation_prefix: str = "ascheduler.io"
    lock: LockSettings = field(default_factory=LockSettings)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(
                f"node lock policy must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )


def shortfall(
    pod: PodInfo, allocatable: dict[str, int], pods_on_node: Iterable[PodInfo]
) -> list[str]:
    """Resources `pod` does not fit in, given the node's allocatable and the pods on it."""
    used: dict[str, int] = {"pods": 0}
    for other in pods_on_node:
        if other.uid == pod.uid or other.terminal:
            continue
        used["pods"] += 1
        for name, value in other.requests.items():
            used[name] = used.get(name, 0) + value
    short = []
    if used["pods"] + 1 > allocatable.get("pods", 0):
        short.append("pods")
    for name, value in sorted(pod.requests.items()):
        if value > allocatable.get(name, 0) - used.get(name, 0):
            short.append(name)
    return short


class LockedBinder:
    def __init__(self, kube: KubeClient, settings: BindSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.locks = NodeLocks(kube, settings.lock)
        self.phase_key = f"{settings.annotation_prefix}/bind-phase"
        self.time_key = f"{settings.annotation_prefix}/bind-time"

    def needs_lock(self, pod: PodInfo) -> bool:
        policy = self.settings.policy
        if policy == "all":
            return True
        if policy == "none":
            return False
        return any(pod.requests.get(r, 0) > 0 for r in self.settings.device_resources)

    async def bind(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not self.needs_lock(pod):
            return await fw.bind(state, pod, node)
        cached = fw.handle.cache.node(node)
        known = (cached.resource_version, cached.annotations) if cached is not None else None
        try:
            async with self.locks.hold(node, pod, known=known) as node_obj:
                status = await self._revalidate(pod, node, node_obj)
                if not status.ok:
                    return status
                stamp = str(int(time.time()))
                try:
                    # Guarded by the version this scheduling decision saw: if the pod changed
                    # since (another instance bound it), this instance must not touch it.
                    version = await self._phase(
                        pod, "allocating", stamp=stamp, version=pod.resource_version
                    )
                except ApiError as exc:
                    if exc.conflict:
                        return Status.error(
                            f"pod {pod.key} changed since it was scheduled", NODE_LOCK
                        )
                    raise
                # `success` rides on the Binding itself: the API server copies its annotations
                # onto the pod in the same write that binds it.
                state.write(BINDING_ANNOTATIONS, {self.phase_key: "success", self.time_key: stamp})
                status = Status.error("bind interrupted", NODE_LOCK)
                try:
                    status = await fw.bind(state, pod, node)
                finally:
                    if not status.ok:  # also on cancellation: never left `allocating`
                        await self._phase_quietly(pod, "failed", version)
                return status
        except LockContended as exc:
            return Status.error(f"node lock: {exc}", NODE_LOCK)
        except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
            return Status.error(f"node lock: {exc}", NODE_LOCK)

    async def _revalidate(self, pod: PodInfo, node: str, node_obj: dict[str, Any]) -> Status:
        listing = await self.kube.get(
            "/api/v1/pods",
            params={
                "fieldSelector": f"spec.nodeName={node},status.phase!=Succeeded,"
                "status.phase!=Failed"
            },
        )
        pods = [parse_pod(raw) for raw in listing.get("items") or []]
        missing = shortfall(pod, dict(parse_node(node_obj).allocatable), pods)
        if not missing:
            return Status()
        reasons = ", ".join(
            "Too many pods" if m == "pods" else f"Insufficient {m}" for m in missing
        )
        log.info("bind_revalidation_failed", pod=pod.key, node=node, reasons=reasons)
        return Status(Code.UNSCHEDULABLE, (f"node {node} no longer fits: {reasons}",), NODE_LOCK)

    async def _phase(
        self, pod: PodInfo, phase: str, *, version: str, stamp: str | None = None
    ) -> str:
        """Set the bind phase if the pod is still at `version`; returns its new version."""
        annotations = {self.phase_key: phase}
        if stamp is not None:
            annotations[self.time_key] = stamp
        updated = await self.kube.patch(
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            {"metadata": {"resourceVersion": version, "annotations": annotations}},
            content_type=MERGE_PATCH,
        )
        return str((updated.get("metadata") or {}).get("resourceVersion", ""))

    async def _phase_quietly(self, pod: PodInfo, phase: str, version: str) -> None:
        try:
            await self._phase(pod, phase, version=version)
        except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("bind_phase_patch_failed", pod=pod.key, phase=phase, error=str(exc))
