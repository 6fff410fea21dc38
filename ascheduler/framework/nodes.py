"""`NodeTable`: every node as a row of integer columns, so filters and scores run over all nodes
at once with numpy instead of a Python loop per node. It is what plugins read: the node records
(`infos`, `names`, `index`, `node()`), each row's pods (`pods()`), resource columns, host ports,
and caches keyed by pod shape. The scheduler's cache owns it and mutates it; plugins only read.

Rows are dense (0..n-1); removing a node moves the last row into its place. Resources are rows
of the `alloc` / `requested` matrices: cpu (millicores), memory, ephemeral-storage, pods (the
node's pod count is its `pods` request), then any other resource (`nvidia.com/gpu`, hugepages)
as a node first advertises it. Only nodes add resource rows: a resource no node has is
absent everywhere (`resource_row` is None), so a pod naming thousands of made-up resources
costs no memory per node. `nonzero` holds cpu and memory with kube-scheduler's per-container
defaults, which the scoring plugins use.

Usage is kept exactly, in Python integers per row (`_RowUsage`), and the int64 columns hold it
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

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from ascheduler.model import Node, PodInfo
from ascheduler.model.pod import HostPort
from ascheduler.model.quantity import saturate
from ascheduler.model.topology import LabelSelector, PodAffinity
from ascheduler.model.volumes import CLAIM, DISKS, PodVolume

CPU: Final = 0
MEMORY: Final = 1
EPHEMERAL: Final = 2
PODS: Final = 3
BASE_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage", "pods")

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
#: How many pod predicates keep a count column at once (least recently used dropped).
MAX_COUNTED_PREDICATES: Final = 1024


class PodPredicate(Hashable, Protocol):
    """Which pods a count column counts (`NodeTable.match_counts`); equal predicates share a
    column, so a predicate must be a hashable value (a frozen dataclass)."""

    #: Only pods in these namespaces can match (None: any namespace).
    @property
    def namespaces(self) -> frozenset[str] | None: ...

    #: A label every matching pod has with one of these values (None: no such label), so
    #: building the column looks only at pods carrying it.
    @property
    def hint(self) -> tuple[str, tuple[str, ...]] | None: ...

    def matches(self, pod: PodInfo) -> bool: ...

    def matches_candidate(self, pod: PodInfo) -> bool:
        """`matches`, for a pod known to carry the hint label with one of its values and to
        be in one of `namespaces` (so a predicate that is no more than that can skip it)."""
        ...


#: A term of a shape of pod (anti-)affinity: (shape, kind, index in that kind's terms).
TermRef = tuple[PodAffinity, str, int]
TERM_KINDS: Final = ("required", "required_anti", "preferred", "preferred_anti")


def selector_hint(selector: LabelSelector) -> tuple[str, tuple[str, ...]] | None:
    """A label a selector's matches must carry with one of some values: its first `In`."""
    for r in selector.requirements:
        if r.operator == "In":
            return r.key, r.values
    return None


@dataclass(slots=True)
class _Counts:
    """A count column: matching pods per row, sparse (`rows`), and dense (`values`) once
    something asked for it; both kept up to date."""

    #: None for a shape's column (pods with given affinity terms, counted by the index).
    predicate: PodPredicate | None
    rows: dict[int, int]
    #: (label key, values) a pod needs to match, from the predicate's hint.
    hint: tuple[str, tuple[str, ...]] | None = None
    values: IntArray | None = None

    def dense(self, cap: int) -> IntArray:
        if self.values is None or self.values.size < cap:
            values = np.zeros(cap, dtype=np.int64)
            for row, count in self.rows.items():
                values[row] = count
            self.values = values
        return self.values

    def add(self, row: int, sign: int) -> None:
        count = self.rows.get(row, 0) + sign
        if count > 0:
            self.rows[row] = count
        else:
            self.rows.pop(row, None)
        if self.values is not None:
            self.values[row] += sign

    def move(self, row: int, last: int) -> None:
        """Row `row` goes away and `last` takes its place."""
        self.rows.pop(row, None)
        if row != last and last in self.rows:
            self.rows[row] = self.rows.pop(last)
        if self.values is not None:
            self.values[row] = self.values[last]
            self.values[last] = 0


@dataclass(frozen=True)
class Domains:
    """A topology key over the rows: each row's value as a small integer (`codes`, -1 where
    the node lacks the key) and the values themselves (`values[code]`)."""

    codes: IntArray
    values: tuple[str, ...]
    index: Mapping[str, int]
    #: Every row has the key (no code is -1).
    complete: bool = False

    @cached_property
    def lookup(self) -> IntArray:
        """`codes` with -1 replaced by `len(values)`: an index into a per-domain array with
        one more entry, for the rows without the key."""
        if self.complete:
            return self.codes
        return np.where(self.codes < 0, len(self.values), self.codes)

    @property
    def unique(self) -> bool:
        """Every row is its own domain (hostname, as a rule)."""
        return self.complete and len(self.values) == self.codes.size

    def rows_in(self, flags: BoolArray) -> BoolArray:
        """Rows whose domain's flag (indexed by code) is set; rows without the key: never.
        A few flagged domains of many rows cost a comparison each, not a gather."""
        size = len(self.values)
        n = self.codes.size
        if size <= 4:
            out = np.zeros(n, dtype=np.bool_)
            for code in np.flatnonzero(flags[:size]).tolist():
                out |= self.codes == code
            return out
        if self.complete:
            return flags[:size].take(self.codes)
        padded = np.zeros(size + 1, dtype=np.bool_)
        padded[:size] = flags[:size]
        return padded.take(self.lookup)


@dataclass(slots=True)
class _RowUsage:
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


class NodeTable:
    def __init__(self, capacity: int = 256) -> None:
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.n = 0
        self._cap = capacity
        self._alloc = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._requested = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._free = np.zeros((len(BASE_RESOURCES), capacity), dtype=np.int64)
        self._nonzero = np.zeros((2, capacity), dtype=np.int64)
        self._unschedulable = np.zeros(capacity, dtype=np.bool_)
        self.names: list[str] = []
        self.infos: list[Node] = []
        self.index: dict[str, int] = {}
        #: Host ports in use per row (only rows with such pods have entries).
        self.ports: list[dict[HostPort, int]] = []
        self._usage: list[_RowUsage] = []
        self.spec_generation = 0
        self._masks: dict[Hashable, tuple[int, Any]] = {}
        #: Rows whose usage or allocatable changed, in order (see `row_values`).
        self._touched: list[int] = []
        self._row_values: dict[Hashable, _RowValues] = {}
        # -- the pod index: where each pod is, and counts of pods by predicate per row --
        self._pod_row: dict[str, int] = {}
        self._ns_pods: dict[str, dict[str, PodInfo]] = {}
        self._counts: OrderedDict[Hashable, _Counts] = OrderedDict()
        #: The count columns a pod may add to: by (label key, value) of their hint, and
        #: those without one (checked for every pod).
        self._counts_by_label: dict[tuple[str, str], dict[Hashable, _Counts]] = {}
        self._counts_unhinted: dict[Hashable, _Counts] = {}
        #: Rows holding pods of each (anti-)affinity shape: shape -> row -> pod count.
        self._shapes: dict[PodAffinity, _Counts] = {}
        #: Pods by (namespace, label key, value).
        self._label_pods: dict[tuple[str, str, str], dict[str, None]] = {}
        #: The shapes' terms by a label a pod must carry to match them (`selector_hint`),
        #: and those with no such label.
        self._terms_by_label: dict[tuple[str, str], dict[TermRef, None]] = {}
        self._terms_unindexed: dict[TermRef, None] = {}
        #: Image name -> the nodes holding it (kube-scheduler's image states), and its size
        #: as the first node to report it gave it.
        self._image_nodes: dict[str, dict[str, None]] = {}
        self._image_size: dict[str, int] = {}
        #: Placed pods per claim they name directly, by (namespace, claim): kube-scheduler's
        #: PVC reference counts (VolumeRestrictions' ReadWriteOncePod).
        self._claim_users: dict[tuple[str, str], int] = {}
        #: Placed pods' in-tree disks by (kind, disk): uid -> that volume.
        self._disk_users: dict[tuple[str, str], dict[str, PodVolume]] = {}
        #: Count columns kept by others (`add_extra`), moved with the rows.
        self._extra: dict[Hashable, _Counts] = {}

    # -- columns (views of the live rows) -------------------------------------------------

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

    def resource_row(self, name: str) -> int | None:
        """The row of resource `name`; None when no node has ever advertised it (it is then
        zero everywhere: no allocatable, and no usage a filter or score could read)."""
        return self.resource_index.get(name)

    def _node_resource_row(self, name: str) -> int:
        """The row of a resource a node advertises, added the first time (zero allocatable
        everywhere, the usage pods already on nodes have of it)."""
        row = self.resource_index.get(name)
        if row is not None:
            return row
        requested = np.zeros((1, self._cap), dtype=np.int64)
        for r in range(self.n):
            requested[0, r] = saturate(self._usage[r].requested.get(name, 0))
        alloc = np.vstack([self._alloc, np.zeros((1, self._cap), dtype=np.int64)])
        requested = np.vstack([self._requested, requested])
        free = np.vstack([self._free, -requested[-1:]])
        row = len(self.resource_names)
        self._alloc, self._requested, self._free = alloc, requested, free
        self.resource_index[name] = row
        self.resource_names.append(name)
        return row

    # -- nodes and their pods ----------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        row = self.index.get(name)
        return None if row is None else self.infos[row]

    def pods(self, row: int) -> Mapping[str, PodInfo]:
        """The pods on a row (assumed or bound), by uid."""
        return self._usage[row].pods

    # -- the pod index ------------------------------------------------------------------------

    def pod_row(self, uid: str) -> int | None:
        return self._pod_row.get(uid)

    def _column(self, predicate: PodPredicate) -> _Counts:
        """The count column of `predicate`: built once by looking at the pods that can match
        (its namespaces; only those with its hint label), then kept up to date pod by pod as
        pods come and go, so a stream of pods with the same selector costs nothing per
        cycle. At most `MAX_COUNTED_PREDICATES` are kept, least recently used dropped."""
        entry = self._counts.get(predicate)
        if entry is not None:
            self._counts.move_to_end(predicate)
            return entry
        rows: dict[int, int] = {}
        namespaces = predicate.namespaces
        spaces = self._ns_pods.keys() if namespaces is None else namespaces
        hint = predicate.hint
        for ns in spaces:
            pods = self._ns_pods.get(ns)
            if pods is None:
                continue
            if hint is None:
                candidates: Iterable[str] = pods
            else:
                key, allowed = hint
                candidates = [
                    uid for v in allowed for uid in self._label_pods.get((ns, key, v), ())
                ]
            check = predicate.matches if hint is None else predicate.matches_candidate
            for uid in candidates:
                if check(pods[uid]):
                    row = self._pod_row[uid]
                    rows[row] = rows.get(row, 0) + 1
        entry = _Counts(predicate, rows, hint)
        self._counts[predicate] = entry
        self._route_column(predicate, entry, True)
        if len(self._counts) > MAX_COUNTED_PREDICATES:
            old_key, old = self._counts.popitem(last=False)
            self._route_column(old_key, old, False)
        return entry

    def match_rows(self, predicate: PodPredicate) -> Mapping[int, int]:
        """Rows holding pods that match `predicate`: row -> how many (read-only)."""
        return self._column(predicate).rows

    def match_counts(self, predicate: PodPredicate) -> IntArray:
        """Per row, how many of its pods match `predicate` (read-only; dense)."""
        return self._column(predicate).dense(self._cap)[: self.n]

    def domain_sums(
        self,
        predicate: PodPredicate,
        codes: IntArray,
        size: int,
        eligible: BoolArray | None = None,
        complete: bool = False,
    ) -> IntArray:
        """Matching pods summed per domain code (`size` codes; rows with code -1, or not
        `eligible`, left out): over the few rows that hold matches when they are few, over
        the dense column when they are many."""
        return self._sums(self._column(predicate), codes, size, eligible, complete)

    def _sums(
        self,
        entry: _Counts,
        codes: IntArray,
        size: int,
        eligible: BoolArray | None,
        complete: bool,
    ) -> IntArray:
        """(`complete`: no code is -1, so no row needs leaving out but the ineligible.)"""
        rows = entry.rows
        if entry.values is not None or len(rows) * 8 > self.n:
            counts = entry.dense(self._cap)[: self.n]
            if complete and eligible is None:
                if size == 1:
                    return np.array([int(counts.sum())], dtype=np.int64)
                return np.bincount(codes, weights=counts, minlength=size).astype(np.int64)
            keep = codes >= 0
            if eligible is not None:
                keep &= eligible
            sums = np.bincount(codes[keep], weights=counts[keep], minlength=size)
            return sums.astype(np.int64)
        if not rows:
            return np.zeros(size, dtype=np.int64)
        at = np.fromiter(rows.keys(), dtype=np.int64, count=len(rows))
        weight = np.fromiter(rows.values(), dtype=np.int64, count=len(rows))
        where = codes[at]
        keep = where >= 0
        if eligible is not None:
            keep &= eligible[at]
        sums = np.bincount(where[keep], weights=weight[keep], minlength=size)
        return sums.astype(np.int64)

    def domain_rows(self, predicate: PodPredicate, domains: Domains) -> BoolArray:
        """Rows in a domain of `domains` that holds a pod matching `predicate`."""
        return self._hit_rows(self._column(predicate), domains)

    def _hit_rows(self, entry: _Counts, domains: Domains) -> BoolArray:
        rows = entry.rows
        n = self.n
        if not rows:
            return np.zeros(n, dtype=np.bool_)
        size = len(domains.values)
        if entry.values is not None or len(rows) * 8 > n:
            sums = self._sums(entry, domains.codes, size, None, domains.complete)
            return domains.rows_in(sums > 0)
        at = np.fromiter(rows.keys(), dtype=np.int64, count=len(rows))
        if domains.unique:
            out = np.zeros(n, dtype=np.bool_)
            out[at] = True
            return out
        flags = np.zeros(size + 1, dtype=np.bool_)
        flags[domains.lookup[at]] = True
        return domains.rows_in(flags)

    def _route_column(self, key: Hashable, entry: _Counts, add: bool) -> None:
        if entry.hint is None:
            if add:
                self._counts_unhinted[key] = entry
            else:
                self._counts_unhinted.pop(key, None)
            return
        label, values = entry.hint
        for v in values:
            group = self._counts_by_label.setdefault((label, v), {})
            if add:
                group[key] = entry
            else:
                group.pop(key, None)
                if not group:
                    del self._counts_by_label[(label, v)]

    def _columns_for(self, pod: PodInfo) -> Iterator[_Counts]:
        """The count columns `pod` may count in (each once)."""
        yield from self._counts_unhinted.values()
        seen: set[int] = set()
        for key, value in pod.labels.items():
            for entry in self._counts_by_label.get((key, value), {}).values():
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield entry

    def affinity_rows(self) -> Mapping[PodAffinity, Mapping[int, int]]:
        """Pods with pod (anti-)affinity terms, by their terms: shape -> row -> count."""
        return {shape: entry.rows for shape, entry in self._shapes.items()}

    def shape_domain_sums(self, shape: PodAffinity, domains: Domains) -> IntArray:
        """Placed pods with exactly these (anti-)affinity terms, summed per domain code."""
        entry = self._shapes.get(shape)
        size = len(domains.values)
        if entry is None:
            return np.zeros(size, dtype=np.int64)
        return self._sums(entry, domains.codes, size, None, domains.complete)

    def shape_domain_rows(self, shape: PodAffinity, domains: Domains) -> BoolArray:
        """Rows in a domain holding a placed pod with exactly these (anti-)affinity terms."""
        entry = self._shapes.get(shape)
        if entry is None:
            return np.zeros(self.n, dtype=np.bool_)
        return self._hit_rows(entry, domains)

    def terms_for(self, labels: Mapping[str, str]) -> Iterator[TermRef]:
        """The placed pods' affinity terms whose selector may match a pod with `labels`
        (each once; the caller still matches them): the rest cannot."""
        seen: set[TermRef] = set()
        for key, value in labels.items():
            for ref in self._terms_by_label.get((key, value), ()):
                if ref not in seen:
                    seen.add(ref)
                    yield ref
        yield from self._terms_unindexed

    def _index_shape(self, shape: PodAffinity, add: bool) -> None:
        for kind in TERM_KINDS:
            for i, entry in enumerate(getattr(shape, kind)):
                term = entry if kind.startswith("required") else entry.term
                ref = (shape, kind, i)
                hint = selector_hint(term.selector)
                if hint is None:
                    if add:
                        self._terms_unindexed[ref] = None
                    else:
                        self._terms_unindexed.pop(ref, None)
                    continue
                key, values = hint
                for v in values:
                    group = self._terms_by_label.setdefault((key, v), {})
                    if add:
                        group[ref] = None
                    else:
                        group.pop(ref, None)
                        if not group:
                            del self._terms_by_label[(key, v)]

    def image(self, name: str) -> tuple[int, list[str]]:
        """(size, names of the nodes holding it) of an image as nodes report it; (0, [])
        when no node has it."""
        holders = self._image_nodes.get(name)
        if not holders:
            return 0, []
        return self._image_size[name], list(holders)

    def _index_images(self, node: str, old: Node | None, new: Node | None) -> None:
        if old is not None and new is not None and old.images == new.images:
            return
        for names, _ in old.images if old is not None else ():
            for name in names:
                holders = self._image_nodes.get(name)
                if holders is not None:
                    holders.pop(node, None)
                    if not holders:
                        del self._image_nodes[name]
                        del self._image_size[name]
        for names, size in new.images if new is not None else ():
            for name in names:
                self._image_nodes.setdefault(name, {})[node] = None
                self._image_size.setdefault(name, size)

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

    def _index_pod(self, row: int, pod: PodInfo, sign: int) -> None:
        if sign > 0:
            self._pod_row[pod.uid] = row
            self._ns_pods.setdefault(pod.namespace, {})[pod.uid] = pod
            for key, value in pod.labels.items():
                self._label_pods.setdefault((pod.namespace, key, value), {})[pod.uid] = None
            if pod.volumes:
                self._index_volumes(pod, 1)
        else:
            self._unindex_pod(pod)
        for entry in self._columns_for(pod):
            if entry.predicate is not None and entry.predicate.matches(pod):
                entry.add(row, sign)
        if pod.pod_affinity:
            self._count_shape(pod.pod_affinity, row, sign)

    def _count_shape(self, shape: PodAffinity, row: int, sign: int) -> None:
        entry = self._shapes.get(shape)
        if entry is None:
            entry = self._shapes[shape] = _Counts(None, {})
            self._index_shape(shape, True)
        entry.add(row, sign)
        if not entry.rows:
            del self._shapes[shape]
            self._index_shape(shape, False)

    def _index_volumes(self, pod: PodInfo, sign: int) -> None:
        for v in pod.volumes:
            if v.kind == CLAIM:
                key = (pod.namespace, v.claim)
                count = self._claim_users.get(key, 0) + sign
                if count > 0:
                    self._claim_users[key] = count
                else:
                    self._claim_users.pop(key, None)
            elif v.kind in DISKS:
                disk = (v.kind, v.disk)
                if sign > 0:
                    self._disk_users.setdefault(disk, {})[pod.uid] = v
                else:
                    users = self._disk_users.get(disk)
                    if users is not None:
                        users.pop(pod.uid, None)
                        if not users:
                            del self._disk_users[disk]

    def add_extra(self, key: Hashable, row: int, sign: int) -> None:
        """Add to a count column someone else keeps up to date (`extra_counts` reads it)."""
        entry = self._extra.get(key)
        if entry is None:
            entry = self._extra[key] = _Counts(None, {})
        entry.add(row, sign)

    def extra_counts(self, key: Hashable) -> IntArray:
        """A column kept with `add_extra`, per row (read-only; zeros if never added to)."""
        entry = self._extra.get(key)
        if entry is None:
            return np.zeros(self.n, dtype=np.int64)
        return entry.dense(self._cap)[: self.n]

    def claim_in_use(self, namespace: str, claim: str) -> bool:
        """Whether a placed pod names the claim in a `persistentVolumeClaim` volume."""
        return (namespace, claim) in self._claim_users

    def disk_conflict_rows(self, volume: PodVolume) -> set[int]:
        """Rows holding a pod whose in-tree disk conflicts with `volume`."""
        rows = set()
        for uid, other in self._disk_users.get((volume.kind, volume.disk), {}).items():
            if volume.conflicts(other):
                row = self._pod_row.get(uid)
                if row is not None:
                    rows.add(row)
        return rows

    def _unindex_pod(self, pod: PodInfo) -> None:
        if self._pod_row.pop(pod.uid, None) is not None and pod.volumes:
            self._index_volumes(pod, -1)
        members = self._ns_pods.get(pod.namespace)
        if members is not None:
            members.pop(pod.uid, None)
            if not members:
                del self._ns_pods[pod.namespace]
        for key, value in pod.labels.items():
            group = self._label_pods.get((pod.namespace, key, value))
            if group is not None:
                group.pop(pod.uid, None)
                if not group:
                    del self._label_pods[(pod.namespace, key, value)]

    def _drop_row_pods(self, row: int, last: int) -> None:
        """Row `row` goes away and row `last` moves into its place."""
        for pod in self._usage[row].pods.values():
            self._unindex_pod(pod)
        if row != last:
            for uid in self._usage[last].pods:
                self._pod_row[uid] = row
        for entry in (*self._counts.values(), *self._extra.values()):
            entry.move(row, last)
        for shape in list(self._shapes):
            entry = self._shapes[shape]
            entry.move(row, last)
            if not entry.rows:
                del self._shapes[shape]
                self._index_shape(shape, False)

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

    def _touch(self, row: int) -> None:
        if self._row_values:
            self._touched.append(row)

    # -- rows --------------------------------------------------------------------------------

    def _grow(self) -> None:
        cap = self._cap * 2
        for attr in ("_alloc", "_requested", "_free", "_nonzero"):
            old = getattr(self, attr)
            new = np.zeros((old.shape[0], cap), dtype=np.int64)
            new[:, : self._cap] = old
            setattr(self, attr, new)
        unsched = np.zeros(cap, dtype=np.bool_)
        unsched[: self._cap] = self._unschedulable
        self._unschedulable = unsched
        for entry in (*self._counts.values(), *self._shapes.values(), *self._extra.values()):
            if entry.values is not None:
                values = np.zeros(cap, dtype=np.int64)
                values[: self._cap] = entry.values
                entry.values = values
        self._cap = cap

    def add(self, info: Node) -> int:
        if self.n == self._cap:
            self._grow()
        row = self.n
        self.n += 1
        self.names.append(info.name)
        self.infos.append(info)
        self.ports.append({})
        self._usage.append(_RowUsage())
        self.index[info.name] = row
        self._index_images(info.name, None, info)
        self._requested[:, row] = 0
        self._nonzero[:, row] = 0
        self._set_spec(row, info)
        self.spec_generation += 1
        return row

    def update(self, info: Node) -> None:
        row = self.index[info.name]
        if not self.infos[row].spec_equal(info):
            self.spec_generation += 1
        self._index_images(info.name, self.infos[row], info)
        self.infos[row] = info
        self._set_spec(row, info)

    def _set_spec(self, row: int, info: Node) -> None:
        # Resolve (and maybe add) resource rows first: adding one replaces the arrays.
        rows = [(self._node_resource_row(name), value) for name, value in info.allocatable.items()]
        self._alloc[:, row] = 0
        for resource, value in rows:
            self._alloc[resource, row] = value
        self._free[:, row] = self._alloc[:, row] - self._requested[:, row]
        self._touch(row)
        self._unschedulable[row] = info.unschedulable

    def remove(self, name: str) -> None:
        row = self.index.pop(name)
        last = self.n - 1
        self._drop_row_pods(row, last)
        self._index_images(name, self.infos[row], None)
        if row != last:
            for arr in (self._alloc, self._requested, self._free, self._nonzero):
                arr[:, row] = arr[:, last]
            self._unschedulable[row] = self._unschedulable[last]
            self.names[row] = self.names[last]
            self.infos[row] = self.infos[last]
            self.ports[row] = self.ports[last]
            self._usage[row] = self._usage[last]
            self.index[self.names[row]] = row
        self.names.pop()
        self.infos.pop()
        self.ports.pop()
        self._usage.pop()
        self.n = last
        self.spec_generation += 1

    def replace_pod(self, row: int, old: PodInfo, new: PodInfo) -> bool:
        """Count `new` instead of `old` on `row` (the same pod, a newer version) without
        taking it off and putting it back, when nothing the row's counts read differs (its
        requests, ports, labels, namespace, deletion, pod (anti-)affinity, volumes). True if
        done; False if the caller must remove `old` and add `new`. The row is not touched:
        its usage is what it was, and scores kept per row stay valid."""
        if not (
            new.uid == old.uid
            and new.requests == old.requests
            and new.nonzero_cpu == old.nonzero_cpu
            and new.nonzero_memory == old.nonzero_memory
            and new.host_ports == old.host_ports
            and new.namespace == old.namespace
            and new.deleting == old.deleting
            and new.labels == old.labels
            and new.pod_affinity == old.pod_affinity
            and not new.volumes
            and not old.volumes
        ):
            return False
        usage = self._usage[row]
        if usage.pods.get(old.uid) is not old:
            return False
        usage.pods[new.uid] = new
        self._ns_pods[new.namespace][new.uid] = new
        return True

    def add_usage(self, row: int, pod: PodInfo, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) a pod's requests on a row."""
        usage = self._usage[row]
        exact = usage.requested
        for name, value in pod.requests.items():
            if name == "pods":
                continue  # a pod counts as one pod, whatever it claims
            total = exact.get(name, 0) + sign * value
            if total:
                exact[name] = total
            else:
                exact.pop(name, None)
            resource = self.resource_index.get(name)
            if resource is not None:
                self._requested[resource, row] = saturate(total)
        if sign > 0:
            usage.pods[pod.uid] = pod
        else:
            usage.pods.pop(pod.uid, None)
        self._index_pod(row, pod, sign)
        usage.nonzero_cpu += sign * pod.nonzero_cpu
        usage.nonzero_memory += sign * pod.nonzero_memory
        self._requested[PODS, row] = len(usage.pods)
        self._nonzero[CPU, row] = saturate(usage.nonzero_cpu)
        self._nonzero[MEMORY, row] = saturate(usage.nonzero_memory)
        self._free[:, row] = self._alloc[:, row] - self._requested[:, row]
        self._touch(row)
        if pod.host_ports:
            used = self.ports[row]
            for port in pod.host_ports:
                count = used.get(port, 0) + sign
                if count > 0:
                    used[port] = count
                else:
                    used.pop(port, None)
