"""What the scheduling cycle's steps hand one another: the rows the filters left, the
result of finding nodes, a dry run's findings, and PostFilter's outcomes gathered."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from ascheduler.framework.extender import ExtenderVerdicts
from ascheduler.framework.interface import (
    Code,
    CycleState,
    Diagnosis,
    FilterResult,
    PostFilterResult,
    Status,
)
from ascheduler.framework.nodes import BoolArray, IntArray
from ascheduler.model import PodInfo

log = structlog.get_logger(__name__)


class ScoringError(Exception):
    """A PreScore plugin's error, or a score outside 0..MAX_NODE_SCORE after normalizing: the
    attempt fails with this message, as kube-scheduler's prioritizeNodes fails it."""


@dataclass
class Filtered:
    """What the filters left: the sampled feasible rows, and what to diagnose with."""

    feasible: IntArray
    candidates: BoolArray | None
    narrowed_by: list[str]
    applied: list[tuple[str, FilterResult]]


@dataclass
class ScheduleResult:
    node: str | None
    status: Status
    diagnosis: Diagnosis | None = None
    feasible: int = 0
    #: A node a PostFilter plugin nominated the pod to (it made room there).
    nominated_node: str = ""
    #: A PostFilter plugin found the pod's earlier nomination pointless: clear it.
    clear_nomination: bool = False


class PostFiltering:
    """PostFilter plugins' outcomes gathered as kube-scheduler's RunPostFilterPlugins does:
    the first success (a nomination) or error ends the run; rejections' messages join the
    failure message, an unresolvable one ends the run too."""

    def __init__(self, pod: PodInfo) -> None:
        self.pod = pod
        self.nominated = ""
        self.clear = False
        self.reasons: list[str] = []

    def done(self, plugin: str, outcome: PostFilterResult) -> bool:
        status = outcome.status
        self.clear = self.clear or outcome.clear_nomination
        if status.ok:
            self.nominated = outcome.nominated_node
            self.reasons = list(status.reasons)
            return True
        if status.code is Code.ERROR:
            # kube-scheduler ends PostFilter on an error, and the pod is unschedulable all
            # the same: the error's text is the message's PostFilter part.
            log.error("post_filter_failed", pod=self.pod.key, plugin=plugin, error=status.message)
            self.reasons = list(status.reasons)
            return True
        self.reasons.extend(status.reasons)
        return status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE

    def result(self, diag: Diagnosis) -> ScheduleResult:
        diag.postfilter_message = ", ".join(self.reasons)
        status = Status.unschedulable(diag.message(), resolvable=not diag.unresolvable)
        if diag.prefilter_status is not None:
            prefilter = diag.prefilter_status
            status = Status(prefilter.code, (diag.message(),), prefilter.plugin)
        return ScheduleResult(
            None,
            status,
            diag,
            nominated_node=self.nominated,
            clear_nomination=self.clear and not self.nominated,
        )


@dataclass
class DryRun:
    """`Framework.dry_run`: what an attempt would find, each plugin's part kept."""

    #: SUCCESS when some node fits; else the pod's failure, as its condition would say.
    status: Status
    #: The attempt's state (after PreFilter; ExplainFilterPlugin reads it).
    state: CycleState
    #: Which filter rejected which node (also when some node fits); None when the attempt
    #: failed before any node was looked at by a filter (a PreFilter error, no nodes).
    diagnosis: Diagnosis | None
    #: Every feasible row, ascending.
    feasible: IntArray
    #: Score plugin -> its normalized score per feasible row (before its weight).
    scores: dict[str, IntArray]
    #: The weighted total per feasible row.
    total: IntArray
    #: Where preemption would make room (its victims are in the state, under
    #: DefaultPreemption's CHOSEN key).
    nominated_node: str
    #: Extender name -> what its filter and prioritize said (`dry_run_with_extenders`).
    extenders: dict[str, ExtenderVerdicts] = field(default_factory=dict)
    #: Extender name -> its weighted score per feasible row (`total` includes them).
    extender_scores: dict[str, IntArray] = field(default_factory=dict)
