"""PodTopologySpread: spread a pod's group evenly over topology domains (weight 2 in the
default profile), with kube-scheduler v1.35's rules.

Filter (`whenUnsatisfiable: DoNotSchedule`): a node whose domain would then hold more than
`maxSkew` matching pods above the emptiest eligible domain is rejected (`node(s) didn't match
pod topology spread constraints`); a node without the topology key is rejected as
unresolvable (`... (missing required label)`). The emptiest domain counts as 0 while fewer
than `minDomains` domains exist. Eligible domains are those of nodes that carry every
constraint's key and pass the node inclusion policies (`nodeAffinityPolicy` Honor by
default: the pod's nodeSelector and required node affinity; `nodeTaintsPolicy` Ignore by
default, Honor: untolerated NoSchedule/NoExecute taints exclude the node).

Score (`ScheduleAnyway`): fewer matching pods in a node's domain is better, each constraint
weighted by log(domains + 2), normalised so the best node gets 100.

Pods without constraints of their own get the plugin's default constraints: kube-scheduler's
system defaults (ScheduleAnyway over hostname with maxSkew 3 and zone with maxSkew 5), or
the configured list, with the selector of the Services, ReplicaSet, StatefulSet or
ReplicationController that select the pod.

Columnar: matching pods are counted per node row by the node table's pod index (a column per
selector, kept up to date as pods come and go), and summed per domain with `bincount` over
the key's domain codes. No pod and no node is visited in Python per cycle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    Domains,
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
from ascheduler.model.affinity import SpecError
from ascheduler.model.topology import (
    INT32_MAX,
    LabelSelector,
    SpreadConstraint,
    parse_spread_constraint,
)
from ascheduler.plugins.nodeaffinity import mismatched
from ascheduler.plugins.tainttoleration import untolerated

NAME: Final = "PodTopologySpread"
REASON: Final = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL: Final = REASON + " (missing required label)"
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"

SYSTEM_DEFAULTS: Final = (
    SpreadConstraint(3, HOSTNAME, "ScheduleAnyway", LabelSelector()),
    SpreadConstraint(5, ZONE, "ScheduleAnyway", LabelSelector()),
)


@dataclass(frozen=True)
class DefaultConstraint:
    """One of `defaultConstraints`: a `TopologySpreadConstraint` without a selector (the
    selector is deduced for each pod)."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()
    label_selector: Any = None

    def __post_init__(self) -> None:
        if self.label_selector is not None:
            raise PluginArgsError(
                "labelSelector: constraint must not define a selector, as they deduced for each pod"
            )

    def constraint(self) -> SpreadConstraint:
        raw: dict[str, object] = {
            "maxSkew": self.max_skew,
            "topologyKey": self.topology_key,
            "whenUnsatisfiable": self.when_unsatisfiable,
            "matchLabelKeys": list(self.match_label_keys),
        }
        for key, value in (
            ("minDomains", self.min_domains),
            ("nodeAffinityPolicy", self.node_affinity_policy),
            ("nodeTaintsPolicy", self.node_taints_policy),
        ):
            if value is not None:
                raw[key] = value
        try:
            return parse_spread_constraint(raw, "constraint")
        except SpecError as exc:
            raise PluginArgsError(str(exc).removeprefix("constraint.")) from exc


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    """kube-scheduler's `PodTopologySpreadArgs`: `defaultingType` defaults to System, which
    takes no `defaultConstraints` (a file giving constraints says `defaultingType: List`, or
    kube-scheduler refuses it, and so does ascheduler)."""

    default_constraints: tuple[DefaultConstraint, ...] = ()
    defaulting_type: str = ""

    def __post_init__(self) -> None:
        if not self.defaulting_type:
            object.__setattr__(self, "defaulting_type", "System")
        if self.defaulting_type not in ("System", "List"):
            raise PluginArgsError(
                f'defaultingType: must be "System" or "List", got {self.defaulting_type!r}'
            )
        if self.defaulting_type == "System" and self.default_constraints:
            raise PluginArgsError(
                'defaultingType: "System" is invalid when .defaultConstraints are not empty '
                "(set defaultingType: List)"
            )
        seen = set()
        for i, c in enumerate(self.default_constraints):
            c.constraint()
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise PluginArgsError(
                    f"defaultConstraints[{i}]: duplicate topologyKey and whenUnsatisfiable "
                    f"{pair[0]!r}, {pair[1]!r}"
                )
            seen.add(pair)


@dataclass(frozen=True, slots=True)
class SpreadMatch:
    """Pods of one namespace, not being deleted, whose labels match a selector."""

    namespaces: frozenset[str]
    selector: LabelSelector

    @property
    def hint(self) -> tuple[str, tuple[str, ...]] | None:
        return selector_hint(self.selector)

    def matches(self, pod: PodInfo) -> bool:
        return (
            pod.namespace in self.namespaces
            and not pod.deleting
            and self.selector.matches(pod.labels)
        )

    def matches_candidate(self, pod: PodInfo) -> bool:
        if len(self.selector.requirements) == 1:  # the hint itself
            return not pod.deleting
        return not pod.deleting and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class _Constraint:
    spec: SpreadConstraint
    selector: LabelSelector

    @property
    def key(self) -> str:
        return self.spec.topology_key


@dataclass(slots=True)
class _FilterState:
    constraints: list[_Constraint]
    domains: list[Domains] = field(default_factory=list)
    #: Per constraint, per domain code: whether placing the pod there exceeds maxSkew.
    over: list[BoolArray] = field(default_factory=list)
    #: Per constraint, what `filter_what_if` recomputes from: matching pods per domain code
    #: (over the eligible rows), the domains that exist, the eligible rows, the pod's own
    #: match (1 or 0).
    per_domain: list[IntArray] = field(default_factory=list)
    present: list[BoolArray] = field(default_factory=list)
    eligible: list[BoolArray] = field(default_factory=list)
    self_match: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _ScoreState:
    ignored: BoolArray  # aligned with the feasible rows
    values: IntArray  # rounded raw scores of the feasible rows


def _counts(nodes: NodeTable, pod: PodInfo, selector: LabelSelector) -> IntArray:
    """Matching pods per row (`countPodsMatchSelector`: an empty selector counts none)."""
    if selector.empty or selector.nothing:
        return np.zeros(nodes.n, dtype=np.int64)
    return nodes.match_counts(SpreadMatch(frozenset((pod.namespace,)), selector))


def _domain_sums(
    nodes: NodeTable,
    pod: PodInfo,
    selector: LabelSelector,
    codes: IntArray,
    size: int,
    eligible: BoolArray,
) -> IntArray:
    """Matching pods per domain code, over the eligible rows."""
    if selector.empty or selector.nothing:
        return np.zeros(size, dtype=np.int64)
    match = SpreadMatch(frozenset((pod.namespace,)), selector)
    return nodes.domain_sums(match, codes, size, eligible)


def _round(values: npt.NDArray[np.float64]) -> IntArray:
    """Go's math.Round for non-negative values (half away from zero)."""
    floor = np.floor(values)
    return (floor + (values - floor >= 0.5)).astype(np.int64)


_POD_EVENTS: Final = frozenset(
    {
        ClusterEvent.ASSIGNED_POD_ADD,
        ClusterEvent.ASSIGNED_POD_UPDATE,
        ClusterEvent.ASSIGNED_POD_DELETE,
        ClusterEvent.UNSCHEDULED_POD_UPDATE,
    }
)


class PodTopologySpread(
    PreFilterPlugin,
    WhatIfFilterPlugin,
    ExplainFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    QueueingHintPlugin,
):
    name = NAME

    def __init__(
        self,
        args: PodTopologySpreadArgs,
        objects: ClusterObjectsView,
        features: Features | None = None,
    ) -> None:
        self.objects = objects
        #: From 1.36 a nominated pod's events count in the hints, as a placed pod's do.
        self._nominated_count = (features or Features.defaults()).since(1, 36)
        self.system_defaulted = args.defaulting_type == "System"
        self.defaults: tuple[SpreadConstraint, ...] = (
            SYSTEM_DEFAULTS
            if self.system_defaulted
            else tuple(c.constraint() for c in args.default_constraints)
        )

    def constraints(self, pod: PodInfo, action: str) -> list[_Constraint]:
        """The pod's constraints with `whenUnsatisfiable: action`, selectors resolved
        (matchLabelKeys merged; the default constraints take the deduced selector)."""
        if pod.spread_constraints:
            out = []
            for c in pod.spread_constraints:
                if c.when_unsatisfiable != action:
                    continue
                extra = {k: pod.labels[k] for k in c.match_label_keys if k in pod.labels}
                out.append(_Constraint(c, c.selector.merged(extra)))
            return out
        chosen = [c for c in self.defaults if c.when_unsatisfiable == action]
        if not chosen:
            return []
        selector = self.objects.default_selector(pod)
        if selector.empty:
            return []
        return [_Constraint(c, selector) for c in chosen]

    def _included(self, pod: PodInfo, nodes: NodeTable, c: SpreadConstraint) -> BoolArray:
        """Rows the node inclusion policies keep for constraint `c`."""
        keep = np.ones(nodes.n, dtype=np.bool_)
        if c.node_affinity_policy == "Honor":
            keep &= ~mismatched(nodes, pod)
        if c.node_taints_policy == "Honor":
            keep &= ~untolerated(nodes, pod.tolerations)
        return keep

    # -- queueing hints (kube-scheduler's isSchedulableAfterPodChange / NodeChange) ----------

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event in _POD_EVENTS:
            return self._after_pod_change(pod, old, new)
        return self._after_node_change(pod, old, new)

    def _after_pod_change(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """kube-scheduler's `isSchedulableAfterPodChange` (1.37: the assigned and target pod
        halves, the same decisions)."""

        def involved(other: PodInfo) -> bool:
            """`involvedInTopologySpreading`: the pod itself, or one in its namespace on a
            node (from 1.36: or nominated to one)."""
            placed = other.assigned or (self._nominated_count and bool(other.nominated_node_name))
            return other.uid == pod.uid or (placed and other.namespace == pod.namespace)

        if (new is not None and not involved(new)) or (old is not None and not involved(old)):
            return False
        constraints = self.constraints(pod, "DoNotSchedule")
        if old is not None and new is not None:
            if (
                pod.uid == new.uid
                and old.tolerations != new.tolerations
                and any(c.spec.node_taints_policy == "Honor" for c in constraints)
            ):
                return True
            if old.labels == new.labels:
                return False
            return any(
                c.selector.matches(old.labels) != c.selector.matches(new.labels)
                for c in constraints
            )
        changed = new if new is not None else old
        return changed is not None and any(c.selector.matches(changed.labels) for c in constraints)

    def _after_node_change(self, pod: PodInfo, old: Node | None, new: Node | None) -> bool:
        constraints = self.constraints(pod, "DoNotSchedule")

        def has_keys(node: Node | None) -> bool:
            return node is not None and all(c.key in node.labels for c in constraints)

        if old is not None and new is not None:
            if has_keys(old) != has_keys(new):
                return True
            return has_keys(new) and (
                any(old.labels.get(c.key) != new.labels.get(c.key) for c in constraints)
                or old.taints != new.taints
            )
        return has_keys(new) if new is not None else has_keys(old)

    # -- PreFilter / Filter --------------------------------------------------------------------

    def _eligible(
        self, pod: PodInfo, nodes: NodeTable, constraints: list[_Constraint]
    ) -> list[tuple[BoolArray, BoolArray]]:
        """Per constraint: the rows whose domains count (every constraint's key, inclusion
        policies passed) and which domains they make exist; cached per pod shape until a
        node's spec changes."""
        key = (
            NAME,
            "eligible",
            tuple(
                (c.key, c.spec.node_affinity_policy, c.spec.node_taints_policy) for c in constraints
            ),
            pod.node_selector,
            pod.required_terms,
            pod.tolerations,
        )
        hit: list[tuple[BoolArray, BoolArray]] | None = nodes.cached(key)
        if hit is not None:
            return hit
        has_all = np.ones(nodes.n, dtype=np.bool_)
        for c in constraints:
            has_all &= nodes.domains(c.key).codes >= 0
        out = []
        for c in constraints:
            d = nodes.domains(c.key)
            rows = has_all & self._included(pod, nodes, c.spec)
            present = np.bincount(d.codes[rows], minlength=len(d.values)) > 0
            out.append((rows, present))
        nodes.remember(key, out)
        return out

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        constraints = self.constraints(pod, "DoNotSchedule")
        if not constraints:
            return None, SKIP
        s = _FilterState(constraints)
        s.domains = [nodes.domains(c.key) for c in constraints]
        for c, d, (rows, present) in zip(
            constraints, s.domains, self._eligible(pod, nodes, constraints), strict=True
        ):
            per_domain = _domain_sums(nodes, pod, c.selector, d.codes, len(d.values), rows)
            domains = int(present.sum())
            minimum = int(per_domain[present].min()) if domains else INT32_MAX
            if domains < c.spec.min_domains:
                minimum = 0
            self_match = 1 if c.selector.matches(pod.labels) else 0
            # Per domain: would one more pod there skew it too far?
            s.over.append(per_domain + self_match - minimum > c.spec.max_skew)
            s.per_domain.append(per_domain)
            s.present.append(present)
            s.eligible.append(rows)
            s.self_match.append(self_match)
        state.write(NAME, s)
        return None, SUCCESS

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        """kube-scheduler's Filter on one node after its PreFilter extensions: each removed
        (added) pod of the pod's namespace that a constraint selects, on a row that counts
        for it, takes one from (adds one to) the row's domain; the global minimum follows.
        (As there, a terminating pod removed is taken off although it was never counted.)"""
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return SUCCESS
        for i, c in enumerate(s.constraints):
            d = s.domains[i]
            code = int(d.codes[row])
            if code < 0:
                return Status.unschedulable(REASON_MISSING_LABEL, resolvable=False)
            delta = 0
            if s.eligible[i][row]:
                delta = sum(
                    1
                    for p in removed
                    if p.namespace == pod.namespace and c.selector.matches(p.labels)
                )
                delta = (
                    sum(
                        1
                        for p in added
                        if p.namespace == pod.namespace and c.selector.matches(p.labels)
                    )
                    - delta
                )
            per_domain, present = s.per_domain[i], s.present[i]
            count = int(per_domain[code]) + delta
            domains = int(present.sum())
            if not domains:
                minimum = INT32_MAX
            elif delta and present[code]:
                others = per_domain[present & (np.arange(present.size) != code)]
                minimum = min(count, int(others.min())) if others.size else count
            else:
                minimum = int(per_domain[present].min())
            if domains < c.spec.min_domains:
                minimum = 0
            if count + s.self_match[i] - minimum > c.spec.max_skew:
                return Status.unschedulable(REASON)
        return SUCCESS

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """Per constraint the row breaks: its domain's matching pods against the fewest in
        any domain, and the skew one more would make."""
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return []
        lines = []
        for i, c in enumerate(s.constraints):
            key = c.spec.topology_key
            code = int(s.domains[i].codes[row])
            if code < 0:
                lines.append(f"node has no {key} label")
                continue
            if not s.over[i][code]:
                continue
            per_domain, present = s.per_domain[i], s.present[i]
            domains = int(present.sum())
            minimum = int(per_domain[present].min()) if domains else 0
            if domains < c.spec.min_domains:
                minimum = 0
            count = int(per_domain[code])
            value = s.domains[i].values[code]
            lines.append(
                f"{key}={value}: {count} matching pod(s), the fewest in a domain {minimum}; "
                f"one more makes skew {count + s.self_match[i] - minimum} > "
                f"maxSkew {c.spec.max_skew}"
            )
        return lines

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _FilterState | None = state.read(NAME)
        if s is None:
            return None
        if len(s.constraints) == 1:
            d = s.domains[0]
            skewed = d.rows_in(s.over[0])
            if d.complete:
                return FilterResult.of(skewed, Rejection(REASON, skewed, Code.UNSCHEDULABLE))
            missing = d.codes < 0
            decided = missing | skewed
        else:
            decided = np.zeros(nodes.n, dtype=np.bool_)
            missing = np.zeros(nodes.n, dtype=np.bool_)
            skewed = np.zeros(nodes.n, dtype=np.bool_)
            for d, over_domain in zip(s.domains, s.over, strict=True):
                if not d.complete:
                    lacks = (d.codes < 0) & ~decided
                    missing |= lacks
                    decided |= lacks
                over = d.rows_in(over_domain) & ~decided
                skewed |= over
                decided |= over
        return FilterResult.of(
            decided,
            Rejection(REASON_MISSING_LABEL, missing, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            Rejection(REASON, skewed, Code.UNSCHEDULABLE),
        )

    # -- PreScore / Score ----------------------------------------------------------------------

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        if nodes.n == 0:
            return SKIP
        constraints = self.constraints(pod, "ScheduleAnyway")
        if not constraints:
            return SKIP
        require_all = bool(pod.spread_constraints) or not self.system_defaulted
        domains = [nodes.domains(c.key) for c in constraints]
        has_all = np.ones(nodes.n, dtype=np.bool_)
        for d in domains:
            has_all &= d.codes >= 0
        ignored = ~has_all[feasible] if require_all else np.zeros(feasible.size, dtype=np.bool_)
        kept = feasible[~ignored]
        total = np.zeros(feasible.size, dtype=np.float64)
        for c, d in zip(constraints, domains, strict=True):
            on_node = d.codes[feasible] >= 0
            if c.key == HOSTNAME:
                weight = math.log(kept.size + 2)
                counts = _counts(nodes, pod, c.selector)
                cnt: npt.NDArray[np.float64] = counts[feasible].astype(np.float64)
            else:
                # A node without the key counts in the "" domain (Go reads a missing label
                # as ""), which only a node-less constraint set can reach.
                blank = d.index.get("", len(d.values))
                codes = np.where(d.codes >= 0, d.codes, blank)
                present = np.zeros(len(d.values) + 1, dtype=np.bool_)
                present[codes[kept]] = True
                weight = math.log(int(present.sum()) + 2)
                rows = self._included(pod, nodes, c.spec)
                if require_all:
                    rows &= has_all
                per_domain = _domain_sums(
                    nodes, pod, c.selector, codes, len(d.values) + 1, rows
                ).astype(np.float64)
                per_domain[~present] = 0
                cnt = per_domain[codes[feasible]]
            contribution = cnt * weight + float(c.spec.max_skew - 1)
            total += np.where(on_node, contribution, 0.0)
        values = _round(total)
        values[ignored] = 0
        state.write((NAME, "score"), _ScoreState(ignored, values))
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        s: _ScoreState = state.read((NAME, "score"))
        return s.values.copy()

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        s: _ScoreState = state.read((NAME, "score"))
        valid = ~s.ignored
        out = np.zeros_like(scores)
        if not valid.any():
            return out
        kept = scores[valid]
        low, high = int(kept.min()), int(kept.max())
        if high == 0:
            out[valid] = MAX_NODE_SCORE
        else:
            out[valid] = MAX_NODE_SCORE * (high + low - kept) // high
        return out


def new(args: PodTopologySpreadArgs, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args, handle.objects, handle.features)


REGISTRATION: Final = Registration(
    NAME,
    new,
    PodTopologySpreadArgs,
    events=frozenset(
        {
            ClusterEvent.ASSIGNED_POD_ADD,
            ClusterEvent.ASSIGNED_POD_DELETE,
            ClusterEvent.ASSIGNED_POD_UPDATE,
            ClusterEvent.UNSCHEDULED_POD_UPDATE,
            ClusterEvent.NODE_ADD,
            ClusterEvent.NODE_LABEL,
            ClusterEvent.NODE_TAINT,
            ClusterEvent.NODE_DELETE,
        }
    ),
    default_weight=2,
)
