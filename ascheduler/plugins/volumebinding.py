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

Reserve assumes the chosen node's volumes taken (`claimRef`) and its claims to provision
annotated with the node, so the next cycles see them; Unreserve puts the informers' versions
back. PreBind writes the same (merge patches with the assumed objects' resourceVersion as a
precondition), then polls the informers' objects every second until the volume controller
has bound them all, or fails with kube-scheduler's messages (a volume or claim deleted, a
claimRef reset, provisioning failed) or after `bindTimeoutSeconds`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ascheduler.features import STORAGE_CAPACITY_SCORING
from ascheduler.framework import KubeError
from ascheduler.framework.errors import ConfigError, PluginArgsError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHintPlugin,
    Rejection,
    ReservePlugin,
    ScorePlugin,
    Status,
    slot_released,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.registry import Registration
from ascheduler.framework.storage import AssumeError, not_found
from ascheduler.model import PodInfo, version_number
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.quantity import format_quantity
from ascheduler.model.storage import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    NO_PROVISIONER,
    SELECTED_NODE,
    ClaimRef,
    CSIDriver,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeClaim,
)
from ascheduler.model.topology import LabelSelector
from ascheduler.model.volumes import CLAIM, CSI, EPHEMERAL, names_claim
from ascheduler.plugins.noderesources import (
    MAX_CUSTOM_SCORE,
    UtilizationShapePoint,
    broken_linear,
)

NAME: Final = "VolumeBinding"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
REASON_NO_SPACE: Final = "node(s) did not have enough free storage"
REASON_PV_MISSING: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
AVAILABLE: Final = "Available"
#: How often PreBind looks whether the volume controller has finished.
POLL_INTERVAL: Final = 1.0


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    """kube-scheduler's `VolumeBindingArgs`. `shape` (utilization -> score points) is for
    the StorageCapacityScoring feature gate (alpha, off in v1.35): without the gate it is
    refused when the plugin is built, as kube-scheduler refuses it; with it, it defaults to
    0% -> 10, 100% -> 0."""

    bind_timeout_seconds: int = 600
    shape: tuple[UtilizationShapePoint, ...] | None = None

    def __post_init__(self) -> None:
        if self.bind_timeout_seconds < 0:
            raise PluginArgsError(
                "bindTimeoutSeconds: invalid BindTimeoutSeconds, should not be a negative value"
            )
        shape = self.shape or ()
        for i in range(1, len(shape)):
            if shape[i - 1].utilization >= shape[i].utilization:
                raise PluginArgsError(
                    f"shape[{i}].utilization: values must be sorted in increasing order"
                )


#: StorageCapacityScoring's default shape: emptier volumes score higher.
DEFAULT_SHAPE: Final = ((0, MAX_CUSTOM_SCORE), (100, 0))
SHAPE_REFUSED: Final = (
    "shape: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"
)


def bound_to(volume: Volume, claim: VolumeClaim) -> bool:
    """kube's IsVolumeBoundToClaim."""
    ref = volume.claim_ref
    return (
        ref is not None
        and ref.namespace == claim.namespace
        and ref.name == claim.name
        and (not ref.uid or ref.uid == claim.uid)
    )


def fully_bound(claim: VolumeClaim) -> bool:
    return bool(claim.volume_name) and BIND_COMPLETED in claim.annotations


def affinity_rows(nodes: NodeTable, terms: tuple[NodeSelectorTerm, ...] | None) -> BoolArray:
    """Rows a volume's required node affinity admits (labels only, as kube-scheduler's
    CheckNodeAffinity reads it); cached per set of terms until a node's spec changes."""
    if terms is None:
        return np.ones(nodes.n, dtype=np.bool_)
    return nodes.rows_where(
        (NAME, "affinity", terms), lambda info: any(t.matches("", info.labels) for t in terms)
    )


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
class _Match:
    """A delayed claim's static matching: per row, the index in `volumes` of the volume it
    gets there, -1 where none."""

    claim: VolumeClaim
    volumes: list[Volume]
    choice: IntArray


@dataclass
class _State:
    bound: list[VolumeClaim] = field(default_factory=list)
    delayed: list[VolumeClaim] = field(default_factory=list)
    #: Filter's plan for the delayed claims, read by Reserve for the chosen node.
    matches: list[_Match] = field(default_factory=list)
    selected: list[VolumeClaim] = field(default_factory=list)
    #: Reserve's assumptions: volume names and claim keys, undone by Unreserve.
    assumed_volumes: list[str] = field(default_factory=list)
    assumed_claims: list[str] = field(default_factory=list)
    #: What PreBind writes: (volume, claim) bindings and claims to provision.
    bindings: list[tuple[Volume, VolumeClaim]] = field(default_factory=list)
    provisions: list[VolumeClaim] = field(default_factory=list)
    all_bound: bool = True


def capacity_limit(capacity: StorageCapacity) -> int | None:
    """The largest volume a CSIStorageCapacity admits: `maximumVolumeSize`, else `capacity`."""
    if capacity.maximum_volume_size is not None:
        return capacity.maximum_volume_size
    return capacity.capacity


class VolumeBinding(
    PreFilterPlugin,
    ExplainFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    QueueingHintPlugin,
):
    name = NAME

    def __init__(
        self,
        args: VolumeBindingArgs,
        handle: Handle,
        *,
        shape: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        self.args = args
        self.handle = handle
        #: StorageCapacityScoring's points, scores scaled to 0..100; None: no Score.
        self.shape = (
            None
            if shape is None
            else tuple((u, v * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for u, v in shape)
        )

    # -- queueing hints (kube-scheduler's) ---------------------------------------------------

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """A claim the pod names (a generic ephemeral one too) was created or changed; a
        class was created or its allowedTopologies changed; a CSINode was created or its
        migrated plugins changed; a CSIStorageCapacity was created or admits larger volumes;
        a CSIDriver of one of the pod's inline volumes stopped publishing capacity. Volumes
        and nodes: always."""
        if event in (ClusterEvent.CLAIM_ADD, ClusterEvent.CLAIM_UPDATE):
            claim: VolumeClaim = new
            return claim.namespace == pod.namespace and names_claim(pod.volumes, claim.name)
        if event is ClusterEvent.STORAGE_CLASS_UPDATE:
            before: StorageClass = old
            after: StorageClass = new
            return before.allowed_topologies != after.allowed_topologies
        if event is ClusterEvent.CSI_NODE_UPDATE:
            old_node: CSINode = old
            new_node: CSINode = new
            return old_node.migrated_plugins != new_node.migrated_plugins
        if event is ClusterEvent.CAPACITY_UPDATE:
            was = capacity_limit(old)
            now = capacity_limit(new)
            return now is not None and (was is None or now > was)
        if event is ClusterEvent.CSI_DRIVER_UPDATE:
            old_driver: CSIDriver = old
            new_driver: CSIDriver = new
            return (
                old_driver.storage_capacity
                and not new_driver.storage_capacity
                and any(v.kind == CSI and v.driver == new_driver.name for v in pod.volumes)
            )
        return True

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        storage = self.handle.storage
        claims: list[VolumeClaim] = []
        for v in pod.volumes:
            if v.kind not in (CLAIM, EPHEMERAL):
                continue
            claim = storage.claim(pod.namespace, v.claim)
            if claim is None:
                message = not_found("persistentvolumeclaim", v.claim)
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
            if claim.errors:
                return None, Status.unschedulable(
                    f'persistentvolumeclaim "{claim.name}": {claim.errors[0]}', resolvable=False
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
                volume = storage.volume(claim.volume_name)
                if volume is not None and volume.errors:
                    return None, Status.unschedulable(
                        f'persistentvolume "{volume.name}": {volume.errors[0]}',
                        resolvable=False,
                    )
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
            bind_conflict, no_space = self._delayed(s, nodes)
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

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """Per claim that keeps the pod off the row: a bound volume's node affinity (with the
        node's values of the keys it names) or its absence; a claim being provisioned for
        another node; for a claim to bind, the volumes of its class and whether the class
        can provision it here, or has no room for it."""
        s: _State | None = state.read(NAME)
        if s is None:
            return []
        storage = self.handle.storage
        labels = nodes.infos[row].labels
        lines = []
        for claim in s.bound:
            volume = storage.volume(claim.volume_name)
            if volume is None:
                lines.append(
                    f"persistentvolumeclaim {claim.name} is bound to persistentvolume "
                    f"{claim.volume_name}, which does not exist"
                )
            elif not affinity_rows(nodes, volume.node_affinity)[row]:
                lines.append(
                    f"persistentvolumeclaim {claim.name}: persistentvolume {volume.name}'s node "
                    f"affinity excludes this node{_node_values(volume.node_affinity, labels)}"
                )
        for claim in s.selected:
            selected = claim.annotations.get(SELECTED_NODE)
            if selected != nodes.names[row]:
                lines.append(
                    f"persistentvolumeclaim {claim.name} is being provisioned for node {selected}"
                )
        for match in s.matches:
            if match.choice[row] >= 0:
                continue
            lines.extend(self._unmatched(match, nodes, row))
        return lines

    def _unmatched(self, match: _Match, nodes: NodeTable, row: int) -> list[str]:
        claim = match.claim
        size = format_quantity("ephemeral-storage", claim.request)
        head = (
            f"persistentvolumeclaim {claim.name} ({size} of class {claim.class_name or '(none)'})"
        )
        reach = [v.name for v in match.volumes if affinity_rows(nodes, v.node_affinity)[row]]
        if reach:
            volumes = f"the {len(reach)} volume(s) that fit it here go to the pod's other claims"
        elif match.volumes:
            volumes = f"none of the {len(match.volumes)} volume(s) that fit it reaches this node"
        else:
            volumes = "no available volume fits it"
        klass = self.handle.storage.storage_class(claim.class_name)
        if klass is None or not klass.provisioner or klass.provisioner == NO_PROVISIONER:
            return [f"{head}: {volumes}, and the class does not provision"]
        ok, enough = self._provisionable(claim, nodes)
        if not ok[row]:
            return [f"{head}: {volumes}, and the class's allowedTopologies exclude this node"]
        if not enough[row]:
            return [
                f"{head}: {volumes}, and no CSIStorageCapacity of {klass.provisioner} for "
                "this node admits a volume that large"
            ]
        return []

    def _delayed(self, s: _State, nodes: NodeTable) -> tuple[BoolArray, BoolArray]:
        claims = s.delayed
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
        s.selected = provision_everywhere
        s.matches = []
        # Static matching, smallest request first; `chosen[pv]` says where a volume is taken.
        unmatched: list[tuple[VolumeClaim, BoolArray]] = []
        taken: dict[str, BoolArray] = {}
        for claim in sorted(to_match, key=lambda c: c.request):
            match = self._match(claim, nodes, taken)
            s.matches.append(match)
            unmatched.append((claim, match.choice < 0))
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

    def _match(self, claim: VolumeClaim, nodes: NodeTable, taken: dict[str, BoolArray]) -> _Match:
        """The volume `claim` gets on each row (marked taken there)."""
        n = nodes.n
        candidates: list[Volume] = []
        prebound: Volume | None = None
        for volume in self.handle.storage.volumes_of_class(claim.class_name):
            bound_here = bound_to(volume, claim)
            if volume.claim_ref is not None and not bound_here:
                continue
            if volume.capacity < claim.request or volume.volume_mode != claim.volume_mode:
                continue
            if volume.deleting or volume.errors:
                continue  # (a volume that does not parse is offered to no claim)
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
        choice = np.full(n, -1, dtype=np.int64)
        if prebound is not None:
            here = affinity_rows(nodes, prebound.node_affinity) & ~taken.get(
                prebound.name, np.zeros(n, dtype=np.bool_)
            )
            taken[prebound.name] = taken.get(prebound.name, np.zeros(n, dtype=np.bool_)) | here
            choice[here] = 0
            return _Match(claim, [prebound], choice)
        ordered = sorted(candidates, key=lambda v: (v.capacity, v.name))
        for i, volume in enumerate(ordered):
            free = (choice < 0) & affinity_rows(nodes, volume.node_affinity)
            already = taken.get(volume.name)
            if already is not None:
                free &= ~already
            if free.any():
                choice[free] = i
                taken[volume.name] = free if already is None else already | free
        return _Match(claim, ordered, choice)

    # -- Score (StorageCapacityScoring) ------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        """Skipped without the gate only, as kube-scheduler's: with it, a pod with no claim
        left to bind scores 0 on every node, and says so."""
        return SKIP if self.shape is None else SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        """kube-scheduler's: on a node where some claim gets a static volume, per class the
        claims' requests against those volumes' capacities; elsewhere, per class, the
        requests of the claims to provision against the node's CSIStorageCapacity. Each
        class scores the shape at its utilization (100% when over or without capacity); the
        node, the rounded mean over its classes."""
        s: _State | None = state.read(NAME)
        assert self.shape is not None
        k = len(feasible)
        if s is None:
            return np.zeros(k, dtype=np.int64)
        static = np.zeros(k, dtype=np.bool_)
        by_class: dict[str, list[IntArray]] = {}

        def entry(table: dict[str, list[IntArray]], name: str) -> list[IntArray]:
            if name not in table:
                zero = np.zeros(k, dtype=np.int64)
                table[name] = [zero, zero.copy(), zero.copy()]
            return table[name]

        for match in s.matches:
            choice = match.choice[feasible]
            hit = choice >= 0
            if not hit.any():
                continue
            sizes = np.array([v.capacity for v in match.volumes], dtype=np.int64)
            e = entry(by_class, match.claim.class_name)
            e[0] += np.where(hit, match.claim.request, 0)
            e[1] += np.where(hit, sizes[np.maximum(choice, 0)], 0)
            e[2] |= hit
            static |= hit
        dynamic: dict[str, list[IntArray]] = {}
        needs = [(c, np.ones(k, dtype=np.bool_)) for c in s.selected]
        needs += [(m.claim, m.choice[feasible] < 0) for m in s.matches]
        for claim, where in needs:
            has, size = self._node_capacity(claim, nodes)
            here = where & ~static & has[feasible]
            if not here.any():
                continue
            e = entry(dynamic, claim.class_name)
            e[0] += np.where(here, claim.request, 0)
            e[1] = np.where(here, size[feasible], e[1])
            e[2] |= here
        total = np.zeros(k, dtype=np.int64)
        classes = np.zeros(k, dtype=np.int64)
        for table, rows in ((by_class, static), (dynamic, ~static)):
            for requested, capacity, present in table.values():
                counted = (present > 0) & rows
                over = (capacity == 0) | (requested > capacity)
                util = np.where(over, 100, requested * 100 // np.maximum(capacity, 1))
                total += np.where(counted, broken_linear(self.shape, util), 0)
                classes += counted
        # Go's math.Round of the mean: half away from zero (everything here is >= 0).
        mean = (2 * total + classes) // np.maximum(2 * classes, 1)
        return np.where(classes > 0, mean, 0)

    def _node_capacity(self, claim: VolumeClaim, nodes: NodeTable) -> tuple[BoolArray, IntArray]:
        """Per row, whether a CSIStorageCapacity admits the claim there and that capacity's
        `capacity` (0 when it gives none): the first such object by namespace/name, where
        kube-scheduler takes the first its lister returns."""
        n = nodes.n
        has = np.zeros(n, dtype=np.bool_)
        size = np.zeros(n, dtype=np.int64)
        storage = self.handle.storage
        klass = storage.storage_class(claim.class_name)
        if klass is None or not claim.request:
            return has, size
        driver = storage.csi_driver(klass.provisioner)
        if driver is None or not driver.storage_capacity:
            return has, size
        for capacity in sorted(storage.capacities_of_class(klass.name), key=lambda c: c.key):
            limit = capacity_limit(capacity)
            if limit is None or limit < claim.request or capacity.node_topology is None:
                continue
            new = self._selected(nodes, capacity.node_topology) & ~has
            size[new] = capacity.capacity or 0
            has |= new
        return has, size

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

    # -- Reserve / Unreserve -------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """kube-scheduler's AssumePodVolumes: the chosen node's volumes taken (claimRef) and
        claims to provision annotated with the node, in the assume cache."""
        s: _State | None = state.read(NAME)
        if s is None:
            return SUCCESS
        storage = self.handle.storage
        current = [storage.claims.get(c.key) for c in (*s.bound, *s.delayed)]
        if all(c is not None and fully_bound(c) for c in current):
            s.all_bound = True
            return SUCCESS
        row = self.handle.nodes.index.get(node)
        if row is None:
            return Status.error(f'no pod volume found for node "{node}"')
        bindings = [
            (m.volumes[int(m.choice[row])], m.claim) for m in s.matches if m.choice[row] >= 0
        ]
        provisions = [*s.selected, *(m.claim for m in s.matches if m.choice[row] < 0)]
        try:
            for volume, claim in bindings:
                if bound_to(volume, claim) and BOUND_BY_CONTROLLER in volume.annotations:
                    continue
                annotations = dict(volume.annotations)
                if not bound_to(volume, claim):
                    annotations.setdefault(BOUND_BY_CONTROLLER, "yes")
                taken = dataclasses.replace(
                    volume,
                    claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid),
                    annotations=annotations,
                )
                storage.volumes.assume(taken)
                s.assumed_volumes.append(volume.name)
            for claim in provisions:
                annotated = dataclasses.replace(
                    claim, annotations={**claim.annotations, SELECTED_NODE: node}
                )
                storage.claims.assume(annotated)
                s.assumed_claims.append(claim.key)
        except AssumeError as exc:
            self.unreserve(state, pod, node)
            return Status.error(str(exc))
        s.bindings, s.provisions, s.all_bound = bindings, provisions, False
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        s: _State | None = state.read(NAME)
        if s is None:
            return
        for name in s.assumed_volumes:
            self.handle.storage.volumes.restore(name)
        for key in s.assumed_claims:
            self.handle.storage.claims.restore(key)
        s.assumed_volumes, s.assumed_claims = [], []

    # -- PreBind -------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The writes kube-scheduler makes (each volume's claimRef, then each claim's
        selected-node), then a wait, polled every second up to `bindTimeoutSeconds`, for
        the volume controller to finish binding; the node lock is not held meanwhile (it is
        taken by the bind that follows), nor the binding cycle's slot."""
        s: _State | None = state.read(NAME)
        if s is None or s.all_bound:
            return SUCCESS
        kube = self.handle.kube
        written: dict[str, int] = {}
        if kube is not None:
            try:
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
            except KubeError as exc:
                return Status.error(f"binding volumes: {exc}")
        async with slot_released(state):
            return await self._wait_bound(s, node, written)

    async def _wait_bound(self, s: _State, node: str, written: dict[str, int]) -> Status:
        """Polled every second up to `bindTimeoutSeconds`: the volume controller's answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.args.bind_timeout_seconds
        while True:
            if loop.time() + POLL_INTERVAL > deadline:
                return Status.error("binding volumes: context deadline exceeded")
            await asyncio.sleep(POLL_INTERVAL)
            try:
                if self.check_bindings(s, node, written):
                    return SUCCESS
            except _BindingFailed as exc:
                return Status.error(f"binding volumes: {exc}")

    def check_bindings(self, s: _State, node: str, written: dict[str, int]) -> bool:
        """kube-scheduler's checkBindings on the informers' objects: True once every volume
        and claim is bound; _BindingFailed when the binding cannot complete."""
        storage = self.handle.storage
        info = self.handle.nodes.node(node)
        if info is None:
            raise _BindingFailed(f'failed to get node "{node}": node "{node}" not found')
        done = True
        for volume, claim in s.bindings:
            pv = storage.volumes.informed.get(volume.name)
            if pv is None:
                raise _BindingFailed(
                    f'failed to check binding: persistentvolumes "{volume.name}" not found'
                )
            pvc = storage.claims.informed.get(claim.key)
            if pvc is None:
                raise _BindingFailed(
                    f'failed to check binding: persistentvolumeclaims "{claim.key}" not found'
                )
            if version_number(pv) < written.get(f"pv/{volume.name}", 0):
                done = False
                continue
            _check_affinity(pv, info.name, info.labels)
            if pv.claim_ref is None or not pv.claim_ref.uid:
                raise _BindingFailed(f'ClaimRef got reset for pv "{pv.name}"')
            if not fully_bound(pvc):
                done = False
        for claim in s.provisions:
            pvc = storage.claims.informed.get(claim.key)
            if pvc is None:
                raise _BindingFailed(
                    "failed to check provisioning pvc: persistentvolumeclaims "
                    f'"{claim.key}" not found'
                )
            if version_number(pvc) < written.get(f"pvc/{claim.key}", 0):
                done = False
                continue
            if not pvc.annotations:
                raise _BindingFailed(f'selectedNode annotation reset for PVC "{pvc.name}"')
            if pvc.annotations.get(SELECTED_NODE) != node:
                raise _BindingFailed(f'provisioning failed for PVC "{pvc.name}"')
            if pvc.volume_name:
                pv = storage.volumes.informed.get(pvc.volume_name)
                if pv is None:
                    done = False
                    continue
                _check_affinity(pv, info.name, info.labels)
            if not fully_bound(pvc):
                done = False
        return done


def _node_values(terms: tuple[NodeSelectorTerm, ...] | None, labels: Any) -> str:
    keys = sorted({r.key for t in terms or () for r in t.expressions})
    if not keys:
        return ""
    have = ", ".join(f"{k}={labels[k]}" if k in labels else f"no {k}" for k in keys)
    return f" (node has {have})"


class _BindingFailed(Exception):
    pass


def _answer_version(answer: Any) -> int:
    meta = answer.get("metadata") if isinstance(answer, dict) else None
    try:
        return int(meta.get("resourceVersion", 0)) if isinstance(meta, dict) else 0
    except (TypeError, ValueError):
        return 0


def _check_affinity(pv: Volume, node: str, labels: Any) -> None:
    if pv.node_affinity is not None and not any(t.matches("", labels) for t in pv.node_affinity):
        raise _BindingFailed(
            f'pv "{pv.name}" node affinity doesn\'t match node "{node}": '
            "no matching NodeSelectorTerms"
        )


def new(args: VolumeBindingArgs, handle: Handle) -> VolumeBinding:
    if STORAGE_CAPACITY_SCORING not in handle.features:
        if args.shape is not None:
            raise ConfigError([SHAPE_REFUSED])
        return VolumeBinding(args, handle)
    points = tuple((p.utilization, p.score) for p in args.shape or ()) or DEFAULT_SHAPE
    return VolumeBinding(args, handle, shape=points)


REGISTRATION: Final = Registration(
    NAME,
    new,
    VolumeBindingArgs,
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
