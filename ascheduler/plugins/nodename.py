"""NodeName: a pod that names a node in `spec.nodeName` fits only that node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from ascheduler.cache.table import NodeTable
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import ClusterEvent, Code, CycleState, FilterResult
from ascheduler.model import PodInfo

NAME: Final = "NodeName"
REASON: Final = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        if not pod.node_name:
            return None
        mask = np.ones(nodes.n, dtype=np.bool_)
        row = nodes.index.get(pod.node_name)
        if row is not None:
            mask[row] = False
        return FilterResult.single(REASON, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD})


def new(args: Mapping[str, Any], handle: Handle) -> NodeName:
    return NodeName()
