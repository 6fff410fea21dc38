"""InterPodAffinity: required and preferred pod affinity and anti-affinity (weight 2 in the
default profile), with kube-scheduler v1.35's rules.

Filter, for each node, the first of:
* `node(s) didn't match pod affinity rules` (unresolvable): the node lacks a required
  affinity term's topology key, or some term's domain holds no pod matching all the terms;
  except that the first pod of a group passes when no pod anywhere matches and it matches its
  own terms;
* `node(s) didn't match pod anti-affinity rules`: a required anti-affinity term's domain holds
  a matching pod;
* `node(s) didn't satisfy existing pods anti-affinity rules`: a pod already placed has a
  required anti-affinity term that matches this pod, in this node's domain (symmetry).

Score: per topology domain, the weights of the pod's preferred terms matched by pods there
(anti-affinity negative), plus the existing pods' terms matched by this pod: their required
affinity at `hardPodAffinityWeight`, their preferred terms at their weights; normalised to
0..100 between the lowest and highest node.

A term's namespaces: those it names, the pod's own when it names none and has no
`namespaceSelector`, and those whose labels match its `namespaceSelector` (namespace informer).
Up to 1.36 kube-scheduler resolved the selector on a copy of the term and kept the selector
itself, which then matched any namespace when an empty label set satisfies it (`NotIn`,
`DoesNotExist`); from 1.37 the resolved namespaces alone count (`_resolve`).

Queueing hints follow the release: 1.36 wakes the pod on its own relabelling, counts a
nominated pod as placed and, on a deletion, wakes the pod the deleted pod's anti-affinity kept
away (when it matched all of those terms); 1.37 asks "any term" instead of "all terms" of
anti-affinity on updates and deletions (`_after_pod_change`).

Columnar: the incoming pod's terms are counted per row by the node table's pod index (one
count column per term, kept up to date as pods come and go), summed per domain with
`bincount`; existing pods with affinity are grouped by their terms (the index keeps, per
distinct set of terms, the rows holding such pods), so each distinct set is matched against
the incoming pod once per cycle, however many pods share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ascheduler.features import Features
from ascheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    BoolArray,
    ClusterEvent,
    ClusterObjectsView,
    Code,
    CycleState,
    EnqueueExtensions,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NodeTable,
    PluginArgsError,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHintPlugin,
    Registration,
    Rejection,
    ScorePlugin,
    Status,
    WhatIfFilterPlugin,
    selector_hint,
)
from ascheduler.model import Node, PodInfo
from ascheduler.model.topology import NOTHING, AffinityTerm

NAME: Final = "InterPodAffinity"
REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING: Final = "node(s) didn't satisfy existing pods anti-affinity rules"


@dataclass(frozen=True)
class InterPodAffinityArgs:
    """kube-scheduler's `InterPodAffinityArgs`."""

    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise PluginArgsError("hardPodAffinityWeight: not in valid range [0-100]")


@dataclass(frozen=True, slots=True)
class TermsMatch:
    """Pods matching every one of `terms` (no namespace labels: a term's namespace selector,
    once resolved, is either all namespaces or none)."""

    terms: tuple[AffinityTerm, ...]
    namespaces: frozenset[str] | None

    @classmethod
    def of(cls, terms: tuple[AffinityTerm, ...]) -> TermsMatch:
        bound: frozenset[str] | None = None
        for t in terms:
            if not t.namespace_selector.matches({}):
                bound = t.namespaces if bound is None else bound & t.namespaces
        return cls(terms, bound)

    @property
    def hint(self) -> tuple[str, tuple[str, ...]] | None:
        for t in self.terms:
            hint = selector_hint(t.selector)
            if hint is not None:
                return hint
        return None

    def matches(self, pod: PodInfo) -> bool:
        return all(t.matches(pod.namespace, pod.labels, None) for t in self.terms)

    def matches_candidate(self, pod: PodInfo) -> bool:
        # One term whose namespaces were the ones scanned and whose selector is the hint.
        if (
            len(self.terms) == 1
            and self.namespaces is not None
            and len(self.terms[0].selector.requirements) == 1
        ):
            return True
        return self.matches(pod)


def _per_domain(nodes: NodeTable, key: str, match: TermsMatch) -> tuple[IntArray, IntArray]:
    """(codes of the rows for `key`, pods matching `match` per domain code)."""
    d = nodes.domains(key)
    return d.codes, nodes.domain_sums(match, d.codes, len(d.values), complete=d.complete)


@dataclass(slots=True)
class _FilterState:
    """Rows each check rejects (None: the pod has no such term, or none applies)."""

    affinity_fail: BoolArray | None
    anti_fail: BoolArray | None
    existing_fail: BoolArray | None
    #: The pod's own terms, namespace selectors resolved.
    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    #: kube-scheduler's three topology-pair counts, per key as arrays over the key's domain
    #: codes, built on the first `filter_what_if` of the cycle.
    counts: _PairCounts | None = None


@dataclass(slots=True)
class _PairCounts:
    existing: dict[str, IntArray]
    affinity: dict[str, IntArray]
    anti: dict[str, IntArray]
    #: Pods matching every affinity term, counted once per term, over all domains.
    affinity_total: int


def _domain_pods(nodes: NodeTable, key: str, row: int) -> Iterator[PodInfo]:
    """The pods on every row in `row`'s domain of `key`."""
    codes = nodes.domains(key).codes
    code = int(codes[row])
    if code < 0:
        return
    for r in np.flatnonzero(codes == code):
        yield from nodes.pods(int(r)).values()


def _first(keys: Iterable[str], most: int = 3) -> list[str]:
    """Up to `most` of `keys`, sorted, "…" marking that there were more."""
    out: list[str] = []
    for key in keys:
        if len(out) == most:
            out.append("…")
            break
        out.append(key)
    return sorted(out[:most]) + out[most:]


def _match_all(terms: tuple[AffinityTerm, ...], pod: PodInfo | None) -> bool:
    """kube-scheduler's `podMatchesAllAffinityTerms` (false for no terms)."""
    return (
        pod is not None
        and bool(terms)
        and all(t.matches(pod.namespace, pod.labels, None) for t in terms)
    )


def _match_any(terms: tuple[AffinityTerm, ...], pod: PodInfo | None) -> bool:
    """kube-scheduler's `podMatchesAnyAffinityTerms` (1.37; false for no terms)."""
    return pod is not None and any(t.matches(pod.namespace, pod.labels, None) for t in terms)


#: The events every release registers (kube-scheduler's `Pod/Add|UpdatePodLabel|Delete` of
#: assigned pods, `Node/Add|UpdateNodeLabel`, and the namespaces behind namespace selectors).
_EVENTS: Final = frozenset(
    {
        ClusterEvent.ASSIGNED_POD_ADD,
        ClusterEvent.ASSIGNED_POD_DELETE,
        ClusterEvent.ASSIGNED_POD_UPDATE,
        ClusterEvent.NODE_ADD,
        ClusterEvent.NODE_LABEL,
        ClusterEvent.NAMESPACE_CHANGE,
    }
)


class InterPodAffinity(
    PreFilterPlugin,
    WhatIfFilterPlugin,
    ExplainFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    QueueingHintPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(
        self,
        args: InterPodAffinityArgs,
        objects: ClusterObjectsView,
        features: Features | None = None,
    ) -> None:
        self.args = args
        self.objects = objects
        features = features or Features.defaults()
        #: 1.37 clears a resolved namespace selector (R-F5) and tests anti-affinity terms
        #: with "any" in its hints; 1.36 changed the hints (see `_after_pod_change`).
        self._clears_selector = features.since(1, 37)
        self._hints_1_36 = features.since(1, 36)
        self._any_anti = features.since(1, 37)

    def events_to_register(self) -> frozenset[ClusterEvent]:
        """From 1.36 the pod's own relabelling may help it (kube-scheduler's
        `isSchedulableAfterPodChange` for the target pod, 1.37's `TargetPod/UpdatePodLabel`);
        1.35 registered it too but its hint always skipped, as not registering it does."""
        if self._hints_1_36:
            return _EVENTS | {ClusterEvent.UNSCHEDULED_POD_UPDATE}
        return _EVENTS

    def _resolve(self, term: AffinityTerm) -> AffinityTerm:
        """kube-scheduler's `mergeAffinityTermNamespacesIfNotEmpty`: the namespaces a
        non-empty namespace selector matches now, added to the term's own. Up to 1.36
        kube-scheduler then cleared the selector on a copy only, so the term keeps it: matched
        against no namespace labels, it still selects every namespace if it matches an empty
        set. From 1.37 the term itself is changed: its selector matches nothing, so only the
        namespaces resolved here count."""
        if term.namespace_selector.empty:
            return term
        matched = self.objects.namespaces_matching(term.namespace_selector)
        selector = NOTHING if self._clears_selector else term.namespace_selector
        return AffinityTerm(term.selector, term.namespaces | matched, selector, term.topology_key)

    def _existing_anti(self, pod: PodInfo, nodes: NodeTable) -> BoolArray | None:
        """Rows in a domain where a placed pod's required anti-affinity matches `pod`; None
        when there is none."""
        fail: BoolArray | None = None
        ns_labels: Mapping[str, str] | None = None
        for shape, kind, i in nodes.terms_for(pod.labels):
            if kind != "required_anti":
                continue
            term = shape.required_anti[i]
            if ns_labels is None:
                ns_labels = self.objects.namespace_labels(pod.namespace)
            if term.matches(pod.namespace, pod.labels, ns_labels):
                rows = nodes.shape_domain_rows(shape, nodes.domains(term.topology_key))
                fail = rows.copy() if fail is None else fail | rows
        return fail if fail is not None and fail.any() else None

    # -- queueing hints (kube-scheduler's, and the symmetric case it leaves to the timeout) --

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event is ClusterEvent.NAMESPACE_CHANGE:
            own = pod.pod_affinity
            return any(
                not t.namespace_selector.nothing for t in (*own.required, *own.required_anti)
            )
        if event in (ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL):
            return self._after_node_change(pod, old, new)
        return self._after_pod_change(pod, old, new)

    def _after_pod_change(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """kube-scheduler's `isSchedulableAfterPodChange` (1.37:
        `isSchedulableAfterAssignedPodChange` and `isSchedulableAfterTargetPodUpdateLabel`)."""
        if self._hints_1_36 and new is not None and old is not None and new.uid == pod.uid:
            return True  # the pod's own labels changed: another pod's anti-affinity may pass
        if self._unscheduled(new) or self._unscheduled(old):
            return False
        terms = pod.pod_affinity.required
        anti = pod.pod_affinity.required_anti
        matches_anti = _match_any if self._any_anti else _match_all
        if old is not None and new is not None:
            return (not _match_all(terms, old) and _match_all(terms, new)) or (
                matches_anti(anti, old) and not matches_anti(anti, new)
            )
        if new is not None:
            return _match_all(terms, new)
        assert old is not None
        if matches_anti(anti, old):
            return True
        if self._hints_1_36:
            # The deleted pod's own anti-affinity kept this one away.
            return matches_anti(old.pod_affinity.required_anti, pod)
        # 1.35 kube-scheduler waits for the periodic flush here; ascheduler wakes the pod.
        ns_labels = self.objects.namespace_labels(pod.namespace)
        return any(
            t.matches(pod.namespace, pod.labels, ns_labels) for t in old.pod_affinity.required_anti
        )

    def _unscheduled(self, other: PodInfo | None) -> bool:
        """A pod the hint ignores: not on a node (from 1.36 a nominated pod counts as on
        one: lower-priority pods see it there)."""
        if other is None or other.assigned:
            return False
        return not (self._hints_1_36 and other.nominated_node_name)

    def _after_node_change(self, pod: PodInfo, old: Node | None, new: Node | None) -> bool:
        if new is None:
            return False
        for term in pod.pod_affinity.required:
            key = term.topology_key
            if old is None:
                if key in new.labels:
                    return True
                continue
            if key in new.labels and old.labels.get(key) != new.labels[key]:
                return True
        for term in pod.pod_affinity.required_anti:
            if old is None:
                return True
            key = term.topology_key
            if key in old.labels and old.labels.get(key) != new.labels.get(key):
                return True
        return False

    # -- PreFilter / Filter --------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        required = tuple(self._resolve(t) for t in pod.pod_affinity.required)
        required_anti = tuple(self._resolve(t) for t in pod.pod_affinity.required_anti)
        existing = self._existing_anti(pod, nodes)
        if not required and not required_anti and existing is None:
            return None, SKIP
        n = nodes.n
        affinity_fail: BoolArray | None = None
        if required:
            together = TermsMatch.of(required)
            missing = np.zeros(n, dtype=np.bool_)
            all_exist = np.ones(n, dtype=np.bool_)
            anywhere = False
            for term in required:
                d = nodes.domains(term.topology_key)
                if not d.complete:
                    missing |= d.codes < 0
                hit = nodes.domain_rows(together, d)
                all_exist &= hit
                anywhere = anywhere or bool(hit.any())
            first_of_group = not anywhere and together.matches(pod)
            affinity_fail = missing | (~all_exist & (not first_of_group))
        anti_fail: BoolArray | None = None
        for term in required_anti:
            hit = nodes.domain_rows(TermsMatch.of((term,)), nodes.domains(term.topology_key))
            anti_fail = hit if anti_fail is None else anti_fail | hit
        state.write(
            NAME,
            _FilterState(affinity_fail, anti_fail, existing, required, required_anti),
        )
        return None, SUCCESS

    def _pair_counts(self, s: _FilterState, pod: PodInfo, nodes: NodeTable) -> _PairCounts:
        """kube-scheduler's existingAntiAffinityCounts, affinityCounts and
        antiAffinityCounts, keyed by topology key and then domain code."""

        def add(into: dict[str, IntArray], key: str, sums: IntArray) -> None:
            have = into.get(key)
            into[key] = sums.copy() if have is None else have + sums

        existing: dict[str, IntArray] = {}
        ns_labels = self.objects.namespace_labels(pod.namespace)
        for shape, kind, i in nodes.terms_for(pod.labels):
            if kind != "required_anti":
                continue
            term = shape.required_anti[i]
            if term.matches(pod.namespace, pod.labels, ns_labels):
                d = nodes.domains(term.topology_key)
                add(existing, term.topology_key, nodes.shape_domain_sums(shape, d))
        affinity: dict[str, IntArray] = {}
        total = 0
        if s.required:
            together = TermsMatch.of(s.required)
            for term in s.required:
                _, sums = _per_domain(nodes, term.topology_key, together)
                add(affinity, term.topology_key, sums)
                total += int(sums.sum())
        anti: dict[str, IntArray] = {}
        for term in s.required_anti:
            _, sums = _per_domain(nodes, term.topology_key, TermsMatch.of((term,)))
            add(anti, term.topology_key, sums)
        return _PairCounts(existing, affinity, anti, total)

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        """kube-scheduler's Filter on one node after its PreFilter extensions moved the
        pair counts of the row's domains by the pods removed from and added to it."""
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return SUCCESS
        if s.counts is None:
            s.counts = self._pair_counts(s, pod, nodes)
        counts = s.counts
        labels = nodes.infos[row].labels
        ns_labels = self.objects.namespace_labels(pod.namespace)
        existing: dict[str, int] = {}
        affinity: dict[str, int] = {}
        anti: dict[str, int] = {}
        for sign, pods in ((-1, removed), (1, added)):
            for p in pods:
                for t in p.pod_affinity.required_anti:
                    if t.topology_key in labels and t.matches(pod.namespace, pod.labels, ns_labels):
                        existing[t.topology_key] = existing.get(t.topology_key, 0) + sign
                if _match_all(s.required, p):
                    for t in s.required:
                        if t.topology_key in labels:
                            affinity[t.topology_key] = affinity.get(t.topology_key, 0) + sign
                for t in s.required_anti:
                    if t.topology_key in labels and t.matches(p.namespace, p.labels, None):
                        anti[t.topology_key] = anti.get(t.topology_key, 0) + sign

        def count(table: dict[str, IntArray], moved: dict[str, int], key: str) -> int:
            code = int(nodes.domains(key).codes[row])
            base = table.get(key)
            have = int(base[code]) if base is not None and code >= 0 else 0
            return have + moved.get(key, 0)

        if s.required:
            exist = True
            for t in s.required:
                if t.topology_key not in labels:
                    return Status.unschedulable(REASON_AFFINITY, resolvable=False)
                if count(counts.affinity, affinity, t.topology_key) <= 0:
                    exist = False
            if not exist:
                alone = counts.affinity_total + sum(affinity.values()) == 0
                if not (alone and _match_all(s.required, pod)):
                    return Status.unschedulable(REASON_AFFINITY, resolvable=False)
        for t in s.required_anti:
            if t.topology_key in labels and count(counts.anti, anti, t.topology_key) > 0:
                return Status.unschedulable(REASON_ANTI_AFFINITY)
        for key in {*counts.existing, *existing}:
            if key in labels and count(counts.existing, existing, key) > 0:
                return Status.unschedulable(REASON_EXISTING)
        return SUCCESS

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """The term that fails on the row and, for anti-affinity, the pods in the way (a
        few, the first found)."""
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return []
        labels = nodes.infos[row].labels
        lines: list[str] = []
        if s.affinity_fail is not None and s.affinity_fail[row]:
            for t in s.required:
                key = t.topology_key
                if key not in labels:
                    lines.append(f"affinity term: node has no {key} label")
                elif not any(_match_all(s.required, p) for p in _domain_pods(nodes, key, row)):
                    lines.append(f"affinity term: no matching pod in {key}={labels[key]}")
            return lines
        if s.anti_fail is not None and s.anti_fail[row]:
            for t in s.required_anti:
                key = t.topology_key
                if key not in labels:
                    continue
                found = _first(
                    p.key
                    for p in _domain_pods(nodes, key, row)
                    if t.matches(p.namespace, p.labels, None)
                )
                if found:
                    lines.append(
                        f"anti-affinity with pod {', '.join(found)} in {key}={labels[key]}"
                    )
            return lines
        if s.existing_fail is not None and s.existing_fail[row]:
            ns_labels = self.objects.namespace_labels(pod.namespace)
            blockers: dict[str, list[str]] = {}
            keys = {t.topology_key for shape in nodes.affinity_rows() for t in shape.required_anti}
            for key in sorted(keys):
                if key not in labels:
                    continue
                found = _first(
                    p.key
                    for p in _domain_pods(nodes, key, row)
                    if any(
                        t.topology_key == key and t.matches(pod.namespace, pod.labels, ns_labels)
                        for t in p.pod_affinity.required_anti
                    )
                )
                if found:
                    blockers[f"{key}={labels[key]}"] = found
            for where, found in sorted(blockers.items()):
                lines.append(f"pod {', '.join(found)} in {where} has anti-affinity against it")
        return lines

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return None
        # Each row under the first check that rejects it, in kube-scheduler's order.
        rejected: BoolArray | None = None
        rejections = []
        for reason, mask, code in (
            (REASON_AFFINITY, s.affinity_fail, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            (REASON_ANTI_AFFINITY, s.anti_fail, Code.UNSCHEDULABLE),
            (REASON_EXISTING, s.existing_fail, Code.UNSCHEDULABLE),
        ):
            if mask is None:
                continue
            mine = mask if rejected is None else mask & ~rejected
            if not mine.any():
                continue
            rejections.append(Rejection(reason, mine, code))
            rejected = mine if rejected is None else rejected | mine
        return None if rejected is None else FilterResult(rejected, rejections)

    # -- PreScore / Score ----------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        own = pod.pod_affinity
        has_constraints = bool(own.preferred or own.preferred_anti)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        # topology key -> score per domain code
        scores: dict[str, IntArray] = {}
        touched = False

        def add(key: str, sums: IntArray, weight: int) -> None:
            nonlocal touched
            if not sums.any():
                return
            touched = True
            have = scores.get(key)
            if have is None:
                scores[key] = sums * weight
            else:
                have += sums * weight

        for sign, terms in ((1, own.preferred), (-1, own.preferred_anti)):
            for wt in terms:
                term = self._resolve(wt.term)
                _, sums = _per_domain(nodes, term.topology_key, TermsMatch.of((term,)))
                add(term.topology_key, sums, sign * wt.weight)
        ns_labels = self.objects.namespace_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        for shape, kind, i in nodes.terms_for(pod.labels):
            if kind == "required_anti" or (kind == "required" and hard <= 0):
                continue
            if kind == "required":
                weight, term = hard, shape.required[i]
            elif kind == "preferred":
                weight, term = shape.preferred[i].weight, shape.preferred[i].term
            else:
                weight, term = -shape.preferred_anti[i].weight, shape.preferred_anti[i].term
            if term.matches(pod.namespace, pod.labels, ns_labels):
                d = nodes.domains(term.topology_key)
                add(
                    term.topology_key,
                    nodes.shape_domain_sums(shape, d),
                    weight,
                )
        if not touched:
            return SKIP
        total = np.zeros(feasible.size, dtype=np.int64)
        for key, per_domain in scores.items():
            codes = nodes.domains(key).codes[feasible]
            total += np.where(codes >= 0, per_domain[np.maximum(codes, 0)], 0)
        state.write((NAME, "score"), total)
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        total: IntArray = state.read((NAME, "score"))
        return total.copy()

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        if scores.size == 0:
            return scores
        low, high = int(scores.min()), int(scores.max())
        diff = high - low
        if diff <= 0:
            return np.zeros_like(scores)
        scaled: npt.NDArray[np.float64] = float(MAX_NODE_SCORE) * (
            (scores - low).astype(np.float64) / float(diff)
        )
        return scaled.astype(np.int64)


def new(args: InterPodAffinityArgs, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args, handle.objects, handle.features)


REGISTRATION: Final = Registration(
    NAME,
    new,
    InterPodAffinityArgs,
    events=_EVENTS,
    default_weight=2,
)
