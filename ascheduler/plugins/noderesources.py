"""NodeResourcesFit (and what NodeResourcesBalancedAllocation shares with it).

Fit filters nodes whose free allocatable cannot hold the pod's effective requests (`Too many
pods`, `Insufficient cpu`, `Insufficient nvidia.com/gpu`, ... every failing resource listed), and
scores by LeastAllocated (default), MostAllocated or RequestedToCapacityRatio. Balanced
allocation prefers nodes whose cpu and memory utilisation stay close. Both work on the table's
columns: one vector operation per resource, whatever the number of nodes. Integer arithmetic
follows kube-scheduler's, so the scores are the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.dra.extended import class_may_help, delegated_names
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import DRA_EXTENDED_RESOURCE, SCHEDULER_PREEMPTION_FOR_RESIZE, Features
from ascheduler.framework import (
    CPU,
    MAX_NODE_SCORE,
    MEMORY,
    PODS,
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    IntArray,
    NodeTable,
    PluginArgsError,
    QueueingHintPlugin,
    Registration,
    Rejection,
    RowLocalScorePlugin,
    Status,
    WhatIfFilterPlugin,
)
from ascheduler.model import Node, PodInfo
from ascheduler.model.labelnames import label_key_problem
from ascheduler.model.quantity import format_quantity

FIT: Final = "NodeResourcesFit"
BALANCED: Final = "NodeResourcesBalancedAllocation"
MAX_CUSTOM_SCORE: Final = 10
MAX_UTILIZATION: Final = 100
RATIO: Final = "RequestedToCapacityRatio"
STRATEGIES: Final = ("LeastAllocated", "MostAllocated", RATIO)


@dataclass(frozen=True)
class ResourceSpec:
    """A resource a score looks at, and its weight (1..100; 0, as left out, is 1, as in
    kube-scheduler's defaulting)."""

    name: str
    weight: int = 1

    def __post_init__(self) -> None:
        if not self.name:
            raise PluginArgsError("name: required")
        if self.weight == 0:
            object.__setattr__(self, "weight", 1)
        if not 1 <= self.weight <= 100:
            raise PluginArgsError("weight: must be an integer in 1..100")


def _floor_div(num: IntArray, den: IntArray) -> IntArray:
    """num // den for non-negative num and positive den, in float64 when that is exact: the
    quotient is at most 100, and while den < 2^46 a quotient below an integer stays below it
    after rounding. numpy divides float64 arrays faster than int64 ones."""
    if den.size and int(den.max()) < _FLOAT_EXACT_BELOW:
        result: IntArray = (num / den).astype(np.int64)
        return result
    return num // den


_FLOAT_EXACT_BELOW: Final = 2**46


def _trunc_div(num: IntArray, den: IntArray | int) -> IntArray:
    """Go's integer division (truncates toward zero), elementwise."""
    q: IntArray = np.abs(num) // np.abs(den)
    return np.where((num < 0) != (np.asarray(den) < 0), -q, q)


def broken_linear(shape: Sequence[tuple[int, int]], util: IntArray) -> IntArray:
    """kube-scheduler's BuildBrokenLinearFunction over `shape` ((utilization, score) points,
    utilization increasing), elementwise, with Go's integer arithmetic."""
    out = np.full(util.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(util.shape, dtype=np.bool_)
    for i, (u, s) in enumerate(shape):
        hit = ~done & (util <= u)
        if i == 0:
            out[hit] = s
        else:
            pu, ps = shape[i - 1]
            out[hit] = ps + _trunc_div((s - ps) * (util[hit] - pu), u - pu)
        done |= hit
    return out


DEFAULT_RESOURCES: Final = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def check_resources(resources: Sequence[ResourceSpec]) -> None:
    if not resources:
        raise PluginArgsError("resources: expected a non-empty list")


@dataclass(frozen=True)
class UtilizationShapePoint:
    utilization: int
    score: int

    def __post_init__(self) -> None:
        if not 0 <= self.utilization <= MAX_UTILIZATION:
            raise PluginArgsError("utilization: must be an integer in 0..100")
        if not 0 <= self.score <= MAX_CUSTOM_SCORE:
            raise PluginArgsError("score: must be an integer in 0..10")


@dataclass(frozen=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True)
class ScoringStrategy:
    type: str = "LeastAllocated"
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", DEFAULT_RESOURCES)  # kube's defaulting
        if self.type not in STRATEGIES:
            raise PluginArgsError(
                f"type: unknown strategy {self.type!r}, expected one of {', '.join(STRATEGIES)}"
            )
        check_resources(self.resources)
        if self.type != RATIO or self.requested_to_capacity_ratio is None:
            return  # a release's rule (`fit_args_problems`)
        shape = self.requested_to_capacity_ratio.shape
        path = "requestedToCapacityRatio.shape"
        if not shape:
            raise PluginArgsError(f"{path}: at least one point is required")
        for i in range(1, len(shape)):
            if shape[i].utilization <= shape[i - 1].utilization:
                raise PluginArgsError(f"{path}[{i}].utilization: values must increase")


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    """kube-scheduler's `NodeResourcesFitArgs`."""

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = ScoringStrategy()

    def __post_init__(self) -> None:
        # kube-scheduler's ValidateNodeResourcesFitArgs: label names, groups without '/'.
        for i, name in enumerate(self.ignored_resources):
            if why := label_key_problem(name):
                raise PluginArgsError(f"ignoredResources[{i}]: invalid value {name!r}: {why}")
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                raise PluginArgsError(
                    f"ignoredResourceGroups[{i}]: invalid value {group!r}: resource group "
                    f"name can't contain '/'"
                )
            if why := label_key_problem(group):
                raise PluginArgsError(f"ignoredResourceGroups[{i}]: invalid value {group!r}: {why}")


def fit_args_problems(args: NodeResourcesFitArgs, features: Features) -> list[str]:
    """What a release refuses of `requestedToCapacityRatio` beside the strategy's type
    (`ValidateNodeResourcesFitArgs`). v1.35 reads it only for RequestedToCapacityRatio
    (ascheduler refuses that type without it, which kube-scheduler v1.35 would take and
    then fail on); from v1.36 it is required with that type and forbidden with the others,
    in kube-scheduler's words."""
    strategy = args.scoring_strategy
    ratio = strategy.requested_to_capacity_ratio
    path = "scoringStrategy.requestedToCapacityRatio"
    if not features.since(1, 36):
        if strategy.type == RATIO and ratio is None:
            return [f"{path}.shape: at least one point is required"]
        return []
    if strategy.type == RATIO and ratio is None:
        return [f"{path}: Required value: must be specified when type is {RATIO}"]
    if strategy.type != RATIO and ratio is not None:
        return [f"{path}: Forbidden: must be nil when type is not {RATIO}"]
    return []


class ResourceScorer:
    """kube-scheduler's `resourceAllocationScorer`: for each scored resource, allocatable and
    requested-after-placing-the-pod over the feasible rows. Rows stay one-dimensional (one
    contiguous array per resource): numpy is fastest on those, and there are only a few."""

    def __init__(self, resources: Sequence[ResourceSpec], *, use_requested: bool) -> None:
        self.resources = tuple(resources)
        self.use_requested = use_requested

    def columns(
        self, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> list[tuple[int, IntArray, IntArray]]:
        """[(weight, allocatable, requested)] per resource the pod's score depends on."""
        out = []
        for spec in self.resources:
            if spec.name in ("cpu", "memory") and not self.use_requested:
                row = CPU if spec.name == "cpu" else MEMORY
                pod_req = pod.score_cpu if spec.name == "cpu" else pod.score_memory
                node_req = nodes.nonzero[row].take(feasible)
            else:
                pod_req = pod.requests.get(spec.name, 0)
                if pod_req == 0 and spec.name not in ("cpu", "memory", "ephemeral-storage"):
                    continue  # an extended resource the pod does not ask for
                found = nodes.resource_row(spec.name)
                if found is None:  # no node has it: nothing allocatable, nothing used
                    zeros = np.zeros(feasible.size, dtype=np.int64)
                    out.append((spec.weight, zeros, zeros + pod_req))
                    continue
                row = found
                node_req = nodes.requested[row].take(feasible)
            node_req += pod_req
            out.append((spec.weight, nodes.alloc[row].take(feasible), node_req))
        return out

    def row_columns(self, pod: PodInfo, nodes: NodeTable, row: int) -> list[tuple[int, int, int]]:
        """`columns` for a single row, as plain integers."""
        out = []
        for spec in self.resources:
            if spec.name in ("cpu", "memory") and not self.use_requested:
                res = CPU if spec.name == "cpu" else MEMORY
                pod_req = pod.score_cpu if spec.name == "cpu" else pod.score_memory
                node_req = int(nodes.nonzero[res, row])
            else:
                pod_req = pod.requests.get(spec.name, 0)
                if pod_req == 0 and spec.name not in ("cpu", "memory", "ephemeral-storage"):
                    continue
                found = nodes.resource_row(spec.name)
                if found is None:
                    out.append((spec.weight, 0, pod_req))
                    continue
                res = found
                node_req = int(nodes.requested[res, row])
            out.append((spec.weight, int(nodes.alloc[res, row]), node_req + pod_req))
        return out


class NodeResourcesFit(
    WhatIfFilterPlugin,
    ExplainFilterPlugin,
    RowLocalScorePlugin,
    QueueingHintPlugin,
    EnqueueExtensions,
):
    name = FIT

    def __init__(
        self,
        *,
        strategy: str,
        resources: Sequence[ResourceSpec],
        shape: Sequence[tuple[int, int]],
        ignored: frozenset[str],
        ignored_groups: frozenset[str],
    ) -> None:
        self.strategy = strategy
        self.scorer = ResourceScorer(resources, use_requested=False)
        self.shape = tuple((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for u, s in shape)
        self.ignored = ignored
        self.ignored_groups = ignored_groups
        #: InPlacePodVerticalScalingSchedulerPreemption: a deferred resize is checked on its
        #: own node for what it adds to what the node already counts for it.
        self.deferred_resizes = False
        #: DRAExtendedResource: the DRA objects whose DeviceClasses back extended resources,
        #: left to DynamicResources on nodes that advertise none (`dra_extended`).
        self.dra_objects: ResourceObjects | None = None

    def events_to_register(self) -> frozenset[ClusterEvent]:
        events = FIT_EVENTS
        if self.dra_objects is not None:
            events |= {ClusterEvent.DEVICE_CLASS_ADD, ClusterEvent.DEVICE_CLASS_UPDATE}
        return events

    def _checked(self, name: str) -> bool:
        """Whether the filter checks resource `name`: ignoredResources and
        ignoredResourceGroups apply to extended resources (`vendor/name`) only."""
        if "/" not in name or name.startswith("kubernetes.io/"):
            return True
        return name not in self.ignored and name.split("/", 1)[0] not in self.ignored_groups

    def score_key(self, pod: PodInfo) -> Hashable:
        return (pod.score_cpu, pod.score_memory, tuple(sorted(pod.requests.items())))

    # -- queueing hint -----------------------------------------------------------------------

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """kube-scheduler's `isSchedulableAfterPodScaleDown` for an assigned pod's update (an
        in-place resize, or its end, shrinking what it holds): only a resource the pod asks
        for that the other pod now holds less of can help. Other events: always."""
        if event in (ClusterEvent.DEVICE_CLASS_ADD, ClusterEvent.DEVICE_CLASS_UPDATE):
            return class_may_help(pod, old, new)
        deferred = self._deferred(pod)
        if deferred:
            # Bound to its node: a change elsewhere cannot help it.
            changed = new if new is not None else old
            where = changed.node_name if isinstance(changed, PodInfo) else None
            if isinstance(changed, Node):
                where = changed.name
            if where is not None and where != pod.node_name:
                return False
        if event is ClusterEvent.ASSIGNED_POD_SCALE_UP:
            # `isSchedulableAfterAssignedPodScaleUp`: only a deferred resize on that node.
            return deferred
        if event is not ClusterEvent.ASSIGNED_POD_UPDATE:
            return True
        if not isinstance(old, PodInfo) or not isinstance(new, PodInfo) or not new.assigned:
            return False
        return any(
            value > 0 and new.requests.get(name, 0) < old.requests.get(name, 0)
            for name, value in pod.requests.items()
        )

    # -- filter ------------------------------------------------------------------------------

    def _deferred(self, pod: PodInfo) -> bool:
        return self.deferred_resizes and pod.resize_deferred and bool(pod.node_name)

    def _cached_self(self, pod: PodInfo, nodes: NodeTable) -> tuple[int, PodInfo] | None:
        """The row of a deferred resize's node and the pod as the node counts it, if both
        are there (`adjustDeltasToAccomodateCacheDiscrepancy`)."""
        if not self._deferred(pod):
            return None
        row = nodes.index.get(pod.node_name)
        if row is None:
            return None
        cached = nodes.pods(row).get(pod.uid)
        return None if cached is None else (row, cached)

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        wanted = tuple((n, v) for n, v in pod.fit_requests.items() if v > 0 and self._checked(n))
        found = self._cached_self(pod, nodes)
        if found is not None:
            return self._filter_deferred(pod, nodes, wanted, *found)
        delegated = delegated_names(self.dra_objects, wanted)
        if delegated:
            return self._rejections(nodes, wanted, delegated)
        # Which rows this request shape does not fit, kept per shape and recomputed only for
        # the rows whose usage changed: a stream of similar pods pays for one row a cycle.
        # The reasons are worked out only when some row does not fit.
        if not self._misfits(nodes, wanted).any():
            return None
        return self._rejections(nodes, wanted)

    def _filter_deferred(
        self,
        pod: PodInfo,
        nodes: NodeTable,
        wanted: tuple[tuple[str, int], ...],
        row: int,
        cached: PodInfo,
    ) -> FilterResult | None:
        """`filter` with the pod's own row checked for the increase only (other rows, which
        DeferredPodScheduling rejects anyway, as for any pod)."""
        others = self._rejections(nodes, wanted) if self._misfits(nodes, wanted).any() else None
        status = self._row_status(pod, nodes, row, (), (), cached)
        rejected = np.zeros(nodes.n, dtype=np.bool_) if others is None else others.rejected.copy()
        rejected[row] = not status.ok
        rejections = []
        for rejection in others.rejections if others is not None else ():
            mask = rejection.nodes.copy()
            mask[row] = False
            if mask.any():
                rejections.append(Rejection(rejection.reason, mask, rejection.code))
        if not status.ok:
            here = np.zeros(nodes.n, dtype=np.bool_)
            here[row] = True
            rejections.extend(Rejection(reason, here, status.code) for reason in status.reasons)
        return FilterResult(rejected, rejections) if rejected.any() else None

    def _misfits(self, nodes: NodeTable, wanted: tuple[tuple[str, int], ...]) -> IntArray:
        rows_of = [nodes.resource_row(name) for name, _ in wanted]

        def compute(rows: IntArray) -> IntArray:
            free = nodes.free[:, rows]
            bad: BoolArray = free[PODS] < 1
            for (_, value), res in zip(wanted, rows_of, strict=True):
                if res is None:
                    return np.ones(rows.size, dtype=np.int64)
                bad |= free[res] < value
            out: IntArray = bad.astype(np.int64)
            return out

        def compute_row(row: int) -> int:
            free = nodes.free[:, row].tolist()
            if free[PODS] < 1:
                return 1
            for (_, value), res in zip(wanted, rows_of, strict=True):
                if res is None or free[res] < value:
                    return 1
            return 0

        return nodes.row_values((FIT, "misfits", wanted), compute, compute_row)

    def _rejections(
        self,
        nodes: NodeTable,
        wanted: tuple[tuple[str, int], ...],
        delegated: frozenset[str] = frozenset(),
    ) -> FilterResult | None:
        alloc, free = nodes.alloc, nodes.free
        failing: list[tuple[str, BoolArray]] = []
        rejected: BoolArray | None = None
        never: BoolArray | None = None
        too_many = free[PODS] < 1
        if too_many.any():
            failing.append(("Too many pods", too_many))
            rejected = too_many
        for name, value in wanted:
            row = nodes.resource_row(name)
            if row is None and name in delegated:
                continue  # no node has any: DRA serves it everywhere
            if row is None:  # no node has any of it: short everywhere, for good
                short = exceeds = np.ones(nodes.n, dtype=np.bool_)
            else:
                short = free[row] < value
                if name in delegated:
                    short &= alloc[row] > 0  # a node with none leaves it to DRA
                if not short.any():
                    continue
                exceeds = value > alloc[row]
            failing.append((f"Insufficient {name}", short))
            rejected = short if rejected is None else rejected | short
            if exceeds.any():
                never = exceeds if never is None else never | exceeds
        if rejected is None:
            return None
        if never is None:
            return FilterResult(rejected, [Rejection(reason, mask) for reason, mask in failing])
        # A node where some request exceeds its whole allocatable gets one status for all its
        # reasons, UnschedulableAndUnresolvable: no eviction could ever make room there.
        rejections = []
        for reason, mask in failing:
            if (hopeless := mask & never).any():
                rejections.append(Rejection(reason, hopeless, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
            if (hopeful := mask & ~never).any():
                rejections.append(Rejection(reason, hopeful))
        return FilterResult(rejected, rejections)

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """`cpu: requested 3, free 1.2 of 4` for each resource short on the row."""
        lines = []
        free_pods = int(nodes.free[PODS, row])
        if free_pods < 1:
            used, cap = int(nodes.requested[PODS, row]), int(nodes.alloc[PODS, row])
            lines.append(f"pods: {used} of {cap} running or assumed, no room for one more")
        delegated = delegated_names(self.dra_objects, tuple(pod.fit_requests.items()))
        for name, value in pod.fit_requests.items():
            if value <= 0 or not self._checked(name):
                continue
            res = nodes.resource_row(name)
            if name in delegated and (res is None or nodes.alloc[res, row] == 0):
                continue
            want = format_quantity(name, value)
            if res is None:
                lines.append(f"{name}: requested {want}, no node has any")
                continue
            free, alloc = int(nodes.free[res, row]), int(nodes.alloc[res, row])
            if free >= value:
                continue
            if alloc == 0:
                lines.append(f"{name}: requested {want}, the node has none")
            else:
                lines.append(
                    f"{name}: requested {want}, free {format_quantity(name, max(free, 0))} "
                    f"of {format_quantity(name, alloc)}"
                )
        return lines

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        """`filter` for one row whose pods change by `removed` and `added`."""
        found = self._cached_self(pod, nodes)
        cached = found[1] if found is not None and found[0] == row else None
        return self._row_status(pod, nodes, row, removed, added, cached)

    def _row_status(
        self,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
        cached: PodInfo | None,
    ) -> Status:
        """One row's verdict; `cached`: the pod itself as the row already counts it (a
        deferred resize), whose requests only the increase over is checked. The pod count
        is not adjusted for it, as kube-scheduler does not."""

        def delta(name: str) -> int:
            return sum(p.requests.get(name, 0) for p in removed) - sum(
                p.requests.get(name, 0) for p in added
            )

        reasons = []
        never = False
        free = nodes.free[:, row].tolist()
        if free[PODS] + len(removed) - len(added) < 1:
            reasons.append("Too many pods")
        delegated = delegated_names(self.dra_objects, tuple(pod.fit_requests.items()))
        for name, value in pod.fit_requests.items():
            if value <= 0 or not self._checked(name):
                continue
            need = value if cached is None else max(0, value - cached.requests.get(name, 0))
            res = nodes.resource_row(name)
            if name in delegated and (res is None or nodes.alloc[res, row] == 0):
                continue
            if res is None:
                if need > 0:
                    reasons.append(f"Insufficient {name}")
                    never = True
                continue
            if free[res] + delta(name) < need:
                reasons.append(f"Insufficient {name}")
                never = never or value > int(nodes.alloc[res, row])
        if not reasons:
            return SUCCESS
        return Status.unschedulable(*reasons, resolvable=not never)

    # -- score -------------------------------------------------------------------------------

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        total = np.zeros(feasible.size, dtype=np.int64)
        weight_sum: IntArray | int = 0
        rtc = self.strategy == "RequestedToCapacityRatio"
        for weight, alloc, req in self.scorer.columns(pod, nodes, feasible):
            everywhere = bool(alloc.all())
            safe = alloc if everywhere else np.maximum(alloc, 1)
            if self.strategy == "LeastAllocated":
                # (alloc - req) * 100 / alloc, floored; 0 when req > alloc.
                score = _floor_div(np.maximum(alloc - req, 0) * MAX_NODE_SCORE, safe)
            elif self.strategy == "MostAllocated":
                score = _floor_div(np.minimum(req, alloc) * MAX_NODE_SCORE, safe)
            else:
                util = (np.minimum(req, alloc) * MAX_UTILIZATION / safe).astype(np.int64)
                util[req > alloc] = MAX_UTILIZATION
                score = self._broken_linear(util)
            counted: IntArray | int
            if rtc:
                counted = np.where((score > 0) & (alloc > 0), weight, 0)
            elif everywhere:
                counted = weight
            else:
                counted = np.where(alloc > 0, weight, 0)
            total += score * counted
            weight_sum = weight_sum + counted
        if isinstance(weight_sum, int):
            if weight_sum == 0:
                return np.zeros(feasible.size, dtype=np.int64)
            return total // weight_sum
        divisor = np.maximum(weight_sum, 1)
        if rtc:
            # math.Round: half away from zero (scores are never negative here).
            out: IntArray = np.floor(total / divisor + 0.5).astype(np.int64)
        else:
            out = total // divisor
        return np.where(weight_sum > 0, out, 0)

    def score_row(self, pod: PodInfo, nodes: NodeTable, row: int) -> int:
        """`score` for one row in plain integers (cheaper than numpy for a few rows)."""
        total = weight_sum = 0
        for weight, alloc, req in self.scorer.row_columns(pod, nodes, row):
            if alloc == 0:
                continue
            if self.strategy == "LeastAllocated":
                score = (alloc - req) * MAX_NODE_SCORE // alloc if req <= alloc else 0
            elif self.strategy == "MostAllocated":
                score = min(req, alloc) * MAX_NODE_SCORE // alloc
            else:
                util = MAX_UTILIZATION if req > alloc else req * MAX_UTILIZATION // alloc
                score = self._broken_linear_one(util)
                if score <= 0:
                    continue
            total += score * weight
            weight_sum += weight
        if weight_sum == 0:
            return 0
        if self.strategy == "RequestedToCapacityRatio":
            return math.floor(total / weight_sum + 0.5)
        return total // weight_sum

    def _broken_linear_one(self, util: int) -> int:
        shape = self.shape
        for i, (u, s) in enumerate(shape):
            if util <= u:
                if i == 0:
                    return s
                pu, ps = shape[i - 1]
                return ps + int((s - ps) * (util - pu) / (u - pu))  # truncates like Go
        return shape[-1][1]

    def _broken_linear(self, util: IntArray) -> IntArray:
        return broken_linear(self.shape, util)


def new_fit(args: NodeResourcesFitArgs, handle: Handle) -> NodeResourcesFit:
    strategy = args.scoring_strategy
    ratio = strategy.requested_to_capacity_ratio
    fit = NodeResourcesFit(
        strategy=strategy.type,
        resources=strategy.resources,
        shape=tuple((p.utilization, p.score) for p in ratio.shape) if ratio else (),
        ignored=frozenset(args.ignored_resources),
        ignored_groups=frozenset(args.ignored_resource_groups),
    )
    fit.deferred_resizes = SCHEDULER_PREEMPTION_FOR_RESIZE in handle.features
    if DRA_EXTENDED_RESOURCE in handle.features:
        fit.dra_objects = handle.resources
    return fit


FIT_EVENTS: Final = frozenset(
    {
        ClusterEvent.NODE_ADD,
        ClusterEvent.NODE_ALLOCATABLE,
        ClusterEvent.ASSIGNED_POD_DELETE,
        ClusterEvent.ASSIGNED_POD_UPDATE,
        # Emitted only while InPlacePodVerticalScalingSchedulerPreemption is on.
        ClusterEvent.ASSIGNED_POD_SCALE_UP,
    }
)
FIT_REGISTRATION: Final = Registration(
    FIT,
    new_fit,
    NodeResourcesFitArgs,
    events=FIT_EVENTS,
    default_weight=1,
    kube_points=frozenset({"preFilter", "preScore"}),
    check=fit_args_problems,
)
