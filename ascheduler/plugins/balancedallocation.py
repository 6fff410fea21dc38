"""NodeResourcesBalancedAllocation: prefers nodes whose utilisation of the scored resources
(cpu and memory by default) stays close, over the node table's columns (one vector operation
per resource), with kube-scheduler's arithmetic so the scores are the same numbers. The
resource columns are NodeResourcesFit's (`noderesources.ResourceScorer`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ascheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    BoolArray,
    ClusterEvent,
    CycleState,
    Handle,
    IntArray,
    NodeTable,
    PluginArgsError,
    PreScorePlugin,
    Registration,
    RowLocalScorePlugin,
    Status,
)
from ascheduler.model import PodInfo
from ascheduler.plugins.noderesources import (
    BALANCED,
    DEFAULT_RESOURCES,
    ResourceScorer,
    ResourceSpec,
    check_resources,
)


@dataclass(frozen=True)
class NodeResourcesBalancedAllocationArgs:
    """kube-scheduler's `NodeResourcesBalancedAllocationArgs`."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", DEFAULT_RESOURCES)  # kube's defaulting
        check_resources(self.resources)
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                raise PluginArgsError(f"resources[{i}].name: duplicate {r.name!r}")
            seen.add(r.name)
            if r.weight != 1:
                raise PluginArgsError(f"resources[{i}].weight: must be 1, got {r.weight}")


#: BalancedAllocation's scores with and without the pod both lie in [50, 100].
_HALF: Final = MAX_NODE_SCORE // 2
#: Resources BalancedAllocation always scores, requested or not (the others are scalar).
_NATIVE: Final = ("cpu", "memory", "ephemeral-storage")


def _balance(cols: Sequence[tuple[IntArray, IntArray]], size: int) -> IntArray:
    """kube-scheduler's `balancedResourceScore` over rows: `int64((1 - std) * 100)` of the
    (allocatable, requested) fractions, capped at 1; a resource a row has none of is left
    out there; two resources: |f1 - f2| / 2, more: the population std."""
    fractions: list[npt.NDArray[np.float64]] = []
    present: list[BoolArray | None] = []  # None: the node has the resource everywhere
    for alloc, req in cols:
        if alloc.all():
            fractions.append(np.minimum(req / alloc, 1.0))
            present.append(None)
        else:
            has = alloc > 0
            fractions.append(np.where(has, np.minimum(req / np.maximum(alloc, 1), 1.0), 0.0))
            present.append(has)
    if len(cols) == 2 and present[0] is None and present[1] is None:
        # Both resources on every node: kube-scheduler's |f1 - f2| / 2.
        std = np.abs(fractions[0] - fractions[1]) / 2
    else:
        masks = [np.ones(size, np.bool_) if m is None else m for m in present]
        count = np.sum(masks, axis=0)
        if len(cols) == 2:
            std = np.where(count == 2, np.abs(fractions[0] - fractions[1]) / 2, 0.0)
        else:
            n = np.maximum(count, 1)
            mean = np.sum(fractions, axis=0) / n
            sq = [np.where(m, (f - mean) ** 2, 0.0) for f, m in zip(fractions, masks, strict=True)]
            std = np.where(count >= 2, np.sqrt(np.sum(sq, axis=0) / n), 0.0)
    result: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return result


def _balance_one(cols: Sequence[tuple[int, int]]) -> int:
    """`_balance` for a single row, in plain numbers."""
    fractions = [min(req / alloc, 1.0) for alloc, req in cols if alloc]
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class NodeResourcesBalancedAllocation(PreScorePlugin, RowLocalScorePlugin):
    """Up to 1.35 a node scores by how balanced its utilisation would be with the pod.
    From 1.36 (ungated) by how much the pod changes that balance: `50 + (50 + with -
    without) / 2` (Go's integer division; 75 when the pod changes nothing), so a node the
    pod evens out wins over one already balanced."""

    name = BALANCED

    def __init__(self, resources: Sequence[ResourceSpec], *, change: bool = False) -> None:
        self.scorer = ResourceScorer(resources, use_requested=True)
        self.names = frozenset(r.name for r in resources)
        #: 1.36 on: score the change in balance the pod makes.
        self.change = change

    def score_key(self, pod: PodInfo) -> Hashable:
        return tuple(sorted(pod.requests.items()))

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        if not any(pod.requests.get(n, 0) for n in self.names):
            return SKIP
        return SUCCESS

    def _pod_requests(self, pod: PodInfo) -> list[int]:
        """The pod's request of each resource `ResourceScorer.columns` keeps, in its order
        (an extended resource the pod does not ask for is left out)."""
        wanted = ((r.name, pod.requests.get(r.name, 0)) for r in self.scorer.resources)
        return [req for name, req in wanted if req or name in _NATIVE]

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        cols = self.scorer.columns(pod, nodes, feasible)
        if not cols:
            return np.zeros(feasible.size, dtype=np.int64)
        with_pod = _balance([(alloc, req) for _, alloc, req in cols], feasible.size)
        if not self.change:
            return with_pod
        asks = self._pod_requests(pod)
        without = _balance(
            [(alloc, req - ask) for (_, alloc, req), ask in zip(cols, asks, strict=True)],
            feasible.size,
        )
        # Both in [50, 100]: the dividend is never negative, floor is Go's truncation.
        result: IntArray = _HALF + (_HALF + with_pod - without) // 2
        return result

    def score_row(self, pod: PodInfo, nodes: NodeTable, row: int) -> int:
        """`score` for one row in plain numbers (cheaper than numpy for a few rows)."""
        cols = self.scorer.row_columns(pod, nodes, row)
        with_pod = _balance_one([(alloc, req) for _, alloc, req in cols])
        if not self.change:
            return with_pod
        asks = self._pod_requests(pod)
        without = _balance_one(
            [(alloc, req - ask) for (_, alloc, req), ask in zip(cols, asks, strict=True)]
        )
        return _HALF + (_HALF + with_pod - without) // 2


def new_balanced(
    args: NodeResourcesBalancedAllocationArgs, handle: Handle
) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args.resources, change=handle.features.since(1, 36))


BALANCED_REGISTRATION: Final = Registration(
    BALANCED,
    new_balanced,
    NodeResourcesBalancedAllocationArgs,
    events=frozenset(
        {ClusterEvent.NODE_ADD, ClusterEvent.NODE_ALLOCATABLE, ClusterEvent.ASSIGNED_POD_DELETE}
    ),
    default_weight=1,
)
