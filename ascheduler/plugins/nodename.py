"""NodeName: a pod that names a node in `spec.nodeName` fits only that node."""

from __future__ import annotations

from typing import Final

import numpy as np

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
from ascheduler.model import PodInfo

NAME: Final = "NodeName"
REASON: Final = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        if not pod.node_name:
            return None
        mask = np.ones(nodes.n, dtype=np.bool_)
        row = nodes.index.get(pod.node_name)
        if row is not None:
            mask[row] = False
        return FilterResult.single(REASON, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: NoArgs, handle: Handle) -> NodeName:
    return NodeName()


REGISTRATION: Final = Registration(
    NAME, new, NoArgs, events=frozenset({ClusterEvent.NODE_ADD}), default_weight=1
)
