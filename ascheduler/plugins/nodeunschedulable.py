"""NodeUnschedulable: nodes with `spec.unschedulable` reject pods that do not tolerate the
`node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from typing import Final

from ascheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    Registration,
)
from ascheduler.model import PodInfo, Taint
from ascheduler.model.affinity import tolerated

NAME: Final = "NodeUnschedulable"
REASON: Final = "node(s) were unschedulable"
_TAINT: Final = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable(FilterPlugin):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        mask = nodes.unschedulable
        if not mask.any() or tolerated(pod.tolerations, _TAINT):
            return None
        return FilterResult.single(REASON, mask.copy(), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: NoArgs, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_SCHEDULABLE}),
    default_weight=1,
)
