"""Why a pod is pending, where it would go, and how many copies of it fit.

`explain` runs one profile's real plugins over a node table in a dry run (`Framework.dry_run`:
nothing is written, nothing evicted) and keeps what kube-scheduler's one-line message folds
away:

* the message itself, word for word, as the pod's condition and event carry it;
* the rejected nodes grouped by verdict (the first filter that rejected them and its reasons,
  with counts), each node with the facts its filter gives (`ExplainFilterPlugin`: the numbers
  of a resource that does not fit, the taint not tolerated, the pod in the way);
* the victims preemption would evict, where it applies;
* for feasible nodes, each score plugin's normalized and weighted score, the total, the best
  node and how close the runner-up came;
* with HTTP extenders (`explain_with_extenders`), what each one's filter said of each node it
  was sent (passed, failed or failed-and-unresolvable, with its reason) and each one's
  prioritize score, weighted as kube-scheduler weighs it and counted in the totals.

`capacity` places copies of a pod one after another, as the scheduler would (the sampled,
scored choice and the random tie-break, each copy assumed before the next), on a table the
caller owns: how many fit, where, and why the next one does not.

Everything is columnar: grouping 5,000 rejected nodes is a handful of numpy operations; only
the nodes shown (`limit` per group) are explained one by one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import structlog

from ascheduler.framework import Code, CycleState, Diagnosis, ExplainFilterPlugin
from ascheduler.framework.extender import EXTENDER
from ascheduler.framework.nodes import NodeTable
from ascheduler.framework.runtime import DryRun, Framework, num_feasible_nodes_to_find
from ascheduler.model import PodInfo
from ascheduler.plugins.defaultpreemption import CHOSEN, Candidate

log = structlog.get_logger(__name__)

API_VERSION: Final = "ascheduler.io/v1alpha1"
#: Nodes shown per group of rejected nodes, and feasible nodes shown with their scores.
DEFAULT_LIMIT: Final = 10

_CODE_NAMES: Final = {
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.ERROR: "Error",
}


@dataclass(frozen=True)
class NodeVerdict:
    name: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class RejectedGroup:
    """Nodes with one verdict: the first filter that rejected them, for these reasons."""

    plugin: str
    reasons: tuple[str, ...]
    code: str
    count: int
    #: The first `limit` of them by name, each with its filter's facts.
    nodes: tuple[NodeVerdict, ...]


@dataclass(frozen=True)
class NodeScore:
    name: str
    total: int
    #: Score plugin -> (normalized score, weighted score).
    plugins: Mapping[str, tuple[int, int]]
    #: Extender -> (its prioritize score, weighted as kube-scheduler weighs it: score x
    #: weight x MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY); part of `total`.
    extenders: Mapping[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExtenderOpinion:
    """What one HTTP extender said in the dry run: its filter's verdicts (the nodes it was
    sent, those it kept, those it failed with their reasons) and its prioritize scores."""

    name: str
    ignorable: bool
    filters: bool
    prioritizes: bool
    weight: int
    #: False: `managedResources` the pod asks for none of; the extender is not asked.
    interested: bool = True
    sent: int = 0
    passed: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    unresolvable: Mapping[str, str] = field(default_factory=dict)
    filter_error: str = ""
    #: node -> (score, weighted score).
    scores: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    prioritize_error: str = ""

    def to_dict(self, limit: int) -> dict[str, Any]:
        def first(names: Sequence[str]) -> list[str]:
            return sorted(names) if limit <= 0 else sorted(names)[:limit]

        return {
            "name": self.name,
            "ignorable": self.ignorable,
            "interested": self.interested,
            "filter": (
                {
                    "sent": self.sent,
                    "passed": len(self.passed),
                    "passedNodes": first(self.passed),
                    "failed": {n: self.failed[n] for n in first(list(self.failed))},
                    "failedAndUnresolvable": {
                        n: self.unresolvable[n] for n in first(list(self.unresolvable))
                    },
                    "error": self.filter_error,
                }
                if self.filters
                else None
            ),
            "prioritize": (
                {
                    "weight": self.weight,
                    "scores": {
                        n: {"score": self.scores[n][0], "weighted": self.scores[n][1]}
                        for n in first(list(self.scores))
                    },
                    "error": self.prioritize_error,
                }
                if self.prioritizes
                else None
            ),
        }


@dataclass(frozen=True)
class Victim:
    namespace: str
    name: str
    priority: int


@dataclass(frozen=True)
class Preemption:
    node: str
    victims: tuple[Victim, ...]
    pdb_violations: int


@dataclass
class Explanation:
    namespace: str
    name: str
    uid: str
    profile: str
    #: The node the pod is bound to already ("" while pending); the dry run then shows
    #: where it would go now, as if it were not.
    bound_to: str = ""
    num_nodes: int = 0
    feasible: int = 0
    #: How many feasible nodes the scheduler scores (`percentageOfNodesToScore`); the dry
    #: run scores all of them.
    scored_by_scheduler: int = 0
    #: The pod's PodScheduled reason and message as kube-scheduler words them ("" when some
    #: node fits).
    reason: str = ""
    message: str = ""
    #: Held before the queue (scheduling gates, a PreEnqueue plugin): by whom and why.
    held: str = ""
    #: A PreFilter that turned the pod away before any node was looked at.
    prefilter: tuple[str, str] | None = None
    rejected: list[RejectedGroup] = field(default_factory=list)
    preemption: Preemption | None = None
    #: Score plugin -> weight, in the order they run.
    weights: dict[str, int] = field(default_factory=dict)
    #: The best feasible nodes first (up to `limit`).
    scores: list[NodeScore] = field(default_factory=list)
    #: The nodes sharing the best total (more than one: the scheduler picks one at random).
    best: list[str] = field(default_factory=list)
    runner_up: NodeScore | None = None
    #: What each HTTP extender said (the profile has extenders), in their order.
    extenders: list[ExtenderOpinion] = field(default_factory=list)
    #: Nodes listed per extender verdict in `to_dict` (0: all).
    limit: int = DEFAULT_LIMIT

    @property
    def schedulable(self) -> bool:
        return bool(self.best)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON shape (docs/explain.md)."""
        top = self.scores[0].total if self.scores else 0
        return {
            "apiVersion": API_VERSION,
            "kind": "Explanation",
            "pod": {
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                "profile": self.profile,
                "boundTo": self.bound_to,
            },
            "schedulable": self.schedulable,
            "reason": self.reason,
            "message": self.message,
            "held": self.held,
            "nodes": self.num_nodes,
            "feasible": self.feasible,
            "scoredByScheduler": self.scored_by_scheduler,
            "preFilter": (
                {"plugin": self.prefilter[0], "reason": self.prefilter[1]}
                if self.prefilter
                else None
            ),
            "rejected": [
                {
                    "plugin": g.plugin,
                    "reasons": list(g.reasons),
                    "code": g.code,
                    "count": g.count,
                    "nodes": [{"name": v.name, "details": list(v.details)} for v in g.nodes],
                }
                for g in self.rejected
            ],
            "preemption": (
                {
                    "node": self.preemption.node,
                    "victims": [dataclasses.asdict(v) for v in self.preemption.victims],
                    "pdbViolations": self.preemption.pdb_violations,
                }
                if self.preemption
                else None
            ),
            "scores": {
                "weights": dict(self.weights),
                "nodes": [_score_dict(s) for s in self.scores],
            },
            "best": list(self.best),
            "chosen": self.best[0] if len(self.best) == 1 else "",
            "runnerUp": (
                {**_score_dict(self.runner_up), "behindBy": top - self.runner_up.total}
                if self.runner_up
                else None
            ),
            "extenders": [e.to_dict(self.limit) for e in self.extenders],
        }


def _score_dict(s: NodeScore) -> dict[str, Any]:
    return {
        "name": s.name,
        "total": s.total,
        "plugins": {p: {"score": raw, "weighted": w} for p, (raw, w) in s.plugins.items()},
        "extenders": {e: {"score": raw, "weighted": w} for e, (raw, w) in s.extenders.items()},
    }


async def explain_with_extenders(
    fw: Framework, pod: PodInfo, nodes: NodeTable, *, limit: int = DEFAULT_LIMIT
) -> Explanation:
    """`explain`, the profile's HTTP extenders asked as the scheduling cycle asks them (their
    filter, prioritize and preempt verbs), what each said shown beside the plugins. Without
    extenders, `explain` itself."""
    if fw.extenders is None or pod.errors:
        return explain(fw, pod, nodes, limit=limit)
    dry = await fw.dry_run_with_extenders(pod, nodes)
    return explain(fw, pod, nodes, limit=limit, dry=dry)


def explain(
    fw: Framework,
    pod: PodInfo,
    nodes: NodeTable,
    *,
    limit: int = DEFAULT_LIMIT,
    dry: DryRun | None = None,
) -> Explanation:
    """The dry run of `pod` under `fw` on `nodes` (or `dry`, one already made), grouped and
    explained. `limit` bounds the nodes shown per group and the feasible nodes shown with
    scores (0: all)."""
    out = Explanation(pod.namespace, pod.name, pod.uid, fw.profile, bound_to=pod.node_name)
    out.limit = limit
    out.num_nodes = nodes.n
    out.weights = {p.name: fw.weights.get(p.name, 1) for p in fw.score_plugins}
    if pod.scheduling_gates:
        out.held = f"scheduling gates: {', '.join(pod.scheduling_gates)}"
    else:
        gate = fw.run_pre_enqueue(pod)
        if not gate.ok:
            out.held = f"{gate.plugin}: {gate.message}"
    if pod.errors:
        out.reason = "SchedulerError"
        out.message = f"invalid pod {pod.key}: " + "; ".join(pod.errors)
        return out
    if dry is None:
        dry = fw.dry_run(pod, nodes)
    out.feasible = int(dry.feasible.size)
    out.scored_by_scheduler = min(
        out.feasible, num_feasible_nodes_to_find(nodes.n, fw.percentage_of_nodes_to_score)
    )
    if not dry.status.ok:
        out.reason = "Unschedulable" if dry.status.rejected else "SchedulerError"
        out.message = dry.status.message
    diag = dry.diagnosis
    if diag is not None and diag.prefilter_status is not None:
        out.prefilter = (diag.prefilter_status.plugin, diag.prefilter_status.message)
    elif diag is not None and diag.num_nodes == nodes.n:
        out.rejected = _groups(fw, dry.state, pod, nodes, diag, limit)
    if fw.extenders is not None:
        out.extenders = _opinions(fw, pod, dry)
        out.rejected += _extender_groups(out.extenders, limit)
        out.rejected.sort(key=lambda g: (-g.count, g.plugin, g.reasons))
    if dry.nominated_node:
        chosen: Candidate | None = dry.state.read(CHOSEN)
        if chosen is not None:
            out.preemption = Preemption(
                chosen.node,
                tuple(Victim(v.namespace, v.name, v.priority) for v in chosen.victims),
                chosen.pdb_violations,
            )
    _scores(out, fw, dry, nodes, limit)
    return out


def _groups(
    fw: Framework,
    state: CycleState,
    pod: PodInfo,
    nodes: NodeTable,
    diag: Diagnosis,
    limit: int,
) -> list[RejectedGroup]:
    """Each rejected node under the first filter that rejected it, nodes with the same
    reasons together (as the message counts them)."""
    groups: list[RejectedGroup] = []
    alive = np.ones(nodes.n, dtype=np.bool_)
    if diag.excluded is not None:
        reason, outside = diag.excluded
        plugins = reason.partition("[")[2].rstrip("]")
        rows = np.flatnonzero(outside)
        groups.append(
            _group(plugins, (reason,), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, rows, nodes, limit)
        )
        alive &= ~outside
    for name, result in diag.filtered:
        first = result.rejected & alive
        rows = np.flatnonzero(first)
        if rows.size == 0:
            continue
        alive &= ~first
        rejections = list(result.rejections)[:62]
        combo = np.zeros(rows.size, dtype=np.int64)
        for bit, rejection in enumerate(rejections):
            combo |= rejection.nodes[rows].astype(np.int64) << bit
        plugin = fw.plugins.get(name)
        for value in np.unique(combo):
            picked = [r for bit, r in enumerate(rejections) if int(value) >> bit & 1]
            if not picked:
                continue
            code = max((r.code for r in picked), key=int)
            members = rows[combo == value]
            group = _group(name, tuple(r.reason for r in picked), code, members, nodes, limit)
            if isinstance(plugin, ExplainFilterPlugin):
                group = dataclasses.replace(
                    group,
                    nodes=tuple(
                        NodeVerdict(v.name, _facts(plugin, state, pod, nodes, v.name))
                        for v in group.nodes
                    ),
                )
            groups.append(group)
    groups.sort(key=lambda g: (-g.count, g.plugin, g.reasons))
    return groups


def _group(
    plugin: str,
    reasons: tuple[str, ...],
    code: Code,
    rows: Sequence[int] | np.ndarray[Any, Any],
    nodes: NodeTable,
    limit: int,
) -> RejectedGroup:
    names = sorted(nodes.names[int(r)] for r in rows)
    shown = names if limit <= 0 else names[:limit]
    return RejectedGroup(
        plugin,
        reasons,
        _CODE_NAMES.get(code, code.name),
        len(names),
        tuple(NodeVerdict(n) for n in shown),
    )


def _facts(
    plugin: ExplainFilterPlugin, state: CycleState, pod: PodInfo, nodes: NodeTable, name: str
) -> tuple[str, ...]:
    row = nodes.index.get(name)
    if row is None:
        return ()
    try:
        return tuple(plugin.explain(state, pod, nodes, row))
    except Exception:
        # An explanation is extra: a plugin that cannot give one leaves its reasons alone.
        log.exception("explain_failed", plugin=plugin.name, pod=pod.key, node=name)
        return ()


def _scores(out: Explanation, fw: Framework, dry: DryRun, nodes: NodeTable, limit: int) -> None:
    rows, total = dry.feasible, dry.total
    if rows.size == 0:
        return
    order = np.lexsort((np.array([nodes.names[int(r)] for r in rows]), -total))
    top = int(total.max())
    out.best = sorted(nodes.names[int(rows[i])] for i in np.flatnonzero(total == top))
    shown = order if limit <= 0 else order[: max(limit, len(out.best))]

    raw = {o.name: o.scores for o in out.extenders}

    def score(i: int) -> NodeScore:
        name = nodes.names[int(rows[i])]
        parts = {
            plugin: (int(s[i]), int(s[i]) * fw.weights.get(plugin, 1))
            for plugin, s in dry.scores.items()
        }
        extenders = {
            e: (raw.get(e, {}).get(name, (0, 0))[0], int(w[i]))
            for e, w in dry.extender_scores.items()
        }
        return NodeScore(name, int(total[i]), parts, extenders)

    out.scores = [score(int(i)) for i in shown]
    below = np.flatnonzero(total < top)
    if below.size:
        second = int(total[below].max())
        candidates = [int(i) for i in order if int(total[i]) == second]
        out.runner_up = score(candidates[0])


def _opinions(fw: Framework, pod: PodInfo, dry: DryRun) -> list[ExtenderOpinion]:
    """Each configured extender that said something, or was not asked because the pod asks
    for none of its `managedResources`, in the configuration's order."""
    out: list[ExtenderOpinion] = []
    for extender in fw.extenders.all if fw.extenders is not None else ():
        said = dry.extenders.get(extender.name)
        if said is None:
            if not extender.is_interested(pod):
                out.append(
                    ExtenderOpinion(
                        extender.name,
                        extender.config.ignorable,
                        filters=False,
                        prioritizes=False,
                        weight=extender.config.weight,
                        interested=False,
                    )
                )
            continue
        out.append(
            ExtenderOpinion(
                said.name,
                said.ignorable,
                filters=bool(extender.config.filter_verb) and bool(said.sent),
                prioritizes=bool(extender.config.prioritize_verb),
                weight=said.weight,
                sent=len(said.sent),
                passed=tuple(said.passed),
                failed={n: r for n, r in said.failed.items() if n not in said.unresolvable},
                unresolvable=dict(said.unresolvable),
                filter_error=said.filter_error,
                scores={n: (s, said.weighted(s)) for n, s in said.scores.items()},
                prioritize_error=said.prioritize_error,
            )
        )
    return out


def _extender_groups(opinions: Sequence[ExtenderOpinion], limit: int) -> list[RejectedGroup]:
    """The nodes each extender's filter failed, grouped by its reason (the first extender
    that failed a node is the only one that saw it, as in the cycle)."""
    groups: list[RejectedGroup] = []
    for o in opinions:
        for failures, code in (
            (o.unresolvable, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            (o.failed, Code.UNSCHEDULABLE),
        ):
            by_reason: dict[str, list[str]] = {}
            for node, reason in failures.items():
                by_reason.setdefault(reason, []).append(node)
            for reason, members in by_reason.items():
                names = sorted(members)
                shown = names if limit <= 0 else names[:limit]
                groups.append(
                    RejectedGroup(
                        f"{EXTENDER} {o.name}",
                        (reason,),
                        _CODE_NAMES[code],
                        len(names),
                        tuple(NodeVerdict(n) for n in shown),
                    )
                )
    return groups


# -- what-if capacity ---------------------------------------------------------------------


@dataclass
class Capacity:
    """`capacity`: how many copies of a pod fit, where, and why the next one does not."""

    requested: int
    placed: list[str] = field(default_factory=list)
    #: Why the first copy that did not fit did not ("" when all fit).
    stopped: str = ""

    @property
    def per_node(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.placed:
            counts[node] = counts.get(node, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "fit": len(self.placed),
            "perNode": self.per_node,
            "order": list(self.placed),
            "stoppedBecause": self.stopped,
        }


def copy_of(pod: PodInfo, i: int) -> PodInfo:
    """The i-th copy of `pod`: its own name and uid, pending."""
    return dataclasses.replace(
        pod,
        uid=f"{pod.uid or pod.key}/replica-{i}",
        name=f"{pod.name}-{i}",
        node_name="",
        nominated_node_name="",
        scheduled_condition=None,
    )


def capacity(fw: Framework, cache: Any, pod: PodInfo, replicas: int) -> Capacity:
    """Place up to `replicas` copies of `pod` one after another as the scheduler would
    (`Framework.place`), each assumed in `cache` (a Cache the caller owns: nothing of it
    is undone) and reserved before the next is placed."""
    out = Capacity(replicas)
    for i in range(replicas):
        copy = copy_of(pod, i)
        node, why = fw.place(copy, cache.table)
        if node is None:
            out.stopped = why
            break
        cache.assume(copy, node)
        out.placed.append(node)
    return out
