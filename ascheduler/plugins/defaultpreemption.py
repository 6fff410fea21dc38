"""DefaultPreemption: when a pod fits no node, evict lower-priority pods to make room.

kube-scheduler v1.35's rules (`pkg/scheduler/framework/preemption` and the plugin's
`default_preemption.go`), in the pieces that do not depend on how the cycle evaluates a node:

* the plugin's arguments and their validation;
* how many candidate nodes a dry run looks for (`minCandidateNodesPercentage` of the nodes
  that failed resolvably, at least `minCandidateNodesAbsolute`);
* the importance order of victims (higher priority first, then the one running longer);
* PodDisruptionBudgets: victims split into those whose eviction would take a budget below
  zero and the others, budgets decremented victim by victim in the same pass;
* the choice among candidate nodes: fewest PDB violations, then the lowest highest-victim
  priority, the smallest sum of priorities, the fewest victims, the latest start time of the
  highest-priority victims, then the first found.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ascheduler.framework.errors import PluginArgsError
from ascheduler.framework.objects import DisruptionBudget
from ascheduler.model import PodInfo
from ascheduler.model.pod import PREEMPT_NEVER

NAME: Final = "DefaultPreemption"

#: The priority a pod without one has (kube-scheduler's `PodPriority` of a nil priority).
INT32_MAX: Final = 2**31 - 1

NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"


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


def _timestamp(value: str) -> float | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def start_time(pod: PodInfo, now: float) -> float:
    """kube-scheduler's `GetPodStartTime`: `status.startTime`, or now for a pod that has not
    started (assumed, or bound and not yet running)."""
    at = _timestamp(pod.start_time)
    return now if at is None else at


def importance(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """A sort key putting the more important pods first (kube-scheduler's
    `MoreImportantPod`: higher priority, then the earlier start)."""

    def key(pod: PodInfo) -> tuple[int, float]:
        return (-pod.priority, start_time(pod, now))

    return key


def split_by_budgets(
    victims: Sequence[PodInfo], budgets: Iterable[DisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each in the order given: a victim violates when some
    budget covering it, decremented for it and every covered victim before it, goes below
    zero. A pod the budget already counts as disrupted costs it nothing."""
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
