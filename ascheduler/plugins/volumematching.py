"""VolumeBinding's matching of a pod's claims to volumes, per node, as columns
(kube-scheduler v1.35's rules; docs/volumes-reference.md, section 1).

`WaitForFirstConsumer` claims: one already given to another node (`selected-node`) fails the
others; the rest are matched, smallest request first, to the smallest available volume of
their class the node reaches (access modes, volume mode, selector, capacity; a volume
pre-bound to the claim wins or nothing does), no volume twice for one pod; a claim left over
must be provisionable there: a provisioner, the class's `allowedTopologies` (`node(s) didn't
find available persistent volumes to bind`), and, for a driver that publishes capacity, a
CSIStorageCapacity for the class whose topology selects the node and whose size fits
(`node(s) did not have enough free storage`).

The plan (`VolumeState`) is kept in the cycle state: Reserve takes the chosen node's row of
it, Score reads the volumes it gives each node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np

from ascheduler.framework import BoolArray, IntArray, NodeTable, StorageView
from ascheduler.model.affinity import NodeSelectorTerm
from ascheduler.model.quantity import format_quantity
from ascheduler.model.storage import (
    BIND_COMPLETED,
    NO_PROVISIONER,
    SELECTED_NODE,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeClaim,
)
from ascheduler.model.topology import LabelSelector

#: The node table's cache keys start with the plugin's name.
CACHE: Final = "VolumeBinding"
AVAILABLE: Final = "Available"


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
        (CACHE, "affinity", terms), lambda info: any(t.matches("", info.labels) for t in terms)
    )


def topology_rows(nodes: NodeTable, klass: StorageClass) -> BoolArray:
    """Rows a class's `allowedTopologies` admit (no terms: all)."""
    if not klass.allowed_topologies:
        return np.ones(nodes.n, dtype=np.bool_)
    key = (CACHE, "topology", klass.allowed_topologies)
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


def selected_rows(nodes: NodeTable, selector: LabelSelector) -> BoolArray:
    """Rows a CSIStorageCapacity's node topology selects."""
    key = (CACHE, "capacity-topology", selector)
    hit: BoolArray | None = nodes.cached(key)
    if hit is None:
        hit = np.fromiter(
            (selector.matches(info.labels) for info in nodes.infos),
            dtype=np.bool_,
            count=nodes.n,
        )
        nodes.remember(key, hit)
    return hit


def capacity_limit(capacity: StorageCapacity) -> int | None:
    """The largest volume a CSIStorageCapacity admits: `maximumVolumeSize`, else `capacity`."""
    if capacity.maximum_volume_size is not None:
        return capacity.maximum_volume_size
    return capacity.capacity


@dataclass
class ClaimMatch:
    """A delayed claim's static matching: per row, the index in `volumes` of the volume it
    gets there, -1 where none."""

    claim: VolumeClaim
    volumes: list[Volume]
    choice: IntArray


@dataclass
class VolumeState:
    bound: list[VolumeClaim] = field(default_factory=list)
    delayed: list[VolumeClaim] = field(default_factory=list)
    #: Filter's plan for the delayed claims, read by Reserve for the chosen node.
    matches: list[ClaimMatch] = field(default_factory=list)
    selected: list[VolumeClaim] = field(default_factory=list)
    #: Reserve's assumptions: volume names and claim keys, undone by Unreserve.
    assumed_volumes: list[str] = field(default_factory=list)
    assumed_claims: list[str] = field(default_factory=list)
    #: What PreBind writes: (volume, claim) bindings and claims to provision.
    bindings: list[tuple[Volume, VolumeClaim]] = field(default_factory=list)
    provisions: list[VolumeClaim] = field(default_factory=list)
    all_bound: bool = True


def match_delayed(
    storage: StorageView, s: VolumeState, nodes: NodeTable
) -> tuple[BoolArray, BoolArray]:
    """Rows where the delayed claims cannot all be bound or provisioned, and rows without
    room to provision them; records the plan in `s` (`selected`, `matches`)."""
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
        match = match_claim(storage, claim, nodes, taken)
        s.matches.append(match)
        unmatched.append((claim, match.choice < 0))
    # What is left must be provisionable where it is left.
    provisionable = np.ones(n, dtype=np.bool_)
    space = np.ones(n, dtype=np.bool_)
    needs = [(c, np.ones(n, dtype=np.bool_)) for c in provision_everywhere] + unmatched
    for claim, where in needs:
        if not where.any():
            continue
        ok, enough = provisionable_rows(storage, claim, nodes)
        # The first failing claim decides a node (provision before space).
        failing_here = where & provisionable & space
        provisionable &= ~(failing_here & ~ok)
        space &= ~(failing_here & ok & ~enough)
    bind_conflict = fast_fail | ~provisionable
    no_space = ~space & ~fast_fail
    return bind_conflict, no_space


def match_claim(
    storage: StorageView, claim: VolumeClaim, nodes: NodeTable, taken: dict[str, BoolArray]
) -> ClaimMatch:
    """The volume `claim` gets on each row (marked taken there)."""
    n = nodes.n
    candidates: list[Volume] = []
    prebound: Volume | None = None
    for volume in storage.volumes_of_class(claim.class_name):
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
        return ClaimMatch(claim, [prebound], choice)
    ordered = sorted(candidates, key=lambda v: (v.capacity, v.name))
    for i, volume in enumerate(ordered):
        free = (choice < 0) & affinity_rows(nodes, volume.node_affinity)
        already = taken.get(volume.name)
        if already is not None:
            free &= ~already
        if free.any():
            choice[free] = i
            taken[volume.name] = free if already is None else already | free
    return ClaimMatch(claim, ordered, choice)


def provisionable_rows(
    storage: StorageView, claim: VolumeClaim, nodes: NodeTable
) -> tuple[BoolArray, BoolArray]:
    """(rows where the claim's class can provision it, rows with room for it)."""
    n = nodes.n
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
        room |= selected_rows(nodes, capacity.node_topology)
    return allowed, room


def explain_unmatched(
    storage: StorageView, match: ClaimMatch, nodes: NodeTable, row: int
) -> list[str]:
    """Why a claim to bind gets no volume on the row: the volumes of its class, and whether
    the class can provision it here, or has no room for it."""
    claim = match.claim
    size = format_quantity("ephemeral-storage", claim.request)
    head = f"persistentvolumeclaim {claim.name} ({size} of class {claim.class_name or '(none)'})"
    reach = [v.name for v in match.volumes if affinity_rows(nodes, v.node_affinity)[row]]
    if reach:
        volumes = f"the {len(reach)} volume(s) that fit it here go to the pod's other claims"
    elif match.volumes:
        volumes = f"none of the {len(match.volumes)} volume(s) that fit it reaches this node"
    else:
        volumes = "no available volume fits it"
    klass = storage.storage_class(claim.class_name)
    if klass is None or not klass.provisioner or klass.provisioner == NO_PROVISIONER:
        return [f"{head}: {volumes}, and the class does not provision"]
    ok, enough = provisionable_rows(storage, claim, nodes)
    if not ok[row]:
        return [f"{head}: {volumes}, and the class's allowedTopologies exclude this node"]
    if not enough[row]:
        return [
            f"{head}: {volumes}, and no CSIStorageCapacity of {klass.provisioner} for "
            "this node admits a volume that large"
        ]
    return []
