"""VolumeBinding: a pod's claims must be bound to volumes its node can reach, or bindable
there (kube-scheduler v1.35's rules; docs/volumes-reference.md, section 1).

PreFilter reads the pod's claims (direct and generic ephemeral): a missing claim, a lost or
deleting one, an ephemeral claim the pod does not own, or an unbound claim of an `Immediate`
class reject the pod (unresolvable). Filter, per node, as columns:

* bound claims: the volume must exist (`node(s) unavailable due to one or more pvc(s) bound
  to non-existent pv(s)`) and its node affinity admit the node (`node(s) didn't match
  PersistentVolume's node affinity`);
* `WaitForFirstConsumer` claims: matched to volumes, or provisioned, as volumematching.py
  tells (`node(s) didn't find available persistent volumes to bind`, `node(s) did not have
  enough free storage`).

Every reason is unresolvable; a node's reasons are reported together, in that order.

Reserve assumes the chosen node's volumes taken (`claimRef`) and its claims to provision
annotated with the node, so the next cycles see them; Unreserve puts the informers' versions
back. PreBind writes the same and waits for the volume controller (volumeprebind.py); Score,
behind the StorageCapacityScoring gate, is volumescoring.py's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.features import STORAGE_CAPACITY_SCORING, Features
from ascheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    AssumeError,
    ClusterEvent,
    Code,
    ConfigError,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    KubeError,
    NodeTable,
    PluginArgsError,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHintPlugin,
    Registration,
    Rejection,
    ReservePlugin,
    ScorePlugin,
    Status,
    slot_released,
)
from ascheduler.model import PodInfo
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.storage import (
    BOUND_BY_CONTROLLER,
    SELECTED_NODE,
    ClaimRef,
    CSIDriver,
    CSINode,
    StorageClass,
    VolumeClaim,
    not_found,
)
from ascheduler.model.volumes import CLAIM, CSI, EPHEMERAL, names_claim
from ascheduler.plugins.noderesources import MAX_CUSTOM_SCORE, UtilizationShapePoint
from ascheduler.plugins.volumematching import (
    VolumeState,
    affinity_rows,
    bound_to,
    capacity_limit,
    explain_unmatched,
    fully_bound,
    match_delayed,
)
from ascheduler.plugins.volumeprebind import wait_bound, write_bindings
from ascheduler.plugins.volumescoring import capacity_scores

NAME: Final = "VolumeBinding"
REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
REASON_NO_SPACE: Final = "node(s) did not have enough free storage"
REASON_PV_MISSING: Final = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"


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
        s = VolumeState()
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
        s: VolumeState | None = state.read(NAME)
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
            bind_conflict, no_space = match_delayed(self.handle.storage, s, nodes)
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
        s: VolumeState | None = state.read(NAME)
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
            lines.extend(explain_unmatched(storage, match, nodes, row))
        return lines

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
        """kube-scheduler's, as volumescoring.py tells."""
        assert self.shape is not None
        s: VolumeState | None = state.read(NAME)
        return capacity_scores(self.shape, s, self.handle.storage, nodes, feasible)

    # -- Reserve / Unreserve -------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """kube-scheduler's AssumePodVolumes: the chosen node's volumes taken (claimRef) and
        claims to provision annotated with the node, in the assume cache."""
        s: VolumeState | None = state.read(NAME)
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
        s: VolumeState | None = state.read(NAME)
        if s is None:
            return
        for name in s.assumed_volumes:
            self.handle.storage.volumes.restore(name)
        for key in s.assumed_claims:
            self.handle.storage.claims.restore(key)
        s.assumed_volumes, s.assumed_claims = [], []

    # -- PreBind -------------------------------------------------------------------------------

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Work only when some volume is still to bind (a pod without claims, or with
        all of them bound, is skipped)."""
        s: VolumeState | None = state.read(NAME)
        return SKIP if s is None or s.all_bound else SUCCESS

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """The writes kube-scheduler makes (each volume's claimRef, then each claim's
        selected-node), then a wait, polled every second up to `bindTimeoutSeconds`, for
        the volume controller to finish binding; the node lock is not held meanwhile (it is
        taken by the bind that follows), nor the binding cycle's slot."""
        s: VolumeState | None = state.read(NAME)
        if s is None or s.all_bound:
            return SUCCESS
        kube = self.handle.kube
        written: dict[str, int] = {}
        if kube is not None:
            try:
                written = await write_bindings(kube, s, node)
            except KubeError as exc:
                return Status.error(f"binding volumes: {exc}")
        async with slot_released(state):
            return await wait_bound(self.handle, s, node, written, self.args.bind_timeout_seconds)


def _node_values(terms: tuple[NodeSelectorTerm, ...] | None, labels: Any) -> str:
    keys = sorted({r.key for t in terms or () for r in t.expressions})
    if not keys:
        return ""
    have = ", ".join(f"{k}={labels[k]}" if k in labels else f"no {k}" for k in keys)
    return f" (node has {have})"


def new(args: VolumeBindingArgs, handle: Handle) -> VolumeBinding:
    if STORAGE_CAPACITY_SCORING not in handle.features:
        if args.shape is not None:
            raise ConfigError([SHAPE_REFUSED])
        return VolumeBinding(args, handle)
    points = tuple((p.utilization, p.score) for p in args.shape or ()) or DEFAULT_SHAPE
    return VolumeBinding(args, handle, shape=points)


def with_default_shape(args: VolumeBindingArgs, features: Features) -> VolumeBindingArgs:
    """kube-scheduler's `SetDefaults_VolumeBindingArgs`: with StorageCapacityScoring on (by
    default from 1.37) a shape left out (or empty) is `DEFAULT_SHAPE`, and written so."""
    if args.shape or STORAGE_CAPACITY_SCORING not in features:
        return args
    shape = tuple(UtilizationShapePoint(u, s) for u, s in DEFAULT_SHAPE)
    return dataclasses.replace(args, shape=shape)


REGISTRATION: Final = Registration(
    NAME,
    new,
    VolumeBindingArgs,
    release_defaults=with_default_shape,
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
