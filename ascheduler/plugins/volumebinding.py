"""VolumeBinding: a pod's claims must be bound to volumes its node can reach, or bindable
there (kube-scheduler v1.35's rules; docs/volumes-reference.md, section 1).

PreFilter reads the pod's claims (direct and generic ephemeral): a missing claim, a lost or
deleting one, an ephemeral claim the pod does not own, or an unbound claim of an `Immediate`
class reject the pod (unresolvable). Filter, per node, as columns:

* bound claims: the volume must exist (`node(s) unavailable due to one or more pvc(s) bound
  to non-existent pv(s)`) and its node affinity admit the node (`node(s) didn't match
  PersistentVolume's node affinity`);
* `WaitForFirstConsumer` claims: one already given to another node (`selected-node`) fails
  the others; the rest are matched, smallest request first, to the smallest available
  volume of their class the node reaches (access modes, volume mode, selector, capacity; a
  volume pre-bound to the claim wins or nothing does), no volume twice for one pod; a claim
  left over must be provisionable there: a provisioner, the class's `allowedTopologies`
  (`node(s) didn't find available persistent volumes to bind`), and, for a driver that
  publishes capacity, a CSIStorageCapacity for the class whose topology selects the node
  and whose size fits (`node(s) did not have enough free storage`).

Every reason is unresolvable; a node's reasons are reported together, in that order.
The binding itself (Reserve, PreBind) is not part of this module yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
    Rejection,
    Status,
)
from ascheduler.framework.nodes import BoolArray, NodeTable
from ascheduler.framework.registry import NoArgs, Registration
from ascheduler.model import PodInfo
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.storage import (
    BIND_COMPLETED,
    NO_PROVISIONER,
    SELECTED_NODE,
    StorageClass,
    Volume,
    VolumeClaim,
)
from ascheduler.model.topology import LabelSelector
from ascheduler.model.volumes import CLAIM, EPHEMERAL

NAME: Final = "VolumeBinding"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
REASON_NO_SPACE: Final = "node(s) did not have enough free storage"
REASON_PV_MISSING: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
AVAILABLE: Final = "Available"


def fully_bound(claim: VolumeClaim) -> bool:
    return bool(claim.volume_name) and BIND_COMPLETED in claim.annotations


def affinity_rows(nodes: NodeTable, terms: tuple[NodeSelectorTerm, ...] | None) -> BoolArray:
    """Rows a volume's required node affinity admits (labels only, as kube-scheduler's
    CheckNodeAffinity reads it); cached per set of terms until a node's spec changes."""
    if terms is None:
        return np.ones(nodes.n, dtype=np.bool_)
    key = (NAME, "affinity", terms)
    hit: BoolArray | None = nodes.cached(key)
    if hit is None:
        hit = np.fromiter(
            (any(t.matches("", info.labels) for t in terms) for info in nodes.infos),
            dtype=np.bool_,
            count=nodes.n,
        )
        nodes.remember(key, hit)
    return hit


def topology_rows(nodes: NodeTable, klass: StorageClass) -> BoolArray:
    """Rows a class's `allowedTopologies` admit (no terms: all)."""
    if not klass.allowed_topologies:
        return np.ones(nodes.n, dtype=np.bool_)
    key = (NAME, "topology", klass.allowed_topologies)
    hit: BoolArray | None = nodes.cached(key)
    if hit is None:
        hit = np.fromiter(
            (
                any(
                    bool(term) and all(info.labels.get(k) in values for k, values in term)
                    for term in klass.allowed_topologies
                )
                for info in nodes.infos
            ),
            dtype=np.bool_,
            count=nodes.n,
        )
        nodes.remember(key, hit)
    return hit


@dataclass
class _State:
    bound: list[VolumeClaim] = field(default_factory=list)
    delayed: list[VolumeClaim] = field(default_factory=list)


class VolumeBinding(PreFilterPlugin, FilterPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        storage = self.handle.storage
        claims: list[VolumeClaim] = []
        for v in pod.volumes:
            if v.kind not in (CLAIM, EPHEMERAL):
                continue
            claim = storage.claim(pod.namespace, v.claim)
            if claim is None:
                message = f'persistentvolumeclaim "{v.claim}" not found'
                if v.kind == EPHEMERAL:
                    message = (
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{v.claim}"'
                    )
                return None, Status.unschedulable(message, resolvable=False)
            if claim.phase == "Lost":
                return None, Status.unschedulable(
                    f'persistentvolumeclaim "{claim.name}" bound to non-existent '
                    f'persistentvolume "{claim.volume_name}"',
                    resolvable=False,
                )
            if claim.deleting:
                return None, Status.unschedulable(
                    f'persistentvolumeclaim "{claim.name}" is being deleted', resolvable=False
                )
            if v.kind == EPHEMERAL and claim.owner_uid != pod.uid:
                return None, Status.unschedulable(
                    f"PVC {claim.namespace}/{claim.name} was not created for pod "
                    f"{pod.namespace}/{pod.name} (pod is not owner)",
                    resolvable=False,
                )
            claims.append(claim)
        if not claims:
            return None, SKIP
        s = _State()
        immediate = False
        for claim in claims:
            if fully_bound(claim):
                s.bound.append(claim)
                continue
            klass = storage.storage_class(claim.class_name) if claim.class_name else None
            if klass is not None and klass.delayed and not claim.volume_name:
                s.delayed.append(claim)
            else:
                immediate = True
        if immediate:
            return None, Status.unschedulable(UNBOUND_IMMEDIATE, resolvable=False)
        state.write(NAME, s)
        return None, SUCCESS

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        n = nodes.n
        node_conflict = np.zeros(n, dtype=np.bool_)
        pv_missing = np.zeros(n, dtype=np.bool_)
        # Bound claims: the first that fails on a node decides its reason there.
        undecided = np.ones(n, dtype=np.bool_)
        for claim in s.bound:
            volume = self.handle.storage.volume(claim.volume_name)
            if volume is None:
                pv_missing |= undecided
                break
            fails = undecided & ~affinity_rows(nodes, volume.node_affinity)
            node_conflict |= fails
            undecided &= ~fails
        bind_conflict = np.zeros(n, dtype=np.bool_)
        no_space = np.zeros(n, dtype=np.bool_)
        if s.delayed:
            bind_conflict, no_space = self._delayed(s.delayed, nodes)
        rejected = node_conflict | pv_missing | bind_conflict | no_space
        if not rejected.any():
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return FilterResult.of(
            rejected,
            Rejection(REASON_NODE_CONFLICT, node_conflict, code),
            Rejection(REASON_BIND_CONFLICT, bind_conflict, code),
            Rejection(REASON_NO_SPACE, no_space, code),
            Rejection(REASON_PV_MISSING, pv_missing, code),
        )

    def _delayed(
        self, claims: Sequence[VolumeClaim], nodes: NodeTable
    ) -> tuple[BoolArray, BoolArray]:
        n = nodes.n
        bind_conflict = np.zeros(n, dtype=np.bool_)
        no_space = np.zeros(n, dtype=np.bool_)
        # A claim already given to a node fails every other node at once.
        to_match: list[VolumeClaim] = []
        provision_everywhere: list[VolumeClaim] = []
        fast_fail = np.zeros(n, dtype=np.bool_)
        for claim in claims:
            selected = claim.annotations.get(SELECTED_NODE)
            if selected is None:
                to_match.append(claim)
                continue
            row = nodes.index.get(selected)
            others = np.ones(n, dtype=np.bool_)
            if row is not None:
                others[row] = False
            fast_fail |= others
            provision_everywhere.append(claim)
        # Static matching, smallest request first; `chosen[pv]` says where a volume is taken.
        unmatched: list[tuple[VolumeClaim, BoolArray]] = []
        taken: dict[str, BoolArray] = {}
        for claim in sorted(to_match, key=lambda c: c.request):
            got = self._match(claim, nodes, taken)
            unmatched.append((claim, ~got))
        # What is left must be provisionable where it is left.
        provisionable = np.ones(n, dtype=np.bool_)
        space = np.ones(n, dtype=np.bool_)
        needs = [(c, np.ones(n, dtype=np.bool_)) for c in provision_everywhere] + unmatched
        for claim, where in needs:
            if not where.any():
                continue
            ok, enough = self._provisionable(claim, nodes)
            # The first failing claim decides a node (provision before space).
            failing_here = where & provisionable & space
            provisionable &= ~(failing_here & ~ok)
            space &= ~(failing_here & ok & ~enough)
        bind_conflict = fast_fail | ~provisionable
        no_space = ~space & ~fast_fail
        return bind_conflict, no_space

    def _match(
        self, claim: VolumeClaim, nodes: NodeTable, taken: dict[str, BoolArray]
    ) -> BoolArray:
        """Rows where a volume is found for `claim` (and mark it taken there)."""
        n = nodes.n
        candidates: list[Volume] = []
        prebound: Volume | None = None
        for volume in self.handle.storage.volumes_of_class(claim.class_name):
            ref = volume.claim_ref
            bound_here = (
                ref is not None
                and ref.namespace == claim.namespace
                and ref.name == claim.name
                and (not ref.uid or ref.uid == claim.uid)
            )
            if ref is not None and not bound_here:
                continue
            if volume.capacity < claim.request or volume.volume_mode != claim.volume_mode:
                continue
            if volume.deleting:
                continue
            if bound_here:
                if prebound is None or volume.name < prebound.name:
                    prebound = volume
                continue
            if volume.phase != AVAILABLE:
                continue
            if claim.selector is not None and not claim.selector.matches(volume.labels):
                continue
            if not set(claim.access_modes) <= set(volume.access_modes):
                continue
            candidates.append(volume)
        found = np.zeros(n, dtype=np.bool_)
        if prebound is not None:
            here = affinity_rows(nodes, prebound.node_affinity) & ~taken.get(
                prebound.name, np.zeros(n, dtype=np.bool_)
            )
            taken[prebound.name] = taken.get(prebound.name, np.zeros(n, dtype=np.bool_)) | here
            return here
        for volume in sorted(candidates, key=lambda v: (v.capacity, v.name)):
            free = ~found & affinity_rows(nodes, volume.node_affinity)
            already = taken.get(volume.name)
            if already is not None:
                free &= ~already
            if free.any():
                found |= free
                taken[volume.name] = free if already is None else already | free
        return found

    def _provisionable(self, claim: VolumeClaim, nodes: NodeTable) -> tuple[BoolArray, BoolArray]:
        """(rows where the claim's class can provision it, rows with room for it)."""
        n = nodes.n
        storage = self.handle.storage
        klass = storage.storage_class(claim.class_name)
        none = np.zeros(n, dtype=np.bool_)
        every = np.ones(n, dtype=np.bool_)
        if klass is None or not klass.provisioner or klass.provisioner == NO_PROVISIONER:
            return none, every
        allowed = topology_rows(nodes, klass)
        if not claim.request:
            return allowed, every
        driver = storage.csi_driver(klass.provisioner)
        if driver is None or not driver.storage_capacity:
            return allowed, every
        room = np.zeros(n, dtype=np.bool_)
        for capacity in storage.capacities_of_class(klass.name):
            limit = capacity.maximum_volume_size
            if limit is None:
                limit = capacity.capacity
            if limit is None or limit < claim.request or capacity.node_topology is None:
                continue
            room |= self._selected(nodes, capacity.node_topology)
        return allowed, room

    @staticmethod
    def _selected(nodes: NodeTable, selector: LabelSelector) -> BoolArray:
        key = (NAME, "capacity-topology", selector)
        hit: BoolArray | None = nodes.cached(key)
        if hit is None:
            hit = np.fromiter(
                (selector.matches(info.labels) for info in nodes.infos),
                dtype=np.bool_,
                count=nodes.n,
            )
            nodes.remember(key, hit)
        return hit


def new(args: NoArgs, handle: Handle) -> VolumeBinding:
    return VolumeBinding(handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset(
        {
            ClusterEvent.NODE_ADD,
            ClusterEvent.NODE_LABEL,
            ClusterEvent.STORAGE_CLASS_ADD,
            ClusterEvent.STORAGE_CLASS_UPDATE,
            ClusterEvent.CLAIM_ADD,
            ClusterEvent.CLAIM_UPDATE,
            ClusterEvent.VOLUME_ADD,
            ClusterEvent.VOLUME_UPDATE,
            ClusterEvent.CSI_NODE_ADD,
            ClusterEvent.CSI_NODE_UPDATE,
            ClusterEvent.CSI_DRIVER_UPDATE,
            ClusterEvent.CAPACITY_ADD,
            ClusterEvent.CAPACITY_UPDATE,
        }
    ),
    default_weight=1,
)
