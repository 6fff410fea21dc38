"""The scheduling cycle's steps in a profile with HTTP extenders (`framework/extender.py`),
where kube-scheduler consults them: their filter after the plugins' (on the sampled feasible
nodes), their prioritize beside the plugins' scores, their preempt verb inside PostFilter
(`ExtenderPostFilterPlugin`).

These are the only steps of the cycle that await. The node table may change during an
await (the informers go on), so nodes cross each await by name, never by row; the
diagnosis reported when no node is left is taken before the first await, on the table the
filters saw. The same steps make `explain`'s dry run with extenders, which keeps what each
extender said (`DryRun.extenders`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ascheduler.framework.extender import (
    EXTENDER,
    ExtenderError,
    ExtenderPostFilterPlugin,
    Extenders,
    ExtenderVerdicts,
)
from ascheduler.framework.interface import (
    SUCCESS,
    CycleState,
    Diagnosis,
    FilterResult,
    PostFilterPlugin,
    Status,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.runtime.outcomes import (
    DryRun,
    Filtered,
    PostFiltering,
    ScheduleResult,
    ScoringError,
)
from ascheduler.model import PodInfo


class Steps(Protocol):
    """The parts of `Framework` these steps are made of."""

    extenders: Extenders | None
    post_filter_plugins: list[PostFilterPlugin]

    def _filter_or_diagnose(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, *, sample: bool = True
    ) -> Filtered | ScheduleResult | Diagnosis: ...

    def _diagnose(
        self,
        n: int,
        candidates: BoolArray | None,
        narrowed_by: list[str],
        applied: list[tuple[str, FilterResult]],
    ) -> Diagnosis: ...

    def _select(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        feasible: IntArray,
        extra: IntArray | None = None,
    ) -> ScheduleResult: ...

    def _totals(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        feasible: IntArray,
        extra: IntArray | None = None,
        parts: dict[str, IntArray] | None = None,
    ) -> IntArray: ...


async def find_nodes(
    fw: Steps, state: CycleState, pod: PodInfo, nodes: NodeTable
) -> ScheduleResult:
    """`Framework.find_nodes` with the extenders. ExtenderError from an extender that is not
    ignorable."""
    assert fw.extenders is not None
    filtered = fw._filter_or_diagnose(state, pod, nodes)
    if isinstance(filtered, Diagnosis):
        return await unschedulable(fw, state, pod, nodes, filtered)
    if isinstance(filtered, ScheduleResult):
        return filtered
    kept, diag = await extender_filter(fw, pod, nodes, filtered)
    if not kept:
        return await unschedulable(fw, state, pod, nodes, diag)
    if len(kept) == 1:
        return ScheduleResult(kept[0], SUCCESS, feasible=1)
    extra = await fw.extenders.prioritize(pod, [nodes.infos[nodes.index[n]] for n in kept])
    kept = [name for name in kept if name in nodes.index]  # and again, after that await
    rows = np.array([nodes.index[name] for name in kept], dtype=np.int64)
    scores = np.array([extra.get(name, 0) for name in kept], dtype=np.int64)
    return fw._select(state, pod, nodes, rows, scores)


async def extender_filter(
    fw: Steps,
    pod: PodInfo,
    nodes: NodeTable,
    filtered: Filtered,
    record: dict[str, ExtenderVerdicts] | None = None,
) -> tuple[list[str], Diagnosis]:
    """The extenders' filter on the feasible rows: the names they kept (still in the table),
    and the diagnosis with their rejections (to report when they kept none)."""
    assert fw.extenders is not None
    diag = fw._diagnose(nodes.n, filtered.candidates, filtered.narrowed_by, filtered.applied)
    diag.node_names = tuple(nodes.names)
    candidates = [nodes.infos[int(r)] for r in filtered.feasible]
    outcome = await fw.extenders.filter(pod, candidates, record)
    kept = [name for name in outcome.kept if name in nodes.index]
    diag.add_external(outcome.statuses)
    if not kept and outcome.filtered:
        # kube-scheduler: extenders register no events, so a pod they turned away is
        # retried on any (and nothing says it is beyond help).
        diag.rejecting_plugins.add(EXTENDER)
        diag.unresolvable = False
    return kept, diag


async def unschedulable(
    fw: Steps, state: CycleState, pod: PodInfo, nodes: NodeTable, diag: Diagnosis
) -> ScheduleResult:
    """`Framework._unschedulable` with the extenders: a PostFilter that consults them
    (preemption) is awaited."""
    assert fw.extenders is not None
    run = PostFiltering(pod)
    for plugin in fw.post_filter_plugins:
        if isinstance(plugin, ExtenderPostFilterPlugin):
            outcome = await plugin.post_filter_with_extenders(state, pod, nodes, diag, fw.extenders)
        else:
            outcome = plugin.post_filter(state, pod, nodes, diag)
        if run.done(plugin.name, outcome):
            break
    return run.result(diag)


async def dry_run(fw: Steps, pod: PodInfo, nodes: NodeTable) -> DryRun:
    """`Framework.dry_run` with the extenders asked where the cycle asks them: their filter
    on every feasible node, their prioritize (when more than one node is left, as
    kube-scheduler asks it), their preempt verb when no node fits; what each said is in
    `DryRun.extenders`, their weighted scores in the totals. An extender's failure is the
    dry run's error status."""
    assert fw.extenders is not None
    state = CycleState(dry_run=True)
    empty: IntArray = np.zeros(0, dtype=np.int64)
    record: dict[str, ExtenderVerdicts] = {}

    def unfit(result: ScheduleResult) -> DryRun:
        return DryRun(
            result.status,
            state,
            result.diagnosis,
            empty,
            {},
            empty,
            result.nominated_node,
            record,
        )

    try:
        filtered = fw._filter_or_diagnose(state, pod, nodes, sample=False)
        if isinstance(filtered, ScheduleResult):
            return unfit(filtered)
        if isinstance(filtered, Diagnosis):
            return unfit(await unschedulable(fw, state, pod, nodes, filtered))
        kept, diag = await extender_filter(fw, pod, nodes, filtered, record)
        if not kept:
            return unfit(await unschedulable(fw, state, pod, nodes, diag))
        if len(kept) > 1:
            infos = [nodes.infos[nodes.index[n]] for n in kept if n in nodes.index]
            await fw.extenders.prioritize(pod, infos, record)
    except ExtenderError as exc:
        return unfit(ScheduleResult(None, Status.error(f"extender: {exc}", EXTENDER)))
    rows: IntArray = np.array(
        sorted(nodes.index[n] for n in kept if n in nodes.index), dtype=np.int64
    )
    weighted = _weighted(record, [nodes.names[int(r)] for r in rows])
    extra: IntArray = np.zeros(rows.size, dtype=np.int64)
    for scores in weighted.values():
        extra += scores
    parts: dict[str, IntArray] = {}
    try:
        total = fw._totals(state, pod, nodes, rows, extra, parts=parts) if rows.size else empty
    except ScoringError as exc:
        return unfit(ScheduleResult(None, Status.error(str(exc))))
    return DryRun(SUCCESS, state, diag, rows, parts, total, "", record, weighted)


def _weighted(record: dict[str, ExtenderVerdicts], names: Sequence[str]) -> dict[str, IntArray]:
    """Each extender's weighted prioritize score per node of `names`."""
    return {
        extender: np.array([v.weighted(v.scores.get(n, 0)) for n in names], dtype=np.int64)
        for extender, v in record.items()
        if v.scores
    }
