"""TaintToleration: NoSchedule / NoExecute taints a pod does not tolerate reject the node;
untolerated PreferNoSchedule taints lower its score (weight 3 in the default profile).

PreScore never skips, as kube-scheduler's does not: with no untolerated PreferNoSchedule
taint on any node, every node scores 100 (times the weight), and totals shown by `explain`
and `/debug` are kube-scheduler's own numbers.

Masks and counts depend only on the pod's tolerations and the nodes' taints, so they are
computed once per toleration set and reused until a node's spec changes. Only tainted rows are
ever looked at.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ascheduler.framework import (
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NoArgs,
    NodeTable,
    PreScorePlugin,
    Registration,
    ScorePlugin,
    Status,
    default_normalize,
)
from ascheduler.model import PodInfo
from ascheduler.model.affinity import Taint, Toleration, tolerated

NAME: Final = "TaintToleration"
REASON: Final = "node(s) had untolerated taint(s)"
_FILTER_EFFECTS: Final = ("NoSchedule", "NoExecute")


def _tainted_rows(nodes: NodeTable) -> list[int]:
    rows: list[int] | None = nodes.cached(("tainted-rows",))
    if rows is None:
        rows = [i for i, info in enumerate(nodes.infos) if info.taints]
        nodes.remember(("tainted-rows",), rows)
    return rows


def untolerated(nodes: NodeTable, tolerations: tuple[Toleration, ...]) -> BoolArray:
    """Rows with a NoSchedule or NoExecute taint `tolerations` do not tolerate (read-only;
    cached until a node's spec changes)."""
    key = (NAME, "filter", tolerations)
    mask: BoolArray | None = nodes.cached(key)
    if mask is None:
        mask = np.zeros(nodes.n, dtype=np.bool_)
        for row in _tainted_rows(nodes):
            mask[row] = any(
                t.effect in _FILTER_EFFECTS and not tolerated(tolerations, t)
                for t in nodes.infos[row].taints
            )
        nodes.remember(key, mask)
    return mask


def _taint_text(taint: Taint) -> str:
    """kubectl's way: `key=value:Effect` (`key:Effect` without a value)."""
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


class TaintToleration(ExplainFilterPlugin, PreScorePlugin, ScorePlugin):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        mask = untolerated(nodes, pod.tolerations)
        if not mask.any():
            return None
        return FilterResult.single(REASON, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        return [
            f"taint {_taint_text(t)} not tolerated"
            for t in nodes.infos[row].taints
            if t.effect in _FILTER_EFFECTS and not tolerated(pod.tolerations, t)
        ]

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        key = (NAME, "score", pod.tolerations)
        counts: IntArray | None = nodes.cached(key)
        if counts is None:
            counts = np.zeros(nodes.n, dtype=np.int64)
            for row in _tainted_rows(nodes):
                counts[row] = sum(
                    1
                    for t in nodes.infos[row].taints
                    if t.effect == "PreferNoSchedule" and not tolerated(pod.tolerations, t)
                )
            nodes.remember(key, counts)
        state.write(NAME, counts)
        return SUCCESS

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        counts: IntArray = state.read(NAME)
        return counts[feasible]

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)


def new(args: NoArgs, handle: Handle) -> TaintToleration:
    return TaintToleration()


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_TAINT}),
    default_weight=3,
)
