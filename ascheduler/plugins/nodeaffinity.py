"""NodeAffinity: `spec.nodeSelector` and required node-affinity terms filter nodes; preferred
terms score them by the sum of the weights they match (weight 2 in the default profile).

`NodeAffinityArgs.addedAffinity` applies to every pod of the profile, as kube-scheduler
applies it: its required terms are ANDed with the pod's own (a node they exclude is rejected
first, `node(s) didn't match scheduler-enforced node affinity`), and its preferred terms add
to every node's score. With it, PreFilter and PreScore no longer skip pods that have nothing
of their own.

Masks and raw scores depend only on the pod's selector/terms (and the profile's added
affinity) and the nodes' labels, so they are cached per pod shape until a node's spec changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ascheduler.framework import (
    SKIP,
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    Registration,
    Rejection,
    ScorePlugin,
    Status,
    default_normalize,
)
from ascheduler.model import PodInfo
from ascheduler.plugins.addedaffinity import AddedAffinity, parse_added_affinity

NAME: Final = "NodeAffinity"
REASON: Final = "node(s) didn't match Pod's node affinity/selector"
ENFORCED: Final = "node(s) didn't match scheduler-enforced node affinity"
CONFLICT: Final = "pod affinity terms conflict"


def required_match(pod: PodInfo, name: str, labels: Mapping[str, str]) -> bool:
    """Whether a node matches the pod's nodeSelector and required node-affinity terms."""
    if any(labels.get(k) != v for k, v in pod.node_selector):
        return False
    if pod.required_terms is None:
        return True
    return any(term.matches(name, labels) for term in pod.required_terms)


def mismatched(nodes: NodeTable, pod: PodInfo) -> BoolArray:
    """Rows the pod's nodeSelector and required node-affinity terms exclude (read-only; cached
    until a node's spec changes)."""
    key = (NAME, "filter", pod.node_selector, pod.required_terms)
    mask: BoolArray | None = nodes.cached(key)
    if mask is None:
        if not pod.node_selector and pod.required_terms is None:
            mask = np.zeros(nodes.n, dtype=np.bool_)
        else:
            mask = np.fromiter(
                (not required_match(pod, info.name, info.labels) for info in nodes.infos),
                dtype=np.bool_,
                count=nodes.n,
            )
        nodes.remember(key, mask)
    return mask


@dataclass(frozen=True)
class NodeAffinityArgs:
    """kube-scheduler's `NodeAffinityArgs`: `addedAffinity` (a NodeAffinity) for every pod of
    the profile, checked as kube-scheduler checks it."""

    added_affinity: Any = None
    added: AddedAffinity = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "added", parse_added_affinity(self.added_affinity))


class NodeAffinity(PreFilterPlugin, ExplainFilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME

    def __init__(self, added: AddedAffinity | None = None) -> None:
        self.added = added or AddedAffinity()

    def _enforced(self, nodes: NodeTable) -> BoolArray | None:
        """Rows the added required terms exclude (None: there are none)."""
        terms = self.added.required
        if terms is None:
            return None
        key = (NAME, "enforced", terms)
        mask: BoolArray | None = nodes.cached(key)
        if mask is None:
            mask = np.fromiter(
                (not any(t.matches(i.name, i.labels) for t in terms) for i in nodes.infos),
                dtype=np.bool_,
                count=nodes.n,
            )
            nodes.remember(key, mask)
        return mask

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        """Skip the filter for pods without selector or required terms; narrow the nodes to
        those named by `matchFields metadata.name In` when every term names nodes."""
        if not pod.node_selector and pod.required_terms is None and self.added.required is None:
            return None, SKIP
        if not pod.required_terms:
            return None, SUCCESS
        names: set[str] | None = None
        for term in pod.required_terms:
            term_names: set[str] | None = None
            for r in term.fields:
                if r.key == "metadata.name" and r.operator == "In":
                    term_names = set(r.values) if term_names is None else term_names & set(r.values)
            if term_names is None:
                return None, SUCCESS  # this term may match any node: terms are ORed
            names = term_names if names is None else names | term_names
        if not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (CONFLICT,), NAME)
        return PreFilterResult(frozenset(names)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        enforced = self._enforced(nodes)
        own = mismatched(nodes, pod)
        if enforced is None:
            if not own.any():
                return None
            return FilterResult.single(REASON, own, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        # A node the added terms exclude is rejected for them alone, as in kube-scheduler.
        return FilterResult.of(
            enforced | own,
            Rejection(ENFORCED, enforced, code),
            Rejection(REASON, own & ~enforced, code),
        )

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """The nodeSelector labels the node lacks, and the required terms none of which it
        matches (with the node's own values for the keys they name)."""
        info = nodes.infos[row]
        labels = info.labels
        enforced = self._enforced(nodes)
        if enforced is not None and enforced[row]:
            return [
                f"none of the {len(self.added.required or ())} nodeSelectorTerm(s) of the "
                f"profile's addedAffinity matches"
            ]
        lines = [
            f"nodeSelector {key}={value}: node has "
            + (f"{key}={labels[key]}" if key in labels else f"no {key} label")
            for key, value in pod.node_selector
            if labels.get(key) != value
        ]
        terms = pod.required_terms
        if terms is not None and not any(t.matches(info.name, labels) for t in terms):
            keys = sorted({r.key for t in terms for r in t.expressions})
            have = ", ".join(f"{k}={labels[k]}" if k in labels else f"no {k}" for k in keys)
            lines.append(
                f"none of the {len(terms)} required nodeSelectorTerm(s) matches"
                + (f" (node has {have})" if have else "")
            )
        return lines

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        if not pod.preferred_terms and not self.added.preferred:
            return SKIP
        terms = (*self.added.preferred, *pod.preferred_terms)
        key = (NAME, "score", terms)
        raw: IntArray | None = nodes.cached(key)
        if raw is None:
            raw = np.fromiter(
                (
                    sum(p.weight for p in terms if p.term.matches(info.name, info.labels))
                    for info in nodes.infos
                ),
                dtype=np.int64,
                count=nodes.n,
            )
            nodes.remember(key, raw)
        state.write(NAME, raw)
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        raw: IntArray = state.read(NAME)
        return raw[feasible]

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)


def new(args: NodeAffinityArgs, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args.added)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NodeAffinityArgs,
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_LABEL}),
    default_weight=2,
)
