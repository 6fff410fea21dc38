"""NodeVolumeLimits: a node takes no more CSI volumes of a driver than its CSINode's
`allocatable.count` for that driver (kube-scheduler v1.35's CSI limits).

The pod's countable volumes (see the cache's `AttachedVolumes`) that are not already attached
to the node are added to the unique volumes of that driver its pods use; above the limit the
node is rejected with `node(s) exceed max volume count`. Nodes without a CSINode, or whose
CSINode gives the driver no count, are not limited. A new pod's claim that is missing, or a
generic ephemeral claim the pod does not own, rejects every node with kube-scheduler's message
(unresolvable). The attached counts are node table columns kept as pods come and go.

VolumeAttachments count as well: a CSI volume attached to a node counts there even when no
pod the scheduler sees uses it (a pod deleted before its volume was detached).

With the VolumeLimitScaling gate (alpha in 1.35 and 1.36, beta and on in 1.37) a node must
also have the CSI driver of each of the pod's volumes installed (listed in its CSINode),
checked before the counts: `<driver> CSI driver is not installed on the node`
(Unschedulable). A driver without a CSIDriver object is taken to be installed everywhere; in
1.35 every driver with one is checked, from 1.36 only those whose CSIDriver sets
`preventPodSchedulingIfMissing`. kube-scheduler checks the drivers in its map's (random)
order; where a node lacks several, the first by name is the one named here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.features import VOLUME_LIMIT_SCALING
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    AttachmentsView,
    BoolArray,
    ClaimError,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NoArgs,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Rejection,
    Status,
    WhatIfFilterPlugin,
)
from ascheduler.model import PodInfo
from ascheduler.model.storage import PORTWORX_INLINE, CSINode, VolumeAttachment, VolumeClaim
from ascheduler.model.volumes import AWS_EBS, CLAIM, EPHEMERAL, GCE_PD, PORTWORX, names_claim

NAME: Final = "NodeVolumeLimits"
REASON: Final = "node(s) exceed max volume count"
NOT_INSTALLED: Final = "{} CSI driver is not installed on the node"
_COUNTED: Final = (CLAIM, EPHEMERAL, GCE_PD, AWS_EBS, PORTWORX)


@dataclass
class _State:
    #: Unique volume name -> driver; None when the pod's claims could not be read.
    volumes: dict[str, str] | None
    error: str = ""


def _counts(csi: CSINode) -> dict[str, int]:
    return {name: d.count or 0 for name, d in csi.drivers.items()}


class NodeVolumeLimits(
    PreFilterPlugin, WhatIfFilterPlugin, ExplainFilterPlugin, QueueingHintPlugin
):
    name = NAME

    def __init__(
        self,
        handle: Handle,
        attachments: AttachmentsView | None,
        *,
        driver_check: bool = False,
        opt_in: bool = False,
    ) -> None:
        self.handle = handle
        self._attachments = attachments
        #: VolumeLimitScaling: refuse nodes without the volumes' CSI drivers.
        self.driver_check = driver_check
        #: 1.36 on: only drivers whose CSIDriver sets preventPodSchedulingIfMissing.
        self.opt_in = opt_in

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """kube-scheduler's hints: a CSINode raised a driver's count; a placed pod with
        countable volumes went; a claim the pod names was created; a volume was detached
        (for a pod with claims, or with inline disks of the detaching driver)."""
        if event is ClusterEvent.CSI_NODE_UPDATE:
            before = _counts(old)
            return any(count > before.get(name, 0) for name, count in _counts(new).items())
        if event is ClusterEvent.ASSIGNED_POD_DELETE:
            gone: PodInfo = old
            return any(v.kind in _COUNTED for v in gone.volumes)
        if event is ClusterEvent.CLAIM_ADD:
            claim: VolumeClaim = new
            return claim.namespace == pod.namespace and names_claim(pod.volumes, claim.name)
        if event is ClusterEvent.VOLUME_ATTACHMENT_DELETE:
            detached: VolumeAttachment = old
            return any(
                # Inline Portworx volumes are migratable in every release (the translator's
                # word), counted or not.
                v.kind == CLAIM or PORTWORX_INLINE.get(v.kind) == detached.attacher
                for v in pod.volumes
            )
        return True

    @property
    def attachments(self) -> AttachmentsView:
        """The cache's attachments (read only after PreFilter found them: it skips every pod
        on a handle without a cache, which counts nothing attached)."""
        if self._attachments is None:
            raise RuntimeError(f"{NAME}: the handle has no attachments")
        return self._attachments

    def limits(self, nodes: NodeTable, driver: str) -> IntArray:
        """Per row, the CSINode's count for `driver`; -1 where there is none."""
        storage = self.handle.storage
        key = (NAME, "limits", driver, storage.csi_node_generation)
        hit: IntArray | None = nodes.cached(key)
        if hit is not None:
            return hit
        out = np.full(nodes.n, -1, dtype=np.int64)
        for row, name in enumerate(nodes.names):
            csi = storage.csi_node(name)
            if csi is not None:
                entry = csi.drivers.get(driver)
                if entry is not None and entry.count is not None:
                    out[row] = entry.count
        nodes.remember(key, out)
        return out

    def _checked(self, driver: str) -> bool:
        """Whether `driver`'s installation is checked (`checkCSIDriverOnNode` can say no)."""
        found = self.handle.storage.csi_driver(driver)
        if found is None:
            return False
        return found.prevent_scheduling_if_missing or not self.opt_in

    def installed(self, nodes: NodeTable, driver: str) -> BoolArray:
        """Per row, whether the node's CSINode lists `driver` (no CSINode: no)."""
        storage = self.handle.storage
        key = (NAME, "installed", driver, storage.csi_node_generation)
        hit: BoolArray | None = nodes.cached(key)
        if hit is not None:
            return hit
        out = np.zeros(nodes.n, dtype=np.bool_)
        for row, name in enumerate(nodes.names):
            csi = storage.csi_node(name)
            out[row] = csi is not None and driver in csi.drivers
        nodes.remember(key, out)
        return out

    def _missing(self, drivers: set[str]) -> list[str]:
        """The drivers whose installation is checked, by name."""
        if not self.driver_check:
            return []
        return sorted(d for d in drivers if self._checked(d))

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        if not any(v.kind in _COUNTED for v in pod.volumes) or self._attachments is None:
            return None, SKIP
        try:
            volumes = self.attachments.resolve(pod, new=True)
        except ClaimError as exc:
            state.write(NAME, _State(None, str(exc)))
            return None, SUCCESS
        if not volumes:
            return None, SKIP
        state.write(NAME, _State(volumes))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        if s.volumes is None:
            everywhere = np.ones(nodes.n, dtype=np.bool_)
            return FilterResult.of(
                everywhere, Rejection(s.error, everywhere, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            )
        drivers = set(s.volumes.values())
        missing: list[Rejection] = []
        absent = np.zeros(nodes.n, dtype=np.bool_)
        for driver in self._missing(drivers):
            lacking = ~self.installed(nodes, driver) & ~absent
            if lacking.any():
                missing.append(Rejection(NOT_INSTALLED.format(driver), lacking))
                absent |= lacking
        over = np.zeros(nodes.n, dtype=np.bool_)
        for driver in drivers:
            limit = self.limits(nodes, driver)
            if not (limit >= 0).any():
                continue
            uniques = [u for u, d in s.volumes.items() if d == driver]
            new = np.full(nodes.n, len(uniques), dtype=np.int64)
            for unique in uniques:
                rows = self.attachments.rows_with(unique)
                if rows:
                    new[np.array(rows, dtype=np.int64)] -= 1
            attached = self.attachments.attached(driver)
            over |= (limit >= 0) & (new > 0) & (attached + new > limit)
        over &= ~absent
        return FilterResult.of(absent | over, *missing, Rejection(REASON, over))

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """Per driver over its limit on the row: attached, new, and the limit."""
        s: _State | None = state.read(NAME)
        if s is None or s.volumes is None:
            return []
        for driver in self._missing(set(s.volumes.values())):
            if not self.installed(nodes, driver)[row]:
                return [f"{driver}: the node's CSINode does not list this CSI driver"]
        lines = []
        for driver in sorted(set(s.volumes.values())):
            limit = int(self.limits(nodes, driver)[row])
            if limit < 0:
                continue
            uniques = [u for u, d in s.volumes.items() if d == driver]
            new = sum(1 for u in uniques if row not in self.attachments.rows_with(u))
            attached = int(self.attachments.attached(driver)[row])
            if new and attached + new > limit:
                lines.append(
                    f"{driver}: {attached} volume(s) attached, {new} more would exceed its "
                    f"limit of {limit}"
                )
        return lines

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        s: _State | None = state.read(NAME)
        if s is None:
            return SUCCESS
        if s.volumes is None:
            return Status.unschedulable(s.error, resolvable=False)
        for driver in self._missing(set(s.volumes.values())):
            if not self.installed(nodes, driver)[row]:
                return Status.unschedulable(NOT_INSTALLED.format(driver))
        node = nodes.names[row]
        on_node = self.attachments.on_node(node)
        for p in removed:
            for unique in self.attachments.volumes_of(p.uid):
                if unique in on_node:
                    driver, users, vas = on_node[unique]
                    if users <= 1 and vas <= 0:
                        del on_node[unique]
                    else:
                        on_node[unique] = (driver, users - 1, vas)
        for p in added:
            for unique, driver in self.attachments.resolve(p, new=False).items():
                _, users, vas = on_node.get(unique, (driver, 0, 0))
                on_node[unique] = (driver, users + 1, vas)
        for driver in set(s.volumes.values()):
            limit = int(self.limits(nodes, driver)[row])
            if limit < 0:
                continue
            # Not new where a pod uses it already (attached by a VolumeAttachment alone, it
            # counts twice, as in kube-scheduler).
            new = sum(
                1
                for u, d in s.volumes.items()
                if d == driver and (u not in on_node or on_node[u][1] <= 0)
            )
            attached = sum(1 for d, _, _ in on_node.values() if d == driver)
            if new and attached + new > limit:
                return Status.unschedulable(REASON)
        return SUCCESS


def new(args: NoArgs, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(
        handle,
        handle.attachments,
        driver_check=VOLUME_LIMIT_SCALING in handle.features,
        opt_in=handle.features.since(1, 36),
    )


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset(
        {
            ClusterEvent.CSI_NODE_ADD,
            ClusterEvent.CSI_NODE_UPDATE,
            ClusterEvent.ASSIGNED_POD_DELETE,
            ClusterEvent.CLAIM_ADD,
            ClusterEvent.VOLUME_ATTACHMENT_DELETE,
        }
    ),
    default_weight=1,
)
