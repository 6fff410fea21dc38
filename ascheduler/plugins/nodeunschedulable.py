"""NodeUnschedulable: nodes with `spec.unschedulable` reject pods that do not tolerate the
`node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ascheduler.cache.table import NodeTable
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import ClusterEvent, Code, CycleState, FilterResult
from ascheduler.model import PodInfo, Taint
from ascheduler.model.affinity import tolerated

NAME: Final = "NodeUnschedulable"
REASON: Final = "node(s) were unschedulable"
_TAINT: Final = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        mask = nodes.unschedulable
        if not mask.any() or tolerated(pod.tolerations, _TAINT):
            return None
        return FilterResult.single(REASON, mask.copy(), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_SCHEDULABLE})


def new(args: Mapping[str, Any], handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
