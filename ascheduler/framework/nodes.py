"""`NodeTable`: every node as a row of integer columns, so filters and scores run over all nodes
at once with numpy instead of a Python loop per node. It is what plugins read: the node records
(`infos`, `names`, `index`, `node()`), each row's pods (`pods()`), resource columns, host ports,
and caches keyed by pod shape. This class is the read view plugins are written against; the
scheduler's cache owns the table and mutates it (`ascheduler.cache.nodetable`). The pod index
(which row holds each pod, count columns by pod predicate) is `ascheduler.framework.podindex`.

Rows are dense (0..n-1); removing a node moves the last row into its place. Resources are rows
of the `alloc` / `requested` matrices: cpu (millicores), memory, ephemeral-storage, pods (the
node's pod count is its `pods` request), then any other resource (`nvidia.com/gpu`, hugepages)
as a node first advertises it. Only nodes add resource rows: a resource no node has is
absent everywhere (`resource_row` is None), so a pod naming thousands of made-up resources
costs no memory per node. `nonzero` holds cpu and memory with kube-scheduler's per-container
defaults, which the scoring plugins use.

Usage is kept exactly, in Python integers per row (`RowUsage`), and the int64 columns hold it
saturated at `MAX_QUANTITY`: however many enormous pods land on a node, its columns never
overflow, and removing a pod restores exactly what was there before. Every mutation computes
first and assigns last, so none can leave a row half-updated.

The table is also the scheduling cycle's snapshot. kube-scheduler copies its cache into a
snapshot because informer goroutines keep mutating the cache during a cycle; here informers,
binding tasks and the scheduling cycle share one event loop and the plugins' part of a cycle
never awaits, so the table cannot change under PreFilter, Filter, PreScore or Score. The one
exception is a profile with HTTP extenders: the cycle awaits their answers between Filter and
Score, and the table may move on meanwhile (informer events only: this instance's pods are
assumed by the cycle itself), so what crosses those awaits names nodes, not rows; Score then
reads the live table, and a PostFilter after them reads its diagnosis by
`Diagnosis.node_names`. `spec_generation` counts changes to what node-shape masks
depend on (labels, taints, unschedulable, the set of nodes); plugins cache such masks per pod
shape until it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ascheduler.framework.podindex import (
    BoolArray,
    Domains,
    IntArray,
    PodIndex,
    PodPredicate,
    selector_hint,
)
from ascheduler.model import Node, PodInfo
from ascheduler.model.pod import HostPort

CPU: Final = 0
MEMORY: Final = 1
EPHEMERAL: Final = 2
PODS: Final = 3
BASE_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage", "pods")

__all__ = [
    "BASE_RESOURCES",
    "CPU",
    "EPHEMERAL",
    "MEMORY",
    "PODS",
    "BoolArray",
    "Domains",
    "IntArray",
    "NodeTable",
    "PodPredicate",
    "RowUsage",
    "selector_hint",
]


@dataclass(slots=True)
class RowUsage:
    """A row's pods, and the exact sum of their requests (unbounded)."""

    pods: dict[str, PodInfo] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0


@dataclass(slots=True)
class _RowValues:
    generation: int
    n: int
    mark: int  # how much of the touched-rows log `values` reflects
    values: IntArray


class NodeTable(PodIndex):
    """The node table as plugins read it (`ascheduler.cache.nodetable` writes it)."""

    def __init__(self, capacity: int = 256) -> None:
        super().__init__()
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.n = 0
        self._cap = capacity
        self._alloc = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._requested = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._free = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._nonzero = np.zeros((2, capacity), dtype=np.int64)
        self._unschedulable = np.zeros(capacity, dtype=np.bool_)
        #: Per row: the bits (`ascheduler.model.nodefeatures.BITS`) of the node's declared
        #: features that a pod can require.
        self._declared = np.zeros(capacity, dtype=np.int64)
        self.names: list[str] = []
        self.infos: list[Node] = []
        self.index: dict[str, int] = {}
        #: Host ports in use per row (only rows with such pods have entries).
        self.ports: list[dict[HostPort, int]] = []
        self._usage: list[RowUsage] = []
        self.spec_generation = 0
        self._masks: dict[Hashable, tuple[int, Any]] = {}
        #: Rows whose usage or allocatable changed, in order (see `row_values`).
        self._touched: list[int] = []
        self._row_values: dict[Hashable, _RowValues] = {}
        #: Image name -> the nodes holding it (kube-scheduler's image states), and its size
        #: as the first node to report it gave it.
        self._image_nodes: dict[str, dict[str, None]] = {}
        self._image_size: dict[str, int] = {}

    @property
    def alloc(self) -> IntArray:
        return self._alloc[:, : self.n]

    @property
    def requested(self) -> IntArray:
        return self._requested[:, : self.n]

    @property
    def free(self) -> IntArray:
        """allocatable - requested, kept up to date row by row (what the Fit filter reads)."""
        return self._free[:, : self.n]

    @property
    def nonzero(self) -> IntArray:
        return self._nonzero[:, : self.n]

    @property
    def unschedulable(self) -> BoolArray:
        return self._unschedulable[: self.n]

    @property
    def declared_features(self) -> IntArray:
        """Per row, the bits of the schedulable features the node declares
        (`status.declaredFeatures`; `ascheduler.model.nodefeatures`)."""
        return self._declared[: self.n]

    def resource_row(self, name: str) -> int | None:
        """The row of resource `name`; None when no node has ever advertised it (it is then
        zero everywhere: no allocatable, and no usage a filter or score could read)."""
        return self.resource_index.get(name)

    # -- nodes and their pods ----------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        row = self.index.get(name)
        return None if row is None else self.infos[row]

    def pods(self, row: int) -> Mapping[str, PodInfo]:
        """The pods on a row (assumed or bound), by uid."""
        return self._usage[row].pods

    def image(self, name: str) -> tuple[int, list[str]]:
        """(size, names of the nodes holding it) of an image as nodes report it; (0, [])
        when no node has it."""
        holders = self._image_nodes.get(name)
        if not holders:
            return 0, []
        return self._image_size[name], list(holders)

    def domains(self, key: str) -> Domains:
        """The rows' values of topology label `key`, cached until a node's spec changes."""
        cache_key = ("domains", key)
        hit: Domains | None = self.cached(cache_key)
        if hit is not None:
            return hit
        index: dict[str, int] = {}
        codes = np.fromiter(
            (
                -1 if (v := info.labels.get(key)) is None else index.setdefault(v, len(index))
                for info in self.infos
            ),
            dtype=np.int64,
            count=self.n,
        )
        complete = bool(codes.size) and int(codes.min()) >= 0
        domains = Domains(codes, tuple(index), index, complete)
        self.remember(cache_key, domains)
        return domains

    # -- per pod-shape caches ----------------------------------------------------------------

    def cached(self, key: Hashable) -> Any:
        """A value cached under `key` while no node's spec has changed, else None."""
        hit = self._masks.get(key)
        if hit is not None and hit[0] == self.spec_generation:
            return hit[1]
        return None

    def remember(self, key: Hashable, value: Any) -> None:
        if len(self._masks) > 4096:
            self._masks.clear()
        self._masks[key] = (self.spec_generation, value)

    def rows_where(self, key: Hashable, admits: Callable[[Node], bool]) -> BoolArray:
        """The rows whose node `admits` (a question about the node's spec: its name,
        labels), asked once per node and cached under `key` until a node's spec changes."""
        hit: BoolArray | None = self.cached(key)
        if hit is None:
            hit = np.fromiter((admits(info) for info in self.infos), dtype=np.bool_, count=self.n)
            self.remember(key, hit)
        return hit

    def row_values(
        self,
        key: Hashable,
        compute: Callable[[IntArray], IntArray],
        compute_row: Callable[[int], int] | None = None,
    ) -> IntArray:
        """Per-row values that depend only on each row's own state (a score for one pod
        shape, say), kept for all rows and recomputed only for rows touched since.

        Scheduling a stream of similar pods changes one row per cycle (the node the last pod
        was assumed on); this makes scoring cost that one row instead of every node
        (`compute_row`, when given, computes a single row without making arrays).
        """
        entry = self._row_values.get(key)
        if entry is None or entry.generation != self.spec_generation or entry.n != self.n:
            if len(self._row_values) > 256:
                self._row_values.clear()
            entry = _RowValues(
                self.spec_generation, self.n, len(self._touched), compute(np.arange(self.n))
            )
            self._row_values[key] = entry
        elif entry.mark < len(self._touched):
            touched = self._touched
            if compute_row is not None and (
                entry.mark + 1 == len(touched) or len(set(touched[entry.mark :])) == 1
            ):
                entry.values[touched[-1]] = compute_row(touched[-1])
            else:
                rows = np.fromiter(set(touched[entry.mark :]), dtype=np.int64)
                entry.values[rows] = compute(rows)
            entry.mark = len(touched)
        if len(self._touched) > 1 << 16:
            # Forget the log; entries rebuild once from scratch.
            self._touched.clear()
            self._row_values.clear()
        return entry.values
