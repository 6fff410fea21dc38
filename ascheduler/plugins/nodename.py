"""NodeName: a pod that names a node in `spec.nodeName` fits only that node.

From 1.37 kube-scheduler's NodeName also has a PreFilter that narrows the cycle to that node
(`PreFilterResult{NodeNames: {spec.nodeName}}`), so every other node is rejected, before any
Filter, as `node(s) didn't satisfy plugin(s) [NodeName]` (unresolvable: not a preemption
candidate). Only a pod with `spec.nodeName` that reaches a scheduling cycle sees it (a
deferred resize, or a profile that schedules such pods); for the others the PreFilter says
nothing and the Filter runs as before.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ascheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    Registration,
    Status,
)
from ascheduler.model import PodInfo

NAME: Final = "NodeName"
REASON: Final = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin):
    """1.35 and 1.36: a Filter only."""

    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        if not pod.node_name:
            return None
        mask = np.ones(nodes.n, dtype=np.bool_)
        row = nodes.index.get(pod.node_name)
        if row is not None:
            mask[row] = False
        return FilterResult.single(REASON, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


class NodeNameWithPreFilter(NodeName, PreFilterPlugin):
    """1.37: the Filter, and the PreFilter narrowing the cycle to the named node (success
    with no result, not Skip, for a pod naming none: the Filter still runs)."""

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_name:
            return None, SUCCESS
        return PreFilterResult(frozenset({pod.node_name})), SUCCESS


def new(args: NoArgs, handle: Handle) -> NodeName:
    if handle.features.since(1, 37):
        return NodeNameWithPreFilter()
    return NodeName()


REGISTRATION: Final = Registration(
    NAME, new, NoArgs, events=frozenset({ClusterEvent.NODE_ADD}), default_weight=1
)
