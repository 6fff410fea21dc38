"""DefaultPreemption: when a pod fits no node, evict lower-priority pods to make room.

kube-scheduler v1.35's rules (`pkg/scheduler/framework/preemption` and the plugin's
`default_preemption.go`), in the pieces that do not depend on how the cycle evaluates a node:

* the plugin's arguments and their validation;
* how many candidate nodes a dry run looks for (`minCandidateNodesPercentage` of the nodes
  that failed resolvably, at least `minCandidateNodesAbsolute`);
* the importance order of victims (higher priority first, then the one running longer);
* PodDisruptionBudgets: victims split into those whose eviction would take a budget below
  zero and the others, budgets decremented victim by victim in the same pass (until 1.36
  every budget covering a victim is decremented for it; from 1.37 the first one going below
  zero ends the victim's accounting, so the budgets after it keep their room);
* the choice among candidate nodes: fewest PDB violations, then the lowest highest-victim
  priority, the smallest sum of priorities, the fewest victims, the latest start time of the
  highest-priority victims, then the first found;
* from 1.37 a successful preemption says where it made room (`found a potential placement
  ...`), and the pod's failure message ends with it;
* from 1.37 (with GenericWorkload) its PodGroupPostFilter, the pod group preemption, answers
  for a group whose attempt failed: `not eligible due to preemptionPolicy=Never.` for a group
  that may not preempt (with PodGroupPreemptionPolicy the PodGroup's `spec.preemptionPolicy`;
  without it, the members', which the pod group cycle's validation has made one); for any
  other it chooses victims across the cluster and evicts them for the whole group
  (`ascheduler.plugins.grouppreemption`).

In a profile with HTTP extenders, the cycle awaits `post_filter_with_extenders` instead: the
candidates go to the extenders' preempt verbs between the dry run and the choice, and what
they return is chosen from (kube-scheduler's callExtenders).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from ascheduler import metrics
from ascheduler.features import GENERIC_WORKLOAD
from ascheduler.framework import (
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    ExtenderError,
    ExtenderPostFilterPlugin,
    Extenders,
    FilterResult,
    Handle,
    IntArray,
    NodeTable,
    PluginArgsError,
    PodGroupPostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    Registration,
    Status,
    Victims,
    group_uid,
)
from ascheduler.model import PodInfo
from ascheduler.model.objects import DisruptionBudget
from ascheduler.model.pod import PREEMPT_NEVER
from ascheduler.model.podgroups import SchedulingGroup
from ascheduler.plugins import grouppreemption
from ascheduler.plugins.grouppreemption import GroupPreemption
from ascheduler.plugins.preemptiontime import start_time

NAME: Final = "DefaultPreemption"

#: The priority a pod without one has (kube-scheduler's `PodPriority` of a nil priority).
INT32_MAX: Final = 2**31 - 1

NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NO_CANDIDATE: Final = "no candidate node for preemption"
WAITING_FOR_PREEMPTION: Final = "waiting for the preemption for this pod to be finished"
#: 1.37's `Evaluator.Preempt` success message (prefixed `preemption: ` by the plugin).
FOUND_PLACEMENT: Final = (
    "found a potential placement for pod on node {node}, preempting {n} victims"
)
#: 1.37's pod group preemption (`podgrouppreemption.go`), whose every message is prefixed.
GROUP_PREFIX: Final = grouppreemption.PREFIX
NO_GROUP_VICTIMS: Final = f"{GROUP_PREFIX}{grouppreemption.NO_VICTIMS}"
GROUP_MAY_NOT_PREEMPT: Final = f"{GROUP_PREFIX}{grouppreemption.NOT_ELIGIBLE_NEVER}"
#: Where PostFilter leaves the candidate it chose (its node and victims), in the cycle state.
CHOSEN: Final = "DefaultPreemption/chosen"


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    """kube-scheduler's `DefaultPreemptionArgs`."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def __post_init__(self) -> None:
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            raise PluginArgsError("minCandidateNodesPercentage: not in valid range [0, 100]")
        if absolute < 0:
            raise PluginArgsError("minCandidateNodesAbsolute: not in valid range [0, inf)")
        if pct == 0 and absolute == 0:
            raise PluginArgsError(
                "minCandidateNodesPercentage: cannot be zero at the same time as "
                "minCandidateNodesAbsolute"
            )

    def candidates_to_find(self, nodes: int) -> int:
        """kube-scheduler's `calculateNumCandidates` (never more than `nodes`)."""
        n = nodes * self.min_candidate_nodes_percentage // 100
        return min(max(n, self.min_candidate_nodes_absolute), nodes)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node preemption can make room on: the victims (most important first) and how many
    of them evicting would violate a PodDisruptionBudget."""

    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int = 0


def importance(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """A sort key putting the more important pods first (kube-scheduler's
    `MoreImportantPod`: higher priority, then the earlier start)."""

    def key(pod: PodInfo) -> tuple[int, float]:
        return (-pod.priority, start_time(pod, now))

    return key


def split_by_budgets(
    victims: Sequence[PodInfo],
    budgets: Iterable[DisruptionBudget],
    *,
    first_violation_ends: bool = False,
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each in the order given: a victim violates when some
    budget covering it, decremented for it and every covered victim before it, goes below
    zero. A pod the budget already counts as disrupted costs it nothing.

    Until 1.36 (`filterPodsWithPDBViolation`) every covering budget is decremented for a
    victim; 1.37's `FilterVictimsWithPDBViolation` stops at the first budget that goes below
    zero (`first_violation_ends`), so budgets later in the list are not charged for a victim
    already found violating. Only a pod two budgets cover tells them apart."""
    covering = [b for b in budgets if not b.selector.nothing]
    allowed = [b.disruptions_allowed for b in covering]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in victims:
        violated = False
        if pod.labels:
            for i, budget in enumerate(covering):
                if not budget.covers(pod) or pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
                    if first_violation_ends:
                        break
        (violating if violated else fine).append(pod)
    return violating, fine


def eligible(pod: PodInfo, nominated_pods_terminating: bool) -> str:
    """Why `pod` may not preempt ("" when it may): `preemptionPolicy: Never`, or victims of
    its last preemption still terminating on its nominated node."""
    if pod.preemption_policy == PREEMPT_NEVER:
        return NOT_ELIGIBLE_NEVER
    if nominated_pods_terminating:
        return NOT_ELIGIBLE_TERMINATING
    return ""


def _earliest_top_start(victims: Sequence[PodInfo], now: float) -> float:
    """The earliest start among the victims of the highest priority
    (`GetEarliestPodStartTime`)."""
    top = max(p.priority for p in victims)
    return min(start_time(p, now) for p in victims if p.priority == top)


def pick(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """kube-scheduler's `pickOneNodeForPreemption`: each criterion keeps the candidates with
    the best score, the next one breaks their tie; the first left wins."""
    if not candidates:
        return None
    criteria: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        # Priorities shifted to be non-negative, so fewer pods of a negative priority are
        # not preferred to more of them.
        lambda c: -sum(p.priority + INT32_MAX + 1 for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_top_start(c.victims, now),
    )
    left = list(candidates)
    for score in criteria:
        if len(left) == 1:
            break
        scores = [score(c) for c in left]
        best = max(scores)
        left = [c for c, s in zip(left, scores, strict=True) if s == best]
    return left[0]


# -- the plugin --------------------------------------------------------------------------------


@dataclass
class _DryRun:
    candidates: list[Candidate]
    #: Node -> why preemption cannot help there (the nodes looked at and found wanting).
    statuses: dict[str, Status]
    errors: list[str]


class DefaultPreemption(ExtenderPostFilterPlugin, PreEnqueuePlugin, PodGroupPostFilterPlugin):
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._rng = random.Random()
        self._groups = GroupPreemption(handle)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        evictor = self.handle.evictor
        if evictor is None:
            return SUCCESS
        if evictor.running(pod.uid):
            return Status.unschedulable(WAITING_FOR_PREEMPTION, resolvable=False)
        if pod.scheduling_group is not None and GENERIC_WORKLOAD in self.handle.features:
            # A member of a group whose preemption is under way (`IsPodGroupRunningPreemption`).
            key = f"{pod.namespace}/{pod.scheduling_group}"
            group = self.handle.gangs.scheduling_groups.get(key)
            if group is not None and evictor.running(group_uid(group)):
                return Status.unschedulable(WAITING_FOR_PREEMPTION, resolvable=False)
        return SUCCESS

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        """The pod group preemption (1.37; `ascheduler.plugins.grouppreemption`)."""
        return self._groups.post_filter(group, pod)

    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        now = time.time()
        found = self.find_candidates(state, pod, nodes, diagnosis, now)
        if isinstance(found, PostFilterResult):
            return found
        return self.nominate(state, pod, found, now)

    async def post_filter_with_extenders(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        diagnosis: Diagnosis,
        extenders: Extenders,
    ) -> PostFilterResult:
        """`post_filter` with the extenders' preempt verbs between the dry run and the
        choice (kube-scheduler's callExtenders): what they return replaces the candidates.
        The pods they name are looked up among the dry run's victims, then on the table as
        it is after the await: kube-scheduler reads its cycle's snapshot, so a victim the
        dry run chose that was deleted meanwhile is still found (its eviction then finds it
        gone)."""
        now = time.time()
        found = self.find_candidates(state, pod, nodes, diagnosis, now)
        if isinstance(found, PostFilterResult):
            return found
        if not extenders.supports_preemption:
            return self.nominate(state, pod, found, now)
        dry_victims = {c.node: {p.uid: p for p in c.victims} for c in found}

        def pods_on(node: str) -> Mapping[str, PodInfo] | None:
            row = nodes.index.get(node)
            if row is None:
                return dry_victims.get(node)
            return {**nodes.pods(row), **dry_victims.get(node, {})}

        sent = {c.node: Victims(c.victims, c.pdb_violations) for c in found}
        try:
            kept = await extenders.process_preemption(pod, sent, pods_on)
        except ExtenderError as exc:
            return PostFilterResult(Status.error(f"preemption: {exc}"))
        candidates = [Candidate(node, v.pods, v.pdb_violations) for node, v in kept.items()]
        return self.nominate(state, pod, candidates, now)

    def find_candidates(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis, now: float
    ) -> list[Candidate] | PostFilterResult:
        """Steps 1 and 2 of kube-scheduler's Preempt: whether the pod may preempt, then the
        dry run; the candidates found, or the result when there is none."""
        if not state.dry_run:
            metrics.PREEMPTION_ATTEMPTS.inc()
        diagnosis = on_current_rows(nodes, diagnosis)
        codes = _codes(nodes, diagnosis)
        terminating = False
        nominated = self.handle.nominator.node_of(pod.uid) or pod.nominated_node_name
        if nominated:
            row = nodes.index.get(nominated)
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if row is None else Code(int(codes[row]))
            if row is not None and code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                terminating = any(
                    p.priority < pod.priority and p.deleting and p.preempted
                    for p in nodes.pods(row).values()
                )
        why = eligible(pod, terminating)
        if why:
            return PostFilterResult(Status.unschedulable(f"preemption: {why}"))
        potential: list[int] = np.flatnonzero(codes == Code.UNSCHEDULABLE).tolist()
        run = self.dry_run(state, pod, nodes, diagnosis, potential, now)
        if not run.candidates:
            if run.errors:
                return PostFilterResult(Status.error(f"preemption: {'; '.join(run.errors)}"))
            return PostFilterResult(
                Status.unschedulable(f"preemption: {_not_helpful(nodes.n, run.statuses)}"),
                clear_nomination=True,
            )
        return run.candidates

    def nominate(
        self, state: CycleState, pod: PodInfo, candidates: Sequence[Candidate], now: float
    ) -> PostFilterResult:
        """Steps 4 and 5: the best candidate, its evictions started (unless a dry run)."""
        best = pick(candidates, now)
        if best is None:
            # Extenders left no candidate: the nomination stays as it is.
            return PostFilterResult(Status.unschedulable(f"preemption: {NO_CANDIDATE}"))
        state.write(CHOSEN, best)
        if self.handle.evictor is not None and not state.dry_run:
            self.handle.evictor.start(pod, best.node, best.victims)
        if not self.handle.features.since(1, 37):
            return PostFilterResult(SUCCESS, nominated_node=best.node)
        # 1.37: the success says where; the cycle's failure message ends with it.
        found = FOUND_PLACEMENT.format(node=best.node, n=len(best.victims))
        return PostFilterResult(Status(Code.SUCCESS, (f"preemption: {found}",)), best.node)

    def dry_run(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        diagnosis: Diagnosis,
        potential: Sequence[int],
        now: float,
    ) -> _DryRun:
        """kube-scheduler's DryRunPreemption, one node after another from a random offset:
        candidates until `candidates_to_find` are found with at least one that violates no
        budget (those come first)."""
        out = _DryRun([], {}, [])
        if not potential:
            return out
        wanted = self.args.candidates_to_find(len(potential))
        offset = self._rng.randrange(len(potential))
        order = [*potential[offset:], *potential[:offset]]
        # A node without a pod of lower priority has no victims (`select_victims` says so
        # first): when such pods are fewer than the nodes to try, the nodes holding them are
        # looked up in the table's priority index and every other node is told so at once,
        # rather than each of thousands looked at in turn.
        lower: set[int] | None = None
        if nodes.count_below(pod.priority) < len(order):
            lower = {
                r for p in nodes.pods_below(pod.priority) if (r := nodes.pod_row(p.uid)) is not None
            }
        none = Status.unschedulable(NO_VICTIMS, resolvable=False)
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        for row in order:
            name = nodes.names[row]
            if lower is not None and row not in lower:
                out.statuses[name] = none
                continue
            found = self.select_victims(state, pod, nodes, diagnosis, row, now)
            if isinstance(found, Status):
                if found.code is Code.ERROR:
                    out.errors.append(found.message)
                out.statuses[name] = found
                continue
            (clean if found.pdb_violations == 0 else violating).append(found)
            if clean and len(clean) + len(violating) >= wanted:
                break
        out.candidates = clean + violating
        return out

    def select_victims(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        diagnosis: Diagnosis,
        row: int,
        now: float,
    ) -> Candidate | Status:
        """kube-scheduler's SelectVictimsOnNode: every lower-priority pod removed, the pod
        must fit; then victims reprieved, most important first (those whose eviction would
        break a budget before the others), as long as the pod still fits."""
        filters = self.handle.filters
        assert filters is not None, "a DefaultPreemption outside a Framework"
        lower = [p for p in nodes.pods(row).values() if p.priority < pod.priority]
        if not lower:
            return Status.unschedulable(NO_VICTIMS, resolvable=False)
        node = nodes.names[row]
        others = [
            p
            for p in self.handle.nominator.on_node(node)
            if p.uid != pod.uid and p.priority >= pod.priority
        ]
        recorded = diagnosis.filtered

        def fits(removed: Sequence[PodInfo]) -> Status:
            # kube-scheduler's RunFilterPluginsWithNominatedPods: with the pods nominated
            # here (of at least this priority) and, if they were any, without them too.
            if others:
                status = filters.filter_what_if(state, pod, nodes, row, recorded, removed, others)
                if not status.ok:
                    return status
            return filters.filter_what_if(state, pod, nodes, row, recorded, removed, ())

        status = fits(lower)
        if not status.ok:
            return status
        key = importance(now)
        lower.sort(key=key)
        budgets = self.handle.objects.budgets_for({p.namespace for p in lower})
        violating, fine = split_by_budgets(
            lower, budgets, first_violation_ends=self.handle.features.since(1, 37)
        )
        removed = {p.uid: p for p in lower}
        victims: list[PodInfo] = []
        violations = 0
        for group, counts in ((violating, True), (fine, False)):
            for p in group:
                del removed[p.uid]
                if fits(list(removed.values())).ok:
                    continue  # reprieved: it stays
                removed[p.uid] = p
                victims.append(p)
                violations += counts
        if violating and fine:
            victims.sort(key=key)
        return Candidate(node, tuple(victims), violations)


def on_current_rows(nodes: NodeTable, diagnosis: Diagnosis) -> Diagnosis:
    """The diagnosis with its rows renumbered to the table's, when it was taken on another
    state of it (a profile with extenders awaits them, and a node removed meanwhile moves the
    last row into its place): the what-if filters read the recorded verdicts by row. A node
    the diagnosis does not mention has no recorded rejection and no code (so `_codes` calls
    it unresolvable, as kube-scheduler's NodeToStatus does)."""
    names = diagnosis.node_names
    if names is None or tuple(names) == tuple(nodes.names):
        return diagnosis
    at = {name: i for i, name in enumerate(names)}
    old = np.array([at.get(name, -1) for name in nodes.names], dtype=np.int64)
    known = old >= 0

    def moved(mask: BoolArray) -> BoolArray:
        out = np.zeros(nodes.n, dtype=np.bool_)
        out[known] = mask[old[known]]
        return out

    filtered = [
        (
            plugin,
            FilterResult(
                moved(result.rejected),
                tuple(dataclasses.replace(r, nodes=moved(r.nodes)) for r in result.rejections),
            ),
        )
        for plugin, result in diagnosis.filtered
    ]
    codes = None
    if diagnosis.codes is not None:
        codes = np.full(nodes.n, int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE), dtype=np.int64)
        codes[known] = diagnosis.codes[old[known]]
    excluded = None
    if diagnosis.excluded is not None:
        excluded = (diagnosis.excluded[0], moved(diagnosis.excluded[1]))
    return dataclasses.replace(
        diagnosis,
        codes=codes,
        filtered=filtered,
        excluded=excluded,
        node_names=None,
    )


def _codes(nodes: NodeTable, diagnosis: Diagnosis) -> IntArray:
    """Each current row's code in the diagnosis (kube-scheduler's NodeToStatus: a node it
    does not mention is UnschedulableAndUnresolvable). A diagnosis taken on another state of
    the table (a profile with extenders) names its rows (`node_names`): read by name."""
    out = np.full(nodes.n, int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE), dtype=np.int64)
    if diagnosis.prefilter_status is not None:
        out[:] = int(diagnosis.prefilter_status.code)
        return out
    codes = diagnosis.codes
    if codes is None:
        return out
    if diagnosis.node_names is None:
        known = min(nodes.n, len(codes))
        out[:known] = codes[:known]
    else:
        at = {name: i for i, name in enumerate(diagnosis.node_names)}
        for row, name in enumerate(nodes.names):
            if (i := at.get(name)) is not None and i < len(codes):
                out[row] = codes[i]
    for name, status in diagnosis.external.items():
        at_row = nodes.index.get(name)
        if at_row is not None and out[at_row] == Code.SUCCESS:
            out[at_row] = int(status.code)
    return out


def _not_helpful(num_nodes: int, statuses: Mapping[str, Status]) -> str:
    """kube-scheduler's FitError for a preemption that found no candidate: the nodes looked
    at with their reasons, every other node `Preemption is not helpful for scheduling`."""
    diag = Diagnosis(num_nodes)
    for status in statuses.values():
        for reason in status.reasons:
            diag.reason_counts[reason] = diag.reason_counts.get(reason, 0) + 1
    absent = num_nodes - len(statuses)
    if absent > 0:
        diag.reason_counts[NOT_HELPFUL] = diag.reason_counts.get(NOT_HELPFUL, 0) + absent
    return diag.message()


def new(args: DefaultPreemptionArgs, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    DefaultPreemptionArgs,
    # kube-scheduler's with async preemption: a pod deletion may end the wait PreEnqueue
    # holds a preemptor in; the plugins that rejected the pod decide when it is retried.
    events=frozenset({ClusterEvent.ASSIGNED_POD_DELETE}),
    default_weight=1,
)
