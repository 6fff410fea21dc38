"""`Framework`: one profile's plugins, run extension point by extension point.

Plugins are enabled kube-scheduler's `multiPoint` way by default: a plugin listed once takes
part in every extension point it implements. The scheduling cycle calls `find_nodes` (PreFilter,
Filter, PostFilter when no node fits, PreScore, Score, NormalizeScore), then `reserve` and
`permit`; the binding cycle calls `wait_on_permit`, `pre_bind`, `bind` and `post_bind`. A
profile with HTTP extenders calls `find_nodes_with_extenders` instead (`withextenders`: the
only steps that await).

When no node fits, `Diagnosis` says why the way kube-scheduler's FitError does: each node counts
under the reasons of the first filter that rejected it, and the message reads
`0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s).`, followed by
what PostFilter plugins said.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import structlog

from ascheduler.features import GENERIC_WORKLOAD, SCHEDULER_PREEMPTION_FOR_RESIZE
from ascheduler.framework.extender import Extenders
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    MAX_NODE_SCORE,
    NO_NODES_MESSAGE,
    SUCCESS,
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    ExtensionPoint,
    FilterPlugin,
    FilterResult,
    GateKeysPlugin,
    PermitPlugin,
    Plugin,
    PodGroupPostFilterPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHintPlugin,
    QueueSortPlugin,
    Rejection,
    ReservePlugin,
    RowLocalScorePlugin,
    ScorePlugin,
    Status,
    WhatIfFilterPlugin,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.profile import ProfileSpec, multipoint_plugins
from ascheduler.framework.registry import Registry
from ascheduler.framework.runtime import withextenders
from ascheduler.framework.runtime.assembly import assemble
from ascheduler.framework.runtime.outcomes import (
    DryRun,
    Filtered,
    PostFiltering,
    ScheduleResult,
    ScoringError,
)
from ascheduler.framework.waiting import WaitingPod
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SchedulingGroup

log = structlog.get_logger(__name__)
#: Every cluster event (what a plugin that registers none waits for).
ALL_EVENTS: Final = frozenset(ClusterEvent)

MAX_PERMIT_TIMEOUT: Final = 15 * 60.0
#: The in-tree plugins whose PreFilter returns Skip (so their Filter does not run) for a
#: deferred in-place resize while InPlacePodVerticalScalingSchedulerPreemption is on
#: (1.37): a pod already running on its node is checked for the resources it adds only.
SKIPPED_FOR_DEFERRED_RESIZE: Final = frozenset(
    {
        "TaintToleration",
        "NodeUnschedulable",
        "NodeAffinity",
        "NodePorts",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "VolumeZone",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "NodeDeclaredFeatures",
        "DynamicResources",
    }
)
#: RunPodGroupPostFilterPlugins without GenericWorkload.
WORKLOAD_DISABLED: Final = "generic workload feature is disabled, cannot perform PodGroupPostFilter"
MIN_FEASIBLE_NODES_TO_FIND: Final = 100
MIN_FEASIBLE_PERCENTAGE: Final = 5
#: The package of the in-tree plugins.
_IN_TREE: Final = "ascheduler.plugins."
_SCALAR_ROWS: Final = 16  # up to this many changed rows are rescored in plain Python


def recorded_status(recorded: Sequence[tuple[str, FilterResult]], plugin: str, row: int) -> Status:
    """A plugin's verdict on one row from its columnar result: its reasons there, the worst
    code among them (SUCCESS when it rejected nothing there)."""
    for name, result in recorded:
        if name != plugin or not result.rejected[row]:
            continue
        reasons = tuple(r.reason for r in result.rejections if r.nodes[row])
        code = max(
            (r.code for r in result.rejections if r.nodes[row]),
            key=int,
            default=Code.UNSCHEDULABLE,
        )
        return Status(code, reasons, plugin)
    return SUCCESS


@dataclass(frozen=True)
class Evaluation:
    """`Framework.evaluate`: feasible node -> total score (empty when none fits), and the
    status saying why not."""

    scores: Mapping[str, int]
    status: Status

    @property
    def best(self) -> set[str]:
        """The nodes sharing the highest score (more than one: a random tie-break picks)."""
        if not self.scores:
            return set()
        top = max(self.scores.values())
        return {name for name, score in self.scores.items() if score == top}


def num_feasible_nodes_to_find(num_nodes: int, percentage: int) -> int:
    """kube-scheduler's `numFeasibleNodesToFind`: how many feasible nodes to score."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_nodes
    pct = percentage or max(50 - num_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


def _events_of(
    plugins: Mapping[str, Plugin], registry: Registry
) -> dict[str, frozenset[ClusterEvent]]:
    """The cluster events each plugin registered (all of them when it says nothing)."""
    events: dict[str, frozenset[ClusterEvent]] = {}
    for name, p in plugins.items():
        if isinstance(p, EnqueueExtensions):
            events[name] = p.events_to_register()
        else:
            declared = registry[name].events
            events[name] = ALL_EVENTS if declared is None else declared
    return events


class Framework:
    def __init__(
        self,
        spec: ProfileSpec,
        registry: Registry,
        handle: Handle,
        *,
        percentage_of_nodes_to_score: int = 0,
        extenders: Extenders | None = None,
    ) -> None:
        """Build each enabled plugin once, from its registration and decoded args; every
        problem (an unknown plugin, a bad argument, a plugin that does not conform) is
        collected into one ConfigError, with its path."""
        self.profile = spec.scheduler_name
        self.handle = handle
        handle.set_filters(self)
        #: kube-scheduler's HTTP extenders (shared by every profile); None: there are none.
        self.extenders: Extenders | None = extenders or None
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._next_start = 0
        multi = multipoint_plugins(spec, registry, handle.features)
        built = assemble(spec, registry, handle, multi)
        self.plugins: dict[str, Plugin] = built.plugins
        #: Each plugin's decoded arguments (what `config defaults` prints).
        self.args: dict[str, Any] = built.args
        self.weights: dict[str, int] = built.weights
        self._place(built.points)
        self._events = _events_of(self.plugins, registry)
        self._rng = random.Random()
        #: 1.37's pod group cycle runs no PostFilter for a member of a pod group (the group's
        #: PodGroupPostFilter replaces it).
        self._group_cycle = handle.features.since(1, 37) and GENERIC_WORKLOAD in handle.features

    def _place(self, points: Mapping[ExtensionPoint, list[Plugin]]) -> None:
        """Each point's plugins as the attribute the cycle reads, and what the cycle
        precomputes about them."""

        def of(point: ExtensionPoint, _: type[Any]) -> list[Any]:
            return points[point]

        self.pre_enqueue_plugins: list[PreEnqueuePlugin] = of("preEnqueue", PreEnqueuePlugin)
        self.queue_sort: QueueSortPlugin = of("queueSort", QueueSortPlugin)[0]
        self.pre_filter_plugins: list[PreFilterPlugin] = of("preFilter", PreFilterPlugin)
        self.filter_plugins: list[FilterPlugin] = of("filter", FilterPlugin)
        self.post_filter_plugins: list[PostFilterPlugin] = of("postFilter", PostFilterPlugin)
        #: 1.37's (empty before); run only with GenericWorkload.
        self.pod_group_post_filter_plugins: list[PodGroupPostFilterPlugin] = of(
            "podGroupPostFilter", PodGroupPostFilterPlugin
        )
        self.pre_score_plugins: list[PreScorePlugin] = of("preScore", PreScorePlugin)
        self.score_plugins: list[ScorePlugin] = of("score", ScorePlugin)
        self.reserve_plugins: list[ReservePlugin] = of("reserve", ReservePlugin)
        self.permit_plugins: list[PermitPlugin] = of("permit", PermitPlugin)
        self.pre_bind_plugins: list[PreBindPlugin] = of("preBind", PreBindPlugin)
        self.bind_plugins: list[BindPlugin] = of("bind", BindPlugin)
        self.post_bind_plugins: list[PostBindPlugin] = of("postBind", PostBindPlugin)
        self._row_local = {p.name for p in self.score_plugins if isinstance(p, RowLocalScorePlugin)}
        self._what_if: list[tuple[FilterPlugin, WhatIfFilterPlugin | None]] = [
            (p, p if isinstance(p, WhatIfFilterPlugin) else None) for p in self.filter_plugins
        ]
        self._normalizes = {
            p.name for p in self.score_plugins if type(p).normalize is not ScorePlugin.normalize
        }
        # Scores outside 0..MAX_NODE_SCORE fail the attempt, as in kube-scheduler; the in-tree
        # plugins' ranges are held by their tests, so only the others' are checked per pod.
        self._range_checked = {
            p.name for p in self.score_plugins if not type(p).__module__.startswith(_IN_TREE)
        }

    # -- queueing ----------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for plugin in self.pre_enqueue_plugins:
            status = plugin.pre_enqueue(pod)
            if not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def hinted(
        self, pod: PodInfo, plugins: frozenset[str], event: ClusterEvent, old: Any, new: Any
    ) -> bool:
        """Whether one of the plugins that rejected `pod` and registered `event` says it may
        help (a plugin without hints always may; so may one whose hint fails)."""
        if not plugins or (old is None and new is None):
            return True
        for name in plugins:
            if event not in self._events.get(name, ALL_EVENTS):
                continue
            plugin = self.plugins.get(name)
            if not isinstance(plugin, QueueingHintPlugin):
                return True
            try:
                if plugin.queueing_hint(pod, event, old, new):
                    return True
            except Exception:
                log.exception("queueing_hint_failed", plugin=name, pod=pod.key, event=event.value)
                return True
        return False

    def gate_keys(
        self, pod: PodInfo, plugins: frozenset[str], event: ClusterEvent
    ) -> frozenset[str] | None:
        """The objects whose `event` may let `pod` in, by the plugins that hold it back (see
        `GateKeysPlugin`); None when one of them registered `event` and cannot say."""
        keys: set[str] = set()
        for name in plugins:
            if event not in self._events.get(name, ALL_EVENTS):
                continue
            plugin = self.plugins.get(name)
            if not isinstance(plugin, GateKeysPlugin):
                return None
            try:
                named = plugin.gate_keys(pod, event)
            except Exception:
                log.exception("gate_keys_failed", plugin=name, pod=pod.key, event=event.value)
                return None
            if named is None:
                return None
            keys |= named
        return frozenset(keys)

    def events_for(self, plugins: frozenset[str]) -> frozenset[ClusterEvent]:
        """The cluster events that may help a pod these plugins rejected."""
        if not plugins:
            return ALL_EVENTS
        events: set[ClusterEvent] = set()
        for name in plugins:
            events |= self._events.get(name, ALL_EVENTS)
        return frozenset(events)

    # -- the scheduling cycle ----------------------------------------------------------------

    def find_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> ScheduleResult:
        """PreFilter .. NormalizeScore: the node to assume, or why there is none (then with
        what PostFilter plugins did about it). Plugins only: see `find_nodes_with_extenders`."""
        filtered = self._filter(state, pod, nodes)
        if isinstance(filtered, ScheduleResult):
            return filtered
        if filtered.feasible.size == 1:
            return ScheduleResult(nodes.names[int(filtered.feasible[0])], SUCCESS, feasible=1)
        return self._select(state, pod, nodes, filtered.feasible)

    async def find_nodes_with_extenders(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> ScheduleResult:
        """`find_nodes` with the HTTP extenders where kube-scheduler consults them
        (`withextenders.find_nodes`). ExtenderError from an extender that is not ignorable."""
        return await withextenders.find_nodes(self, state, pod, nodes)

    async def dry_run_with_extenders(self, pod: PodInfo, nodes: NodeTable) -> DryRun:
        """`dry_run` with the HTTP extenders asked (`withextenders.dry_run`)."""
        return await withextenders.dry_run(self, pod, nodes)

    def _filter(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        *,
        post_filter: bool = True,
        sample: bool = True,
    ) -> Filtered | ScheduleResult:
        """PreFilter and Filter over every node, then the sample to score (every feasible row
        unless `sample`); or the result when no node fits (PostFilter has run, unless
        `post_filter` is false) or a plugin failed."""
        filtered = self._filter_or_diagnose(state, pod, nodes, sample=sample)
        if isinstance(filtered, Diagnosis):
            if self._group_cycle and pod.scheduling_group is not None:
                post_filter = False
            return self._unschedulable(state, pod, nodes, filtered, post_filter)
        return filtered

    def _filter_or_diagnose(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, *, sample: bool = True
    ) -> Filtered | ScheduleResult | Diagnosis:
        """`_filter` before PostFilter: the diagnosis when no node fits."""
        n = nodes.n
        if n == 0:
            return ScheduleResult(
                None, Status.unschedulable(NO_NODES_MESSAGE), Diagnosis(num_nodes=0)
            )
        candidates: BoolArray | None = None
        narrowed_by: list[str] = []
        timings = state.timings
        mark = time.perf_counter()
        refused: Status | None = None
        deferred = pod.resize_deferred and SCHEDULER_PREEMPTION_FOR_RESIZE in self.handle.features
        if deferred:
            # Their PreFilters say Skip, whether or not they have one here.
            state.skip_filter.update(SKIPPED_FOR_DEFERRED_RESIZE)
        for pre in self.pre_filter_plugins:
            if deferred and pre.name in SKIPPED_FOR_DEFERRED_RESIZE:
                continue
            result, status = pre.pre_filter(state, pod, nodes)
            if status.code is Code.SKIP:
                state.skip_filter.add(pre.name)
                continue
            if not status.ok:
                if not status.rejected:
                    # kube-scheduler's wording of a PreFilter error.
                    failed = f'running PreFilter plugin "{pre.name}": {status.message}'
                    return ScheduleResult(None, Status.error(failed, pre.name))
                refused = status.with_plugin(pre.name)
                if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    break
                # A resolvable rejection runs the remaining PreFilters all the same, so that
                # preemption finds every plugin's state (kubernetes#119770); the last one
                # stands.
                continue
            if result is not None and result.node_names is not None:
                allowed = np.fromiter(
                    (name in result.node_names for name in nodes.names), dtype=np.bool_, count=n
                )
                candidates = allowed if candidates is None else candidates & allowed
                narrowed_by.append(pre.name)

        if refused is not None:
            diag = Diagnosis(
                n,
                prefilter_status=refused,
                rejecting_plugins={refused.plugin},
                unresolvable=refused.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            )
            return diag
        now = time.perf_counter()
        timings["PreFilter"], mark = now - mark, now
        applied: list[tuple[str, FilterResult]] = []
        rejected = np.zeros(n, dtype=np.bool_) if candidates is None else ~candidates
        for plugin in self.filter_plugins:
            if plugin.name in state.skip_filter:
                continue
            outcome = plugin.filter(state, pod, nodes)
            if outcome is not None:
                for rejection in outcome.rejections:
                    if rejection.code is Code.ERROR:
                        # A plugin that cannot decide fails the attempt (kube-scheduler's
                        # error status from Filter), whatever the other nodes say.
                        failed = f'running "{plugin.name}" filter plugin: {rejection.reason}'
                        return ScheduleResult(None, Status.error(failed, plugin.name))
                applied.append((plugin.name, outcome))
                rejected |= outcome.rejected
        if len(self.handle.nominator):
            applied = self._with_nominated(state, pod, nodes, rejected, applied)
        feasible: IntArray = np.flatnonzero(~rejected)
        timings["Filter"] = time.perf_counter() - mark
        if feasible.size == 0:
            return self._diagnose(n, candidates, narrowed_by, applied)
        chosen = self._sample(feasible, n) if sample else feasible
        return Filtered(chosen, candidates, narrowed_by, applied)

    def _with_nominated(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rejected: BoolArray,
        applied: list[tuple[str, FilterResult]],
    ) -> list[tuple[str, FilterResult]]:
        """kube-scheduler's RunFilterPluginsWithNominatedPods: a node with pods nominated to
        it of at least this pod's priority is filtered with them on it first; if that fails,
        its verdict is that failure (and `rejected` says so)."""
        overrides: dict[int, Status] = {}
        for name, nominated in self.handle.nominator.nodes():
            row = nodes.index.get(name)
            if row is None:
                continue
            others = [p for p in nominated if p.uid != pod.uid and p.priority >= pod.priority]
            if not others:
                continue
            status = self.filter_what_if(state, pod, nodes, row, applied, (), others)
            if status.rejected:
                overrides[row] = status
        if not overrides:
            return applied
        rows = np.fromiter(overrides, dtype=np.int64, count=len(overrides))
        rejected[rows] = True
        out: list[tuple[str, FilterResult]] = []
        for plugin, result in applied:
            if result.rejected[rows].any():
                keep = np.ones(nodes.n, dtype=np.bool_)
                keep[rows] = False
                result = FilterResult(
                    result.rejected & keep,
                    [Rejection(r.reason, r.nodes & keep, r.code) for r in result.rejections],
                )
            out.append((plugin, result))
        masks: dict[tuple[str, str, Code], BoolArray] = {}
        for row, status in overrides.items():
            for reason in status.reasons:
                key = (status.plugin, reason, status.code)
                mask = masks.get(key)
                if mask is None:
                    mask = masks[key] = np.zeros(nodes.n, dtype=np.bool_)
                mask[row] = True
        for (plugin, reason, code), mask in masks.items():
            out.append((plugin, FilterResult(mask, [Rejection(reason, mask, code)])))
        return out

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        """kube-scheduler's RunPodGroupPostFilterPlugins for a group whose attempt failed
        (`pod`: the member that came up first): the first Success is the answer, as is an
        UnschedulableAndUnresolvable status; Unschedulable reasons are kept, in the profile's
        order, and returned together (none: an Unschedulable status without reasons); an
        Error names its plugin. Without GenericWorkload (no pod group cycle runs then),
        kube-scheduler's refusal."""
        if GENERIC_WORKLOAD not in self.handle.features:
            return Status.unschedulable(WORKLOAD_DISABLED)
        reasons: list[str] = []
        rejector = ""
        for plugin in self.pod_group_post_filter_plugins:
            status = plugin.pod_group_post_filter(group, pod)
            if status.code is Code.SUCCESS:
                return status.with_plugin(plugin.name)
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return status.with_plugin(plugin.name)
            if status.code is not Code.UNSCHEDULABLE:
                return Status.error(
                    f'error in "{plugin.name}" PodGroupPostFilter plugins: {status.message}',
                    plugin.name,
                )
            reasons.extend(status.reasons)
            rejector = rejector or plugin.name
        return Status.unschedulable(*reasons, plugin=rejector)

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        recorded: Sequence[tuple[str, FilterResult]],
        removed: Sequence[PodInfo] = (),
        added: Sequence[PodInfo] = (),
    ) -> Status:
        """Every Filter on one row, in order, the first rejection winning (kube-scheduler's
        RunFilterPlugins on one node), with `removed` (pods on the row) gone and `added` on
        it. A plugin that cannot answer what-if (not a `WhatIfFilterPlugin`) gives its verdict
        from the columnar pass, `recorded` (the `(plugin, result)` pairs the cycle's Filter
        produced): it depends on the node alone. `state` is the cycle's, after PreFilter."""
        for plugin, what_if in self._what_if:
            if plugin.name in state.skip_filter:
                continue
            if what_if is not None:
                status = what_if.filter_what_if(state, pod, nodes, row, removed, added)
            else:
                status = recorded_status(recorded, plugin.name, row)
            if not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def _select(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        feasible: IntArray,
        extra: IntArray | None = None,
    ) -> ScheduleResult:
        mark = time.perf_counter()
        try:
            row = self._best(state, pod, nodes, feasible, extra)
        except ScoringError as exc:
            return ScheduleResult(None, Status.error(str(exc)))
        state.timings["Score"] = time.perf_counter() - mark
        return ScheduleResult(nodes.names[row], SUCCESS, feasible=int(feasible.size))

    def _unschedulable(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        diag: Diagnosis,
        post_filter: bool = True,
    ) -> ScheduleResult:
        """No node fits: PostFilter plugins run in order until one succeeds (it nominates a
        node) or fails outright; the rejections' messages join the failure message, as
        kube-scheduler's RunPostFilterPlugins does."""
        run = PostFiltering(pod)
        for plugin in self.post_filter_plugins if post_filter else ():
            if run.done(plugin.name, plugin.post_filter(state, pod, nodes, diag)):
                break
        return run.result(diag)

    def _sample(self, feasible: IntArray, n: int) -> IntArray:
        """The first `numFeasibleNodesToFind` feasible rows from a start that rotates by the
        rows examined, as kube-scheduler walks its node list (so load spreads over all nodes).
        Filtering ran over every row already (it is cheap in columns); scoring is what the
        sample bounds."""
        k = num_feasible_nodes_to_find(n, self.percentage_of_nodes_to_score)
        start = self._next_start % n
        if feasible.size <= k:
            self._next_start = start
            return feasible
        split = int(np.searchsorted(feasible, start))
        end = split + k
        if end <= feasible.size:
            chosen = feasible[split:end]
            last = int(chosen[-1])
        else:
            # The walk wraps: the rows from the start, then the first rows again. Both runs
            # are sorted and the wrapped one lies wholly below, so this order is sorted.
            wrapped = end - feasible.size
            last = int(feasible[wrapped - 1])
            chosen = np.concatenate((feasible[:wrapped], feasible[split:]))
        self._next_start = (last + 1) % n
        return chosen

    def _diagnose(
        self,
        n: int,
        candidates: BoolArray | None,
        narrowed_by: list[str],
        applied: list[tuple[str, FilterResult]],
    ) -> Diagnosis:
        diag = Diagnosis(num_nodes=n, filtered=applied)
        codes = np.zeros(n, dtype=np.int64)
        alive = np.ones(n, dtype=np.bool_) if candidates is None else candidates.copy()
        if candidates is not None:
            outside = ~candidates
            if outside.any():
                reason = f"node(s) didn't satisfy plugin(s) [{', '.join(narrowed_by)}]"
                diag.reason_counts[reason] = int(outside.sum())
                diag.rejecting_plugins.update(narrowed_by)
                diag.excluded = (reason, outside)
                codes[outside] = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        resolvable_seen = False
        for name, outcome in applied:
            first = outcome.rejected & alive
            for rejection in outcome.rejections:
                mine = rejection.nodes & alive
                count = int(mine.sum())
                if count:
                    diag.reason_counts[rejection.reason] = (
                        diag.reason_counts.get(rejection.reason, 0) + count
                    )
                    diag.rejecting_plugins.add(name)
                    if rejection.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        resolvable_seen = True
                    # A node's code is its first plugin's worst: unresolvable wins.
                    codes[mine] = np.maximum(codes[mine], int(rejection.code))
            alive &= ~first
        diag.codes = codes
        diag.unresolvable = not resolvable_seen and candidates is None
        return diag

    def evaluate(self, pod: PodInfo, nodes: NodeTable) -> Evaluation:
        """A dry run of PreFilter .. NormalizeScore without the tie-break (and without
        PostFilter): the feasible nodes with their total scores, or why none fits. Plugins
        only (no extender is asked)."""
        state = CycleState()
        filtered = self._filter(state, pod, nodes, post_filter=False)
        if isinstance(filtered, ScheduleResult):
            return Evaluation({}, filtered.status)
        rows = filtered.feasible
        if rows.size == 1:
            return Evaluation({nodes.names[int(rows[0])]: 0}, SUCCESS)
        try:
            totals = self._totals(state, pod, nodes, rows)
        except ScoringError as exc:
            return Evaluation({}, Status.error(str(exc)))
        return Evaluation(
            {nodes.names[int(r)]: int(t) for r, t in zip(rows, totals, strict=True)}, SUCCESS
        )

    def dry_run(self, pod: PodInfo, nodes: NodeTable, *, post_filter: bool = True) -> DryRun:
        """An attempt that changes nothing (`CycleState.dry_run`): PreFilter and Filter over
        every node, PostFilter when none fits (preemption says which victims it would pick,
        and evicts none), and every feasible node scored (the scheduler scores a sample of
        `numFeasibleNodesToFind`). Plugins only (no extender is asked). What `ascheduler
        explain` and `/debug/pods` are made of."""
        state = CycleState(dry_run=True)
        empty: IntArray = np.zeros(0, dtype=np.int64)
        filtered = self._filter(state, pod, nodes, post_filter=post_filter, sample=False)
        if isinstance(filtered, ScheduleResult):
            return DryRun(
                filtered.status,
                state,
                filtered.diagnosis,
                empty,
                {},
                empty,
                filtered.nominated_node,
            )
        diag = self._diagnose(nodes.n, filtered.candidates, filtered.narrowed_by, filtered.applied)
        rows = filtered.feasible
        parts: dict[str, IntArray] = {}
        try:
            total = self._totals(state, pod, nodes, rows, parts=parts) if rows.size else empty
        except ScoringError as exc:
            return DryRun(Status.error(str(exc)), state, diag, empty, {}, empty, "")
        return DryRun(SUCCESS, state, diag, rows, parts, total, "")

    def place(self, pod: PodInfo, nodes: NodeTable) -> tuple[str | None, str]:
        """The node a scheduling cycle would pick for `pod` (the sampled feasible nodes
        scored, a tie broken at random), in a dry run without PostFilter; or None and the
        message saying why none fits. What-if capacity (`ascheduler explain --replicas`)."""
        state = CycleState(dry_run=True)
        filtered = self._filter(state, pod, nodes, post_filter=False)
        if isinstance(filtered, ScheduleResult):
            return None, filtered.status.message
        if filtered.feasible.size == 1:
            return nodes.names[int(filtered.feasible[0])], ""
        try:
            return nodes.names[self._best(state, pod, nodes, filtered.feasible)], ""
        except ScoringError as exc:
            return None, str(exc)

    def _best(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        feasible: IntArray,
        extra: IntArray | None = None,
    ) -> int:
        """The highest total of weighted plugin scores (plus `extra`, the extenders'), a tie
        broken at random as kube-scheduler's selectHost does."""
        total = self._totals(state, pod, nodes, feasible, extra)
        top = np.flatnonzero(total == total.max())
        pick = int(top[0]) if top.size == 1 else int(top[self._rng.randrange(top.size)])
        return int(feasible[pick])

    def _totals(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        feasible: IntArray,
        extra: IntArray | None = None,
        parts: dict[str, IntArray] | None = None,
    ) -> IntArray:
        """PreScore, Score and NormalizeScore: each feasible row's weighted total (and into
        `parts`, each plugin's normalized score before its weight). A plugin whose PreScore
        skips has no part, as kube-scheduler logs no score for it. Without score plugins or
        extenders every node totals 1, as kube-scheduler's prioritizeNodes has it."""
        if not self.score_plugins and self.extenders is None:
            return np.ones(feasible.size, dtype=np.int64)
        total = np.zeros(feasible.size, dtype=np.int64) if extra is None else extra.copy()
        for pre in self.pre_score_plugins:
            status = pre.pre_score(state, pod, nodes, feasible)
            if status.code is Code.SKIP:
                state.skip_score.add(pre.name)
            elif not status.ok:
                raise ScoringError(f'running PreScore plugin "{pre.name}": {status.message}')
        for plugin in self.score_plugins:
            if plugin.name in state.skip_score:
                continue
            if plugin.name in self._row_local:
                scores = self._row_local_scores(plugin, state, pod, nodes, feasible)
            else:
                scores = plugin.score(state, pod, nodes, feasible)
            if plugin.name in self._normalizes:
                scores = plugin.normalize(state, pod, scores)
            if plugin.name in self._range_checked:
                outside = np.flatnonzero((scores < 0) | (scores > MAX_NODE_SCORE))
                if outside.size:
                    raise ScoringError(
                        f'plugin "{plugin.name}" returns an invalid score '
                        f"{int(scores[int(outside[0])])}, it should in the range of "
                        f"[0, {MAX_NODE_SCORE}] after normalizing"
                    )
            if parts is not None:
                parts[plugin.name] = scores
            total += scores * self.weights.get(plugin.name, 1)
        return total

    @staticmethod
    def _row_local_scores(
        plugin: ScorePlugin, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        row_local: RowLocalScorePlugin = plugin  # type: ignore[assignment]

        def compute(rows: IntArray) -> IntArray:
            if rows.size > _SCALAR_ROWS:
                return row_local.score(state, pod, nodes, rows)
            return np.array([row_local.score_row(pod, nodes, int(r)) for r in rows], dtype=np.int64)

        def compute_row(row: int) -> int:
            return row_local.score_row(pod, nodes, row)

        key = (id(plugin), row_local.score_key(pod))
        return nodes.row_values(key, compute, compute_row).take(feasible)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for plugin in self.reserve_plugins:
            status = plugin.reserve(state, pod, node)
            if not status.ok:
                # As kube-scheduler: every Reserve plugin's Unreserve runs, in reverse order,
                # whether or not its Reserve ran (Unreserve must be idempotent).
                self.unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order. Unreserve has no status: one
        that raises is logged and the others still run, so each undoes its own part."""
        for plugin in reversed(self.reserve_plugins):
            try:
                plugin.unreserve(state, pod, node)
            except Exception:
                log.exception("unreserve_failed", plugin=plugin.name, pod=pod.key, node=node)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SUCCESS, a rejection, or WAIT (the pod is then registered as waiting)."""
        timeouts: dict[str, float] = {}
        for plugin in self.permit_plugins:
            status, timeout = plugin.permit(state, pod, node)
            if status.code is Code.WAIT:
                timeouts[plugin.name] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
            elif not status.ok:
                return status.with_plugin(plugin.name)
        if timeouts:
            self.handle.waiting_pods.add(WaitingPod(pod, node, timeouts))
            return Status(Code.WAIT)
        return SUCCESS

    # -- the binding cycle -------------------------------------------------------------------

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        waiting = self.handle.waiting_pods.get(pod.uid)
        if waiting is None:
            return SUCCESS
        try:
            status = await waiting.wait()
        finally:
            self.handle.waiting_pods.remove(pod.uid)
        if status.code is Code.ERROR:
            # kube-scheduler's wording of a wait that ended in an error (a preempted
            # waiting pod, 1.36).
            return Status.error(f"waiting on permit for pod: {status.message}", status.plugin)
        return status

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> bool:
        """`RunPreBindPreFlights` as far as the binding cycle reads it: whether some PreBind
        plugin has work to do for the pod (then it is registered as in PreBind)."""
        return any(p.pre_bind_pre_flight(state, pod, node).ok for p in self.pre_bind_plugins)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        in_pre_bind = self.handle.pods_in_pre_bind.get(pod.uid)
        for plugin in self.pre_bind_plugins:
            if in_pre_bind is not None:  # a cancellation names the plugin it stopped
                in_pre_bind.plugin = plugin.name
            status = await plugin.pre_bind(state, pod, node)
            if not status.ok:
                if status.rejected:
                    return status.with_plugin(plugin.name)
                # kube-scheduler's wording of a PreBind error.
                failed = f'running PreBind plugin "{plugin.name}": {status.message}'
                return Status.error(failed, plugin.name)
        return SUCCESS

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """An interested binding extender binds the pod; else the Bind plugins in order."""
        if self.extenders is not None:
            bound = await self.extenders.bind(pod, node)
            if bound is not None:
                return bound
        for plugin in self.bind_plugins:
            status = await plugin.bind(state, pod, node)
            if status.code is Code.SKIP:
                continue
            return status if status.ok else status.with_plugin(plugin.name)
        return Status.error("no bind plugin bound the pod")

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational, after the bind: one plugin that raises is logged, the rest run."""
        for plugin in self.post_bind_plugins:
            try:
                plugin.post_bind(state, pod, node)
            except Exception:
                log.exception("post_bind_failed", plugin=plugin.name, pod=pod.key, node=node)
