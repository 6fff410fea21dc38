"""DynamicResources for extended resources backed by DRA (`dra.extended` says what kube does).

PreFilter (`prepare`) notes the pod's extended resources some DeviceClass backs, and a claim
an earlier cycle created for it. Filter (`filter_extended`) works per group of nodes: which of
those resources a node lacks in allocatable decides the claim it gets (kube makes one claim per
node; the nodes lacking the same resources get the same one), so the nodes are grouped by that
set, a column operation per resource, and each group runs the count-first filter (`counting`)
with its claim beside the pod's own. Where a group lacks none, only the pod's own claims are
allocated (the device-plugin way: NodeResourcesFit counts the resource). A request neither a
node's allocatable nor a class can serve fails the node (`cannot fit resource`).

Reserve fixes the node, so the state becomes that node's (`settle`): its claim joins the pod's
claims, to be allocated, held in flight and written like them. PreBind (`write_claim`) creates
it first, then writes its allocation and reservation as any claim's, then the pod's
`status.extendedResourceClaimStatus`. A claim a failed cycle created is deleted by Unreserve
(`release`); one found at PreFilter is from a cycle that failed after creating it: every node
refuses the pod (`cannot schedule extended resource claim`) and PostFilter deletes it, so the
next attempt starts afresh, as kube-scheduler does.

Several instances may run binding cycles for one pod at once (`dra.reservations`); each
creates a claim of its own, and the pod's status can name only one. So the status is written
with the pod's resourceVersion, after reading it: a status naming another live claim of the
pod (another instance's) fails this PreBind, whose Unreserve deletes this cycle's claim; and
Unreserve keeps a claim that the pod, bound meanwhile, names in its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

import numpy as np
import structlog

from ascheduler.dra.cel import SelectorCache
from ascheduler.dra.extended import (
    IN_MEMORY_NAME,
    Extended,
    ExtendedResolver,
    RequestMapping,
    backed_requests,
    claim_for,
    creation_body,
    extended_requests,
    find_claim,
    new_claim_uid,
    requests_and_mappings,
    resolver_for,
)
from ascheduler.dra.sharing import CapacityView
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import DRA_EXTENDED_RESOURCE, Features
from ascheduler.framework import (
    SUCCESS,
    BoolArray,
    Handle,
    KubeClient,
    KubeError,
    NodeTable,
    Seconds,
    Status,
)
from ascheduler.model import Node, PodInfo
from ascheduler.model.dra import FINALIZER, Allocation, ResourceClaim, parse_resource_claim
from ascheduler.plugins.dynamicresources.counting import filter_allocations
from ascheduler.plugins.dynamicresources.state import IN_USE, WRITE_ATTEMPTS, _State

log = structlog.get_logger(__name__)

STALE: Final = "cannot schedule extended resource claim"
CANNOT_FIT: Final = "cannot fit resource"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
DELETED: Final = "deletion of ResourceClaim completed"


class ClaimWriter(Protocol):
    """What of `binding.ClaimWriter` the claim's writes use."""

    handle: Handle
    objects: ResourceObjects

    def spawn(self, work: Any) -> Any: ...

    async def write_one(
        self,
        claim: ResourceClaim,
        allocation: Allocation | None,
        pod: PodInfo,
        node: str,
        labels: Mapping[str, str],
    ) -> tuple[Status, ResourceClaim | None]: ...


def prepare(features: Features, pod: PodInfo, objects: ResourceObjects) -> Extended | None:
    """PreFilter: None unless the gate is on and some class backs a resource the pod asks
    for."""
    if DRA_EXTENDED_RESOURCE not in features:
        return None
    backed = backed_requests(pod, resolver_for(objects))
    if not backed:
        return None
    return Extended(
        uid=new_claim_uid(),
        requests=extended_requests(pod),
        backed=backed,
        stale=find_claim(pod, objects.latest.values()),
    )


def stale_status(ext: Extended, pod: PodInfo, objects: ResourceObjects) -> Status | None:
    """PreFilter's checks of an earlier cycle's claim, as of any claim of the pod: in use by
    others, or being allocated."""
    claim = ext.stale
    if claim is None:
        return None
    if claim.allocation is not None:
        if not claim.can_be_reserved and not claim.reserved_for_pod(pod.uid):
            return Status.unschedulable(IN_USE, resolvable=False)
    elif objects.has_pending_allocation(claim.uid):
        return Status.unschedulable(
            f"resource claim {claim.namespace}/{claim.name} is in the process of being allocated",
            resolvable=False,
        )
    return None


def all_requests_claim(pod: PodInfo, ext: Extended, objects: ResourceObjects) -> ResourceClaim:
    """The claim of a node lacking every backed resource (whose selectors PreFilter makes
    sure are known)."""
    return _claim(pod, ext, resolver_for(objects), list(ext.backed))[0]


def _claim(
    pod: PodInfo, ext: Extended, resolver: ExtendedResolver, names: list[str]
) -> tuple[ResourceClaim, list[RequestMapping]]:
    requests, mappings = requests_and_mappings(pod.extended_containers, names, resolver)
    return claim_for(pod, ext.uid, requests), mappings


def _lacking(nodes: NodeTable, name: str) -> BoolArray:
    """Rows whose allocatable has none of `name`."""
    row = nodes.resource_row(name)
    if row is None:
        return np.ones(nodes.n, dtype=np.bool_)
    lacking: BoolArray = nodes.alloc[row] == 0
    return lacking


def filter_extended(
    objects: ResourceObjects,
    selectors: SelectorCache,
    filter_timeout: Seconds,
    s: _State,
    pod: PodInfo,
    nodes: NodeTable,
    open_rows: BoolArray,
    capacity: CapacityView | None = None,
) -> list[tuple[str, BoolArray]]:
    """Filter's rejections, over the rows still open (module docstring); the allocations
    found and the scores go into `s`, as `counting.filter_allocations` puts them."""
    ext = s.extended
    assert ext is not None
    n = nodes.n
    if ext.stale is not None:
        return [(STALE, open_rows.copy())]
    resolver = resolver_for(objects)
    cannot_fit = np.zeros(n, dtype=np.bool_)
    for name in ext.requests:
        if name not in ext.backed:
            cannot_fit |= _lacking(nodes, name)
    cannot_fit &= open_rows
    open_rows = open_rows & ~cannot_fit
    backed = sorted(ext.backed)
    group = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(backed):
        group |= _lacking(nodes, name).astype(np.int64) << bit
    out: list[tuple[str, BoolArray]] = [(CANNOT_FIT, cannot_fit)]
    for key in np.unique(group[open_rows]).tolist():
        rows = open_rows & (group == key)
        names = [name for bit, name in enumerate(backed) if key >> bit & 1]
        if names:
            claim, _ = _claim(pod, ext, resolver, names)
            part = _State(
                [*s.claims, claim], [*s.to_allocate, len(s.claims)], [*s.available_on, None]
            )
        elif s.to_allocate:
            part = _State(s.claims, s.to_allocate, s.available_on)
        else:
            continue
        out += filter_allocations(objects, selectors, filter_timeout, part, nodes, rows, capacity)
        s.found.update(part.found)
        if part.scores is not None:
            if s.scores is None:
                s.scores = np.zeros(n, dtype=np.int64)
            s.scores[rows] = part.scores[rows]
    return out


def settle(s: _State, pod: PodInfo, node: Node, objects: ResourceObjects) -> None:
    """Reserve: the claim of `node` joins the pod's claims to allocate (if the node lacks
    any backed resource), as Filter's search on the node had it."""
    ext = s.extended
    if ext is None or ext.index is not None or ext.stale is not None:
        return
    names = [name for name in sorted(ext.backed) if node.allocatable.get(name, 0) == 0]
    if not names:
        return
    claim, ext.mappings = _claim(pod, ext, resolver_for(objects), names)
    ext.index = len(s.claims)
    s.claims.append(claim)
    s.available_on.append(None)
    s.to_allocate.append(ext.index)


def in_memory(s: _State, index: int) -> bool:
    ext = s.extended
    return ext is not None and ext.index == index and s.claims[index].name == IN_MEMORY_NAME


async def write_claim(
    writer: ClaimWriter, s: _State, index: int, pod: PodInfo, node: str, labels: Mapping[str, str]
) -> Status:
    """PreBind for the in-memory claim: create it, write its allocation and the pod's
    reservation, then the pod's `status.extendedResourceClaimStatus`."""
    ext = s.extended
    assert ext is not None
    claim = s.claims[index]
    kube = writer.handle.kube
    try:
        if kube is None:
            return Status.error("no API client to create the claim with")
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims"
        try:
            created = parse_resource_claim(await kube.post(path, creation_body(claim)))
        except KubeError as exc:
            return Status.error(
                f"create claim for extended resources {claim.namespace}/{claim.name}: {exc}"
            )
        log.info("extended_resource_claim_created", pod=pod.key, claim=created.key)
        s.claims[index] = created
        allocation = s.allocations.get(index)
        status, written = await writer.write_one(created, allocation, pod, node, labels)
        if written is not None:
            s.claims[index] = written
        if not status.ok:
            return status
    finally:
        objects = writer.objects
        objects.remove_pending(claim.uid)
    return await _patch_pod_status(kube, pod, s.claims[index].name, ext.mappings)


def _named_claim(raw_pod: Any) -> str:
    """The claim a pod's `status.extendedResourceClaimStatus` names ("" if none)."""
    status = (raw_pod or {}).get("status") or {}
    named = status.get("extendedResourceClaimStatus") or {}
    return str(named.get("resourceClaimName") or "") if isinstance(named, Mapping) else ""


async def _live(kube: KubeClient, namespace: str, name: str) -> bool:
    """Whether claim `name` exists and is not being deleted."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    try:
        claim = parse_resource_claim(await kube.get(path))
    except KubeError as exc:
        if exc.not_found:
            return False
        raise
    return not claim.deleting


async def _patch_pod_status(
    kube: KubeClient, pod: PodInfo, claim_name: str, mappings: list[RequestMapping]
) -> Status:
    ref = f"{pod.namespace}/{pod.name}"
    if not mappings:
        return Status.error(
            f"nil or empty request mappings, no update of pod {ref} ExtendedResourceClaimStatus"
        )
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
    for attempt in range(WRITE_ATTEMPTS):
        try:
            current = await kube.get(path)
            named = _named_claim(current)
            if named and named != claim_name and await _live(kube, pod.namespace, named):
                return Status.error(
                    f"pod {ref}: ExtendedResourceClaimStatus names claim {named} (by another "
                    "scheduler)"
                )
            body = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "status": {
                    "extendedResourceClaimStatus": {
                        "requestMappings": [m.to_api() for m in mappings],
                        "resourceClaimName": claim_name,
                    }
                },
            }
            await kube.patch(f"{path}/status", body, content_type=STRATEGIC_MERGE_PATCH)
            return SUCCESS
        except KubeError as exc:
            if (exc.conflict or exc.transient) and attempt + 1 < WRITE_ATTEMPTS:
                continue
            return Status.error(f"update pod {ref} ExtendedResourceClaimStatus: {exc}")
    return Status.error(f"update pod {ref} ExtendedResourceClaimStatus: too many conflicts")


def release(s: _State, pod: PodInfo, writer: ClaimWriter) -> None:
    """Unreserve: delete the claim this cycle created (an in-memory one has nothing to
    undo)."""
    ext = s.extended
    if ext is None or ext.index is None or ext.index >= len(s.claims):
        return
    claim = s.claims[ext.index]
    if claim.name != IN_MEMORY_NAME:
        writer.spawn(delete_claim(writer, claim, pod=pod))


async def delete_claim(
    writer: ClaimWriter, claim: ResourceClaim, *, pod: PodInfo | None = None
) -> None:
    """kube's `deleteClaim`: its finalizer removed (an update, read again on a conflict),
    then the claim deleted; one already gone is done. With `pod` (Unreserve), a claim the
    pod, bound meanwhile by another instance, names in its status is kept."""
    kube = writer.handle.kube
    if kube is None:
        return
    if pod is not None:
        try:
            raw_pod = await kube.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        except KubeError as exc:
            if not exc.not_found:
                raise
            raw_pod = None
        meta = (raw_pod or {}).get("metadata") or {}
        spec = (raw_pod or {}).get("spec") or {}
        if (
            meta.get("uid") == pod.uid
            and spec.get("nodeName")
            and _named_claim(raw_pod) == claim.name
        ):
            log.info("extended_resource_claim_kept", pod=pod.key, claim=claim.key)
            return
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
    body = dict(claim.raw or {})
    for attempt in range(WRITE_ATTEMPTS):
        if attempt:
            try:
                body = dict(await kube.get(path))
            except KubeError as exc:
                if exc.not_found:
                    return
                raise
        meta = dict(body.get("metadata") or {})
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        meta["finalizers"] = finalizers
        try:
            await kube.put(path, {**body, "metadata": meta})
            break
        except KubeError as exc:
            if exc.not_found:
                return
            if exc.conflict and attempt + 1 < WRITE_ATTEMPTS:
                continue
            raise
    try:
        await kube.delete(path)
    except KubeError as exc:
        if not exc.not_found:
            raise
    log.info("extended_resource_claim_deleted", claim=claim.key)


def delete_stale(s: _State, pod: PodInfo, writer: ClaimWriter, dry_run: bool) -> Status | None:
    """PostFilter: the claim of an earlier cycle is deleted (None: there is none), unless
    the pod, bound meanwhile by another instance, names it."""
    ext = s.extended
    if ext is None or ext.stale is None:
        return None
    if not dry_run:
        writer.spawn(delete_claim(writer, ext.stale, pod=pod))
    return Status.unschedulable(DELETED)
