"""VolumeRestrictions: in-tree disks one node cannot mount twice, and claims with the
ReadWriteOncePod access mode that another pod already uses (kube-scheduler v1.35's rules).

* A GCE PD mounted by a pod on the node conflicts unless both mounts are read-only; an AWS
  EBS volume conflicts even then; an iSCSI volume by IQN, unless both are read-only; an RBD
  image when the two share a Ceph monitor, the pool and the image, unless both read-only:
  `node(s) had no available disk`.
* A claim named in a `persistentVolumeClaim` volume must exist (`persistentvolumeclaim "x"
  not found`, unresolvable). If one with ReadWriteOncePod is used by a placed pod anywhere,
  every node is rejected (resolvable: preemption may evict that pod).

The placed pods' disks and claims are indexed by the node table, so a Filter looks only at
the pods sharing a disk with this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.framework import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
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
from ascheduler.model.storage import VolumeClaim, not_found
from ascheduler.model.volumes import CLAIM, DISKS, names_claim

NAME: Final = "VolumeRestrictions"
REASON_DISK: Final = "node(s) had no available disk"
REASON_RWOP: Final = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"
#: Where explain keeps the users of the pod's ReadWriteOncePod claims once found.
_USERS: Final = f"{NAME}/claim-users"


@dataclass
class _State:
    #: The pod's ReadWriteOncePod claims (names in its namespace).
    rwop: frozenset[str]
    #: How many of them placed pods use.
    in_use: int


def claim_problem(handle: Handle, pod: PodInfo, claim: str) -> Status | None:
    """The status a missing or unreadable claim gets (unresolvable), None if it is fine."""
    found = handle.storage.claim(pod.namespace, claim)
    if found is None:
        return Status.unschedulable(not_found("persistentvolumeclaim", claim), resolvable=False)
    if found.errors:
        return Status.unschedulable(
            f'persistentvolumeclaim "{claim}": {found.errors[0]}', resolvable=False
        )
    return None


class VolumeRestrictions(
    PreFilterPlugin, WhatIfFilterPlugin, ExplainFilterPlugin, QueueingHintPlugin
):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """kube-scheduler's hints: a claim the pod names (directly) was created; a pod of the
        same namespace went that held one of its disks or shared one of its claims."""
        if event is ClusterEvent.CLAIM_ADD:
            claim: VolumeClaim = new
            return claim.namespace == pod.namespace and names_claim(
                pod.volumes, claim.name, ephemeral=False
            )
        if event is ClusterEvent.ASSIGNED_POD_DELETE:
            gone: PodInfo = old
            if gone.namespace != pod.namespace:
                return False
            if any(v.conflicts(o) for v in pod.volumes for o in gone.volumes):
                return True
            return any(
                v.kind == CLAIM and names_claim(gone.volumes, v.claim, ephemeral=False)
                for v in pod.volumes
            )
        return True

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        disks = any(v.kind in DISKS for v in pod.volumes)
        rwop = set()
        for v in pod.volumes:
            if v.kind != CLAIM:
                continue
            problem = claim_problem(self.handle, pod, v.claim)
            if problem is not None:
                return None, problem
            claim = self.handle.storage.claim(pod.namespace, v.claim)
            assert claim is not None
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(v.claim)
        in_use = sum(1 for name in rwop if nodes.claim_in_use(pod.namespace, name))
        if not disks and not in_use:
            return None, SKIP
        state.write(NAME, _State(frozenset(rwop), in_use))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        conflicted = np.zeros(nodes.n, dtype=np.bool_)
        for v in pod.volumes:
            if v.kind in DISKS:
                rows = nodes.disk_conflict_rows(v)
                if rows:
                    conflicted[np.fromiter(rows, dtype=np.int64, count=len(rows))] = True
        if s.in_use > 0:
            taken = ~conflicted
            return FilterResult.of(
                np.ones(nodes.n, dtype=np.bool_),
                Rejection(REASON_DISK, conflicted, Code.UNSCHEDULABLE),
                Rejection(REASON_RWOP, taken, Code.UNSCHEDULABLE),
            )
        if not conflicted.any():
            return None
        return FilterResult.single(REASON_DISK, conflicted)

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """The pods on the row holding one of the pod's disks; the pods (anywhere) using one
        of its ReadWriteOncePod claims."""
        s: _State | None = state.read(NAME)
        if s is None:
            return []
        lines = []
        for v in pod.volumes:
            if v.kind not in DISKS:
                continue
            holders = sorted(
                placed.key
                for placed in nodes.pods(row).values()
                if any(v.conflicts(o) for o in placed.volumes)
            )
            if holders:
                lines.append(f"{v.kind} {v.disk} is mounted by pod {', '.join(holders)}")
        if s.in_use:
            users: dict[str, list[str]] | None = state.read(_USERS)
            if users is None:
                users = self._claim_users(pod, s, nodes)
                state.write(_USERS, users)
            for claim, pods in sorted(users.items()):
                lines.append(
                    f"persistentvolumeclaim {claim} (ReadWriteOncePod) is used by pod "
                    + ", ".join(pods)
                )
        return lines

    @staticmethod
    def _claim_users(pod: PodInfo, s: _State, nodes: NodeTable) -> dict[str, list[str]]:
        """The placed pods using each of the pod's ReadWriteOncePod claims, with their nodes
        (one pass over the placed pods of the namespace)."""
        out: dict[str, list[str]] = {}
        for row in range(nodes.n):
            for placed in nodes.pods(row).values():
                if placed.namespace != pod.namespace or placed.uid == pod.uid:
                    continue
                for o in placed.volumes:
                    if o.kind == CLAIM and o.claim in s.rwop:
                        out.setdefault(o.claim, []).append(f"{placed.key} on {nodes.names[row]}")
        return {claim: sorted(pods) for claim, pods in out.items()}

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
        gone = {p.uid for p in removed}
        for v in pod.volumes:
            if v.kind not in DISKS:
                continue
            on_row = [
                o
                for uid, placed in nodes.pods(row).items()
                if uid not in gone
                for o in placed.volumes
                if o.kind == v.kind
            ]
            on_row += [o for p in added for o in p.volumes if o.kind == v.kind]
            if any(v.conflicts(o) for o in on_row):
                return Status.unschedulable(REASON_DISK)

        def uses(p: PodInfo) -> int:
            if p.namespace != pod.namespace:
                return 0
            return sum(1 for o in p.volumes if o.kind == CLAIM and o.claim in s.rwop)

        in_use = s.in_use - sum(uses(p) for p in removed) + sum(uses(p) for p in added)
        if in_use > 0:
            return Status.unschedulable(REASON_RWOP)
        return SUCCESS


def new(args: NoArgs, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset(
        {
            ClusterEvent.ASSIGNED_POD_DELETE,
            ClusterEvent.NODE_ADD,
            ClusterEvent.CLAIM_ADD,
        }
    ),
    default_weight=1,
)
