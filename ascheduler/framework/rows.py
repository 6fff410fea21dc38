"""Row-at-a-time plugins: kube-scheduler's per-node `Filter(nodeInfo)` and `Score(nodeName)`.

The columnar interfaces (`FilterPlugin`, `ScorePlugin`) are the fast path: one numpy operation
over every node. A first plugin does not need that. Subclass `RowFilterPlugin` and write
`filter_node`, or `RowScorePlugin` and write `score_node`, one node at a time, against a
`NodeInfo` (kube-scheduler's name for a node and its pods); the adapter turns the answers into
the masks and arrays the framework runs on. The price is a Python call per node per pod
(`python -m benchmarks algorithm` measures it; the figures: docs/performance.md, "Plugins
written one node at a time", and the row columns of benchmarks/README.md's tables).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

import numpy as np

from ascheduler.framework.interface import (
    Code,
    CycleState,
    FilterResult,
    Rejection,
    ScorePlugin,
    Status,
    WhatIfFilterPlugin,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.model import Node, PodInfo, Taint


class NodeInfo:
    """One node as the scheduler sees it now: its record, its pods (assumed ones included),
    and what they request. A view of one row of the `NodeTable`; it does not outlive the
    call it is passed to."""

    __slots__ = ("_nodes", "row")

    def __init__(self, nodes: NodeTable, row: int) -> None:
        self._nodes = nodes
        self.row = row

    @property
    def node(self) -> Node:
        return self._nodes.infos[self.row]

    @property
    def name(self) -> str:
        return self._nodes.names[self.row]

    @property
    def labels(self) -> Mapping[str, str]:
        return self.node.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.node.annotations

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.node.taints

    @property
    def unschedulable(self) -> bool:
        return self.node.unschedulable

    @property
    def pods(self) -> Mapping[str, PodInfo]:
        """The pods on the node, by uid."""
        return self._nodes.pods(self.row)

    def allocatable(self, resource: str) -> int:
        """cpu in millicores, `pods` as a count, everything else in base units."""
        return self.node.allocatable.get(resource, 0)

    def requested(self, resource: str) -> int:
        """What the node's pods request of `resource` (`pods`: how many there are)."""
        row = self._nodes.resource_row(resource)
        return 0 if row is None else int(self._nodes.requested[row, self.row])

    def free(self, resource: str) -> int:
        return self.allocatable(resource) - self.requested(resource)


class WhatIfNodeInfo(NodeInfo):
    """A node as it would be with some of its pods gone and others added (preemption's dry
    runs, pods nominated to the node)."""

    __slots__ = ("_added", "_removed")

    def __init__(
        self, nodes: NodeTable, row: int, removed: Sequence[PodInfo], added: Sequence[PodInfo]
    ) -> None:
        super().__init__(nodes, row)
        self._removed = removed
        self._added = added

    @property
    def pods(self) -> Mapping[str, PodInfo]:
        gone = {p.uid for p in self._removed}
        out = {uid: p for uid, p in self._nodes.pods(self.row).items() if uid not in gone}
        out.update((p.uid, p) for p in self._added)
        return out

    def requested(self, resource: str) -> int:
        if resource == "pods":
            return super().requested(resource) - len(self._removed) + len(self._added)
        moved = sum(p.requests.get(resource, 0) for p in self._added) - sum(
            p.requests.get(resource, 0) for p in self._removed
        )
        return super().requested(resource) + moved


class RowFilterPlugin(WhatIfFilterPlugin):
    """A Filter written one node at a time (preemption asks it about nodes as they would be
    after evictions: `node.pods` and `node.requested` then say so)."""

    @abc.abstractmethod
    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """SUCCESS, or a rejection (Unschedulable, or UnschedulableAndUnresolvable when no
        change to other pods could help) whose reasons appear in the failure message."""

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        masks: dict[tuple[str, Code], BoolArray] = {}
        view = NodeInfo(nodes, 0)  # one view, moved from row to row
        for row in range(nodes.n):
            view.row = row
            status = self.filter_node(state, pod, view)
            if status.ok:
                continue
            if not status.rejected:
                raise RuntimeError(
                    f"{self.name}: filter_node({nodes.names[row]}): {status.message or status.code}"
                )
            for reason in status.reasons or (f"node(s) rejected by {self.name}",):
                mask = masks.get((reason, status.code))
                if mask is None:
                    mask = masks[(reason, status.code)] = np.zeros(nodes.n, dtype=np.bool_)
                mask[row] = True
        if not masks:
            return None
        rejections = [Rejection(reason, mask, code) for (reason, code), mask in masks.items()]
        rejected = np.logical_or.reduce([r.nodes for r in rejections])
        return FilterResult(rejected, rejections)

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        view = WhatIfNodeInfo(nodes, row, removed, added) if removed or added else None
        status = self.filter_node(state, pod, view or NodeInfo(nodes, row))
        if status.ok or status.rejected:
            return status
        raise RuntimeError(
            f"{self.name}: filter_node({nodes.names[row]}): {status.message or status.code}"
        )


class RowScorePlugin(ScorePlugin):
    """A Score written one node at a time."""

    @abc.abstractmethod
    def score_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The node's raw score (`normalize` maps raw scores to 0..MAX_NODE_SCORE)."""

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        view = NodeInfo(nodes, 0)  # one view, moved from row to row
        out = np.empty(feasible.size, dtype=np.int64)
        for i, row in enumerate(feasible.tolist()):
            view.row = row
            out[i] = self.score_node(state, pod, view)
        return out
