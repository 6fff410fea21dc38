"""The node table's pod index, as plugins read it: which row holds each pod, and count columns
of matching pods per row (`match_counts`, `domain_sums`...) built on first use for a pod
predicate and kept up to date as pods come and go, so a stream of pods with the same selector
costs nothing per cycle. Also the placed pods' (anti-)affinity shapes, claims and in-tree disks.

`PodIndex` holds the index and answers reads; building a column on first use is part of a
read. Keeping the index up to date as pods are added and removed is the cache's
(`ascheduler.cache.nodetable`), which alone writes the table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from ascheduler.model import PodInfo
from ascheduler.model.topology import LabelSelector, PodAffinity
from ascheduler.model.volumes import PodVolume

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
class CountColumn:
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


class PodIndex:
    """The pod index part of the node table (`NodeTable` is one): reads only."""

    #: Rows in use, and allocated (the table's).
    n: int
    _cap: int

    def __init__(self) -> None:
        #: Where each pod is, and the pods of each namespace.
        self._pod_row: dict[str, int] = {}
        self._ns_pods: dict[str, dict[str, PodInfo]] = {}
        self._counts: OrderedDict[Hashable, CountColumn] = OrderedDict()
        #: The count columns a pod may add to: by (label key, value) of their hint, and
        #: those without one (checked for every pod).
        self._counts_by_label: dict[tuple[str, str], dict[Hashable, CountColumn]] = {}
        self._counts_unhinted: dict[Hashable, CountColumn] = {}
        #: Rows holding pods of each (anti-)affinity shape: shape -> row -> pod count.
        self._shapes: dict[PodAffinity, CountColumn] = {}
        #: Pods by (namespace, label key, value).
        self._label_pods: dict[tuple[str, str, str], dict[str, None]] = {}
        #: The shapes' terms by a label a pod must carry to match them (`selector_hint`),
        #: and those with no such label.
        self._terms_by_label: dict[tuple[str, str], dict[TermRef, None]] = {}
        self._terms_unindexed: dict[TermRef, None] = {}
        #: Placed pods per claim they name directly, by (namespace, claim): kube-scheduler's
        #: PVC reference counts (VolumeRestrictions' ReadWriteOncePod).
        self._claim_users: dict[tuple[str, str], int] = {}
        #: Placed pods' in-tree disks by (kind, disk): uid -> that volume.
        self._disk_users: dict[tuple[str, str], dict[str, PodVolume]] = {}
        #: Count columns kept by others (`add_extra`), moved with the rows.
        self._extra: dict[Hashable, CountColumn] = {}
        #: Pods by their own priority (a preemptor's possible victims are those below its).
        self._by_priority: dict[int, dict[str, PodInfo]] = {}

    def pod_row(self, uid: str) -> int | None:
        return self._pod_row.get(uid)

    def count_below(self, priority: int) -> int:
        """How many pods `pods_below` yields, in as many steps as there are priorities."""
        return sum(len(pods) for level, pods in self._by_priority.items() if level < priority)

    def pods_below(self, priority: int) -> Iterator[PodInfo]:
        """The pods whose own priority is below `priority` (by priority, then as placed): as
        many steps as there are such pods and distinct priorities, not as pods placed."""
        for level in sorted(p for p in self._by_priority if p < priority):
            yield from self._by_priority[level].values()

    def _column(self, predicate: PodPredicate) -> CountColumn:
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
        entry = CountColumn(predicate, rows, hint)
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
        entry: CountColumn,
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

    def _hit_rows(self, entry: CountColumn, domains: Domains) -> BoolArray:
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

    def _route_column(self, key: Hashable, entry: CountColumn, add: bool) -> None:
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
