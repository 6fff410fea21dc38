"""DynamicResources' binding cycle: the claim writes of PreBind, and their undoing.

PreBind writes each claim: the finalizer (an update), then `status.allocation` and the pod in
`status.reservedFor` (an update of the status with the claim's resourceVersion, so a
concurrent writer conflicts instead of being overwritten; on a conflict the claim is read
again and the write retried unless someone allocated it meanwhile). A claim already reserved
for the pod is reused only if its allocation admits the node being bound: several instances
on one schedulerName may run binding cycles for one pod at once, and the allocation decides
where the pod may go (`dra.reservations`); otherwise PreBind fails and the pod is tried again.
Unreserve undoes only the claim writes of its own cycle, and only those the pod will not use,
as the API server shows the pod: none once it is bound where the allocation admits it. With
node locks on, new allocations are written under the locks of their node and network-attached
pools, after the API server's claims show none of their devices taken (`locks.devicelocks`),
so several instances never allocate one device twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from ascheduler.dra.reservations import Placed, Reuse, placed, release, reuse
from ascheduler.dra.sharing import shared_use
from ascheduler.dra.store import ResourceObjects
from ascheduler.framework import (
    DEVICE_POOL_LABEL_PREFIX,
    SUCCESS,
    DeviceTaken,
    Handle,
    Known,
    KubeClient,
    KubeError,
    LockContended,
    Status,
    lock_wait_message,
    pool_label,
)
from ascheduler.model import PodInfo
from ascheduler.model.dra import FINALIZER, Allocation, ResourceClaim, parse_resource_claim
from ascheduler.plugins.dynamicresources.bindingconditions import enabled, now_stamp
from ascheduler.plugins.dynamicresources.extended import in_memory, write_claim
from ascheduler.plugins.dynamicresources.state import NOT_AVAILABLE, WRITE_ATTEMPTS, _State

log = structlog.get_logger(__name__)


def _pool_labels(labels: Any, allocation: Allocation) -> dict[str, str]:
    """A claim's labels with one per pool `allocation` draws from (`locks.devicelocks`), and none
    left from an earlier allocation."""
    out = {
        str(k): str(v)
        for k, v in (labels.items() if isinstance(labels, dict) else ())
        if not str(k).startswith(DEVICE_POOL_LABEL_PREFIX)
    }
    for d in allocation.devices:
        out[pool_label(d.driver, d.pool)] = "true"
    return out


class ClaimWriter:
    """The plugin's writes of claims: PreBind's, and the undoing of a failed cycle's (from
    Unreserve) and PostFilter's deallocation, which run as tasks of their own."""

    def __init__(self, handle: Handle, objects: ResourceObjects) -> None:
        self.handle = handle
        self.objects = objects
        self.cleanups: set[asyncio.Task[None]] = set()
        #: Per pod uid: the undoing of a failed cycle's claim writes, which the pod's next
        #: PreBind waits for (it could otherwise reuse a reservation about to go).
        self._releasing: dict[str, asyncio.Task[None]] = {}

    async def pre_bind(self, s: _State, pod: PodInfo, node: str) -> Status:
        """PreBind: the claims' writes, under the device locks when they are on."""
        locks = self.handle.device_locks
        if locks is None or not s.allocations:
            return await self._write_claims(s, pod, node)
        local, pools = self.lock_targets(s)
        members = locks.alone(node if local else None, pools)
        if members is not None:
            # No other instance shares the nodes: as a bind made alone, the writes go out
            # without the locks and their check, cut off in time for the others' count of
            # our member Lease (an instance joining waits for them, then sees them).
            try:
                async with members.alone_for():
                    return await self._write_claims(s, pod, node)
            except TimeoutError:
                return Status.error(
                    "device locks: the claim writes were cut off (member Lease not renewed)"
                )
        busy = [
            d.device_id
            for a in s.allocations.values()
            for d in a.devices
            if not d.admin_access and d.share_id is None
        ]
        shared = shared_use(self.objects.table(), s.allocations.values())
        try:
            cached = self.handle.nodes.node(node)
            known = (
                Known(cached.resource_version, cached.annotations) if cached is not None else None
            )
            async with locks.hold(node if local else None, pools, pod, known=known) as held:
                await locks.check(
                    busy, [s.claims[i].uid for i in s.allocations], self.overdrawn, shared
                )
                if not held.writable():
                    return Status.error("device locks: the hold ran out of time")
                async with asyncio.timeout(held.remaining()):
                    return await self._write_claims(s, pod, node)
        except DeviceTaken as exc:
            log.info("device_taken", pod=pod.key, node=node, error=str(exc))
            return Status.error(f"{exc} (by another scheduler)")
        except LockContended as exc:  # another instance allocates there: wait, no error
            return Status.pending(f"device lock: {lock_wait_message(node, exc)}")
        except KubeError as exc:
            return Status.error(f"device lock: {exc}")
        except TimeoutError:
            return Status.error("device locks: the claim writes were cut off with the hold")

    def lock_targets(self, s: _State) -> tuple[bool, list[tuple[str, str]]]:
        """Whether the new allocations use node-local devices, and the network-attached pools
        they draw from (a device no longer in the table counts as both), and the pools whose
        counter sets they consume (partitionable devices of several nodes may share one)."""
        table = self.objects.table()
        local = False
        pools: set[tuple[str, str]] = set()
        for allocation in s.allocations.values():
            for d in allocation.devices:
                if d.admin_access:
                    continue
                row = table.index.get(d.device_id)
                if row is None or table.node_of[row]:
                    local = True
                if row is None or not table.node_of[row] or table.consumes[row]:
                    pools.add((d.driver, d.pool))
        return local, sorted(pools)

    def overdrawn(self, driver: str, pool: str, taken: set[str], adding: set[str]) -> str:
        """Why the devices `adding` overdraw a counter set of the pool beside `taken` (the
        API server's other claims), as the device table has the pool (`dra.counters`)."""
        state = self.objects.table().pools.get((driver, pool))
        if state is None or state.counters is None:
            return ""
        return state.counters.overdrawn(taken, adding)

    def _labels(self, node: str) -> Mapping[str, str]:
        """A node's labels as the cache has them (none for a node it does not know: a term
        naming the node still matches it)."""
        info = self.handle.nodes.node(node)
        return info.labels if info is not None else {}

    async def _write_claims(self, s: _State, pod: PodInfo, node: str) -> Status:
        releasing = self._releasing.get(pod.uid)
        if releasing is not None:
            await asyncio.wait({releasing})
        labels = self._labels(node)
        for i, claim in enumerate(s.claims):
            if in_memory(s, i):
                status = await write_claim(self, s, i, pod, node, labels)
                if not status.ok:
                    return status
                continue
            current = self.objects.claim(claim.namespace, claim.name) or claim
            if current.uid == claim.uid:
                found = reuse(current, pod.uid, node, labels)
                if found is Reuse.DONE:
                    continue
                if found is Reuse.ELSEWHERE:
                    log.info("claim_reserved_elsewhere", pod=pod.key, node=node, claim=claim.key)
                    return Status.error(f"claim {claim.key}: {NOT_AVAILABLE}")
            allocation = s.allocations.get(i)
            try:
                s.claims[i], wrote = await self._bind_claim(claim, allocation, pod, node, labels)
            except _WriteFailed as exc:
                return Status.error(str(exc))
            except KubeError as exc:
                return Status.error(f"claim {claim.namespace}/{claim.name}: {exc}")
            finally:
                if i in s.allocations:
                    self.objects.remove_pending(claim.uid)
            if wrote:
                s.written[i] = allocation
        return SUCCESS

    async def write_one(
        self,
        claim: ResourceClaim,
        allocation: Allocation | None,
        pod: PodInfo,
        node: str,
        labels: Mapping[str, str],
    ) -> tuple[Status, ResourceClaim | None]:
        """One claim's writes (`_bind_claim`), their failure as a status."""
        try:
            written, _ = await self._bind_claim(claim, allocation, pod, node, labels)
        except _WriteFailed as exc:
            return Status.error(str(exc)), None
        except KubeError as exc:
            return Status.error(f"claim {claim.namespace}/{claim.name}: {exc}"), None
        return SUCCESS, written

    async def _bind_claim(
        self,
        claim: ResourceClaim,
        allocation: Allocation | None,
        pod: PodInfo,
        node: str,
        labels: Mapping[str, str],
    ) -> tuple[ResourceClaim, bool]:
        """The claim as written (or as found reserved for the pod, for this node, by another
        instance meanwhile), and whether this call wrote it."""
        kube = self.handle.kube
        if kube is None:
            raise _WriteFailed("no API client to write the claim with")
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        ref = f"{claim.namespace}/{claim.name}"
        body = dict(claim.raw or {})
        refresh = False
        for attempt in range(WRITE_ATTEMPTS):
            if refresh:
                body = await kube.get(path)
                claim = parse_resource_claim(body)
            refresh = True
            if claim.deleting:
                raise _WriteFailed(f"claim {ref} got deleted in the meantime")
            found = reuse(claim, pod.uid, node, labels)
            if found is Reuse.DONE:
                return claim, False
            if found is Reuse.ELSEWHERE:
                raise _WriteFailed(f"claim {ref}: {NOT_AVAILABLE}")
            try:
                if allocation is not None:
                    if claim.allocation is not None:
                        raise _WriteFailed(f"claim {ref} got allocated elsewhere in the meantime")
                    meta = dict(body.get("metadata") or {})
                    labels_now = _pool_labels(meta.get("labels"), allocation)
                    if FINALIZER not in claim.finalizers or labels_now != meta.get("labels"):
                        meta["labels"] = labels_now
                        if FINALIZER not in claim.finalizers:
                            meta["finalizers"] = [*claim.finalizers, FINALIZER]
                        body = (
                            await kube.request("PUT", path, body={**body, "metadata": meta})
                        ).json()
                        claim = parse_resource_claim(body)
                elif claim.allocation is None or not claim.allocation.admits(node, labels):
                    # Allocated at PreFilter, deallocated or reallocated since (by PostFilter
                    # or another instance): the pod must not go where the devices are not.
                    raise _WriteFailed(f"claim {ref}: {NOT_AVAILABLE}")
                status = dict(body.get("status") or {})
                if allocation is not None:
                    status["allocation"] = allocation.to_api()
                status["reservedFor"] = [
                    *(status.get("reservedFor") or []),
                    {"resource": "pods", "name": pod.name, "uid": pod.uid},
                ]
                written_allocation = status.get("allocation")
                if (
                    enabled(self.handle.features)
                    and isinstance(written_allocation, dict)
                    and not written_allocation.get("allocationTimestamp")
                ):
                    # Where binding conditions time out from (kube-scheduler writes it on
                    # every claim it reserves, with or without them).
                    status["allocation"] = {
                        **written_allocation,
                        "allocationTimestamp": now_stamp(),
                    }
                answer = (
                    await kube.request("PUT", f"{path}/status", body={**body, "status": status})
                ).json()
            except KubeError as exc:
                if exc.conflict and attempt + 1 < WRITE_ATTEMPTS:
                    await asyncio.sleep(0.01 * (attempt + 1))
                    continue
                what = "allocation and reservation" if allocation is not None else "reservation"
                raise _WriteFailed(f"add {what} to claim {ref}: {exc}") from exc
            written = parse_resource_claim(answer)
            self.objects.assume_written(written)
            return written, True
        raise _WriteFailed(f"claim {ref}: too many conflicts")

    async def deallocate(self, claim: ResourceClaim) -> None:
        kube = self.handle.kube
        if kube is None or claim.raw is None:
            return
        body = dict(claim.raw)
        status = {
            k: v
            for k, v in (body.get("status") or {}).items()
            if k not in ("allocation", "reservedFor", "devices")
        }
        path = (
            f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/"
            f"{claim.name}/status"
        )
        await kube.request("PUT", path, body={**body, "status": status})

    # -- undoing a failed cycle's writes ---------------------------------------------------

    def spawn_release(
        self, pod: PodInfo, written: list[tuple[ResourceClaim, Allocation | None]]
    ) -> None:
        task = self.spawn(self._release(pod, written, self._releasing.get(pod.uid)))
        if task is not None:
            self._releasing[pod.uid] = task

    async def _release(
        self,
        pod: PodInfo,
        written: list[tuple[ResourceClaim, Allocation | None]],
        before: asyncio.Task[None] | None,
    ) -> None:
        """Undo what a failed binding cycle wrote on `written` (`dra.reservations`): read the
        pod back, then each claim, and write what the plan says with the claim's
        resourceVersion (a conflict reads both again)."""
        try:
            if before is not None:
                await asyncio.wait({before})
            kube = self.handle.kube
            if kube is None:
                return
            for claim, ours in written:
                await self._release_claim(kube, pod, claim, ours)
        finally:
            if self._releasing.get(pod.uid) is asyncio.current_task():
                del self._releasing[pod.uid]

    async def _release_claim(
        self, kube: KubeClient, pod: PodInfo, claim: ResourceClaim, ours: Allocation | None
    ) -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        for attempt in range(WRITE_ATTEMPTS):
            raw_pod = await _read(kube, f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
            body = await _read(kube, path)
            if body is None:
                return
            current = parse_resource_claim(body)
            if current.uid != claim.uid:
                return
            where = placed(raw_pod, pod.uid, current, self._labels)
            plan = release(current, pod.uid, ours, where)
            if not plan.unreserve and not plan.deallocate:
                return
            status = dict(body.get("status") or {})
            if plan.deallocate:
                for key in ("allocation", "reservedFor", "devices"):
                    status.pop(key, None)
            else:
                status["reservedFor"] = [
                    r
                    for r in status.get("reservedFor") or []
                    if not (isinstance(r, dict) and r.get("uid") == pod.uid)
                ]
            try:
                answer = (
                    await kube.request("PUT", f"{path}/status", body={**body, "status": status})
                ).json()
            except KubeError as exc:
                if exc.conflict and attempt + 1 < WRITE_ATTEMPTS:
                    continue
                raise
            self.objects.assume_written(parse_resource_claim(answer))
            log.info(
                "resourceclaim_released",
                pod=pod.key,
                claim=claim.key,
                placed=where.value,
                deallocated=plan.deallocate,
            )
            if where is Placed.PENDING:
                await self._keep_if_bound(kube, pod, claim)
            return

    async def _keep_if_bound(self, kube: KubeClient, pod: PodInfo, claim: ResourceClaim) -> None:
        """After the reservation of a pending pod went: if another instance bound the pod
        meanwhile, to a node the allocation admits, relying on that reservation, put it
        back (the bind may have come after the pod was read, so it is read again)."""
        raw_pod = await _read(kube, f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        latest = self.objects.claim(claim.namespace, claim.name) or claim
        if placed(raw_pod, pod.uid, latest, self._labels) is not Placed.USING:
            return
        assert raw_pod is not None
        node = str(raw_pod["spec"]["nodeName"])
        try:
            await self._bind_claim(latest, None, pod, node, self._labels(node))
        except _WriteFailed as exc:
            log.warning("resourceclaim_not_kept", pod=pod.key, claim=claim.key, error=str(exc))

    def spawn(self, work: Any) -> asyncio.Task[None] | None:
        """A best-effort write outside the cycle (Unreserve and PostFilter cannot await): kept
        until done, its failure logged; the next attempt recovers either way."""
        try:
            task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        except RuntimeError:
            work.close()
            return None
        self.cleanups.add(task)
        task.add_done_callback(self._cleaned)
        return task

    def _cleaned(self, task: asyncio.Task[None]) -> None:
        self.cleanups.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("resourceclaim_write_failed", error=str(task.exception()))


class _WriteFailed(Exception):
    pass


async def _read(kube: KubeClient, path: str) -> Any:
    """An object as the API server has it; None once it is gone."""
    try:
        return await kube.get(path)
    except KubeError as exc:
        if exc.not_found:
            return None
        raise
