"""VolumeBinding's Score (the StorageCapacityScoring feature gate, alpha, off in v1.35):
how full the node's volumes would be, as kube-scheduler's scorer.go reckons it.

On a node where some claim gets a static volume, per class the claims' requests are set
against those volumes' capacities; elsewhere, per class, the requests of the claims to
provision against the node's CSIStorageCapacity. Each class scores the shape at its
utilization (100% when over or without capacity); the node, the rounded mean over its
classes. All of it as columns over the feasible rows.
"""

from __future__ import annotations

import numpy as np

from ascheduler.framework import BoolArray, IntArray, NodeTable, StorageView
from ascheduler.model.storage import VolumeClaim
from ascheduler.plugins.noderesources import broken_linear
from ascheduler.plugins.volumematching import VolumeState, capacity_limit, selected_rows


def capacity_scores(
    shape: tuple[tuple[int, int], ...],
    s: VolumeState | None,
    storage: StorageView,
    nodes: NodeTable,
    feasible: IntArray,
) -> IntArray:
    """The feasible rows' scores on `shape` (points scaled to 0..100); 0 everywhere for a
    pod with no claim left to bind."""
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
        has, size = node_capacity(storage, claim, nodes)
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
            total += np.where(counted, broken_linear(shape, util), 0)
            classes += counted
    # Go's math.Round of the mean: half away from zero (everything here is >= 0).
    mean = (2 * total + classes) // np.maximum(2 * classes, 1)
    return np.where(classes > 0, mean, 0)


def node_capacity(
    storage: StorageView, claim: VolumeClaim, nodes: NodeTable
) -> tuple[BoolArray, IntArray]:
    """Per row, whether a CSIStorageCapacity admits the claim there and that capacity's
    `capacity` (0 when it gives none): the first such object by namespace/name, where
    kube-scheduler takes the first its lister returns."""
    n = nodes.n
    has = np.zeros(n, dtype=np.bool_)
    size = np.zeros(n, dtype=np.int64)
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
        new = selected_rows(nodes, capacity.node_topology) & ~has
        size[new] = capacity.capacity or 0
        has |= new
    return has, size
