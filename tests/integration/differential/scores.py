"""Scores held to kube-scheduler's own numbers: the weighted score of each plugin on each node
and each node's total, as kube-scheduler logs them, against ascheduler's dry run of the same
pod on the same cluster.

kube-scheduler's prioritizeNodes (pkg/scheduler/schedule_one.go) logs at `-v=10`, per
scored node, every score plugin's weighted score (`"Plugin scored node for pod"`, fields
pod, plugin, node, score) and then the node's total (`"Calculated node's final score for
pod"`); a plugin whose PreScore skipped has no line. `--vmodule=schedule_one=10` turns level
10 on for that file alone, so the log holds those lines and the file's lower ones (among
them `"Attempting to schedule pod"`, which marks where each attempt starts), not every
informer event of a global `-v=10`.

Only a pod's first attempt is compared: the dry run is taken just before the pod is created,
so it sees the cluster that attempt sees (a retry, after preemption or a cluster change,
meets another one). kube-scheduler scores only when more than one node is feasible; where
it scores a sample (`percentageOfNodesToScore` below the feasible count) the sample's start
is its own, and the pod is not compared (`Expected.sampled`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ascheduler.framework import NodeTable
from ascheduler.framework.runtime import DryRun, Framework, num_feasible_nodes_to_find

#: kube-scheduler's flags for the lines compared here.
SCORE_LOG_ARGS: Final = ("--vmodule=schedule_one=10",)
_ATTEMPT: Final = "Attempting to schedule pod"
_PLUGIN: Final = "Plugin scored node for pod"
_TOTAL: Final = "Calculated node's final score for pod"
_LINE: Final = re.compile(
    r'\] "(?P<msg>Attempting to schedule pod|Plugin scored node for pod|'
    r"Calculated node's final score for pod)\" pod=\"(?P<pod>[^\"]+)\""
    r'(?: plugin="(?P<plugin>[^"]+)")?(?: node="(?P<node>[^"]+)")?(?: score=(?P<score>-?\d+))?'
)
#: Mismatches reported per pod before the rest are counted.
SHOWN: Final = 8


@dataclass
class Scores:
    """One scheduling attempt's scores: node -> plugin -> weighted score, node -> total
    (both empty when the attempt scored nothing)."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Expected:
    """What kube-scheduler should log for a pod's first attempt, from ascheduler's dry run."""

    scores: Scores
    #: kube-scheduler scores a sample of the feasible nodes: nothing to compare.
    sampled: bool = False


def expected(
    framework: Framework, dry: DryRun, nodes: NodeTable, name: Callable[[str], str]
) -> Expected:
    """The lines kube-scheduler logs for the attempt `dry` stands for, nodes named by `name`:
    none when fewer than two nodes are feasible (kube-scheduler picks the one without
    scoring), else each feasible node's weighted plugin scores and total."""
    rows = dry.feasible
    if rows.size < 2:
        return Expected(Scores())
    k = num_feasible_nodes_to_find(nodes.n, framework.percentage_of_nodes_to_score)
    if rows.size > k:
        return Expected(Scores(), sampled=True)
    out = Scores()
    for i, row in enumerate(rows.tolist()):
        node = name(nodes.names[row])
        out.plugins[node] = {
            plugin: int(scores[i]) * framework.weights.get(plugin, 1)
            for plugin, scores in dry.scores.items()
        }
        out.totals[node] = int(dry.total[i])
    return Expected(out)


def log_size(path: str) -> int:
    """Where the log ends now (the next run's lines start there)."""
    try:
        return Path(path).stat().st_size
    except FileNotFoundError:
        return 0


def first_attempts(path: str, offset: int, name: Callable[[str], str]) -> dict[str, Scores]:
    """pod (namespace/name) -> the scores of its first attempt logged after `offset`, nodes
    named by `name`; a pod with no attempt there is absent."""
    with open(path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    attempts: dict[str, int] = {}
    out: dict[str, Scores] = {}
    for m in _LINE.finditer(text):
        pod, msg = m["pod"], m["msg"]
        if msg == _ATTEMPT:
            attempts[pod] = attempts.get(pod, 0) + 1
            out.setdefault(pod, Scores())
            continue
        if attempts.get(pod) != 1 or m["node"] is None or m["score"] is None:
            continue
        node, score = name(m["node"]), int(m["score"])
        if msg == _PLUGIN and m["plugin"] is not None:
            out[pod].plugins.setdefault(node, {})[m["plugin"]] = score
        elif msg == _TOTAL:
            out[pod].totals[node] = score
    return out


def mismatches(pod: str, want: Scores, got: Scores | None) -> list[str]:
    """Where kube-scheduler's logged scores (`got`) differ from ascheduler's (`want`), per
    plugin and node with both numbers ("-": no score there); capped at `SHOWN` lines."""
    if got is None:
        return [f"{pod}: no {_ATTEMPT!r} line in kube-scheduler's log (is it at -v=10?)"]
    found: list[str] = []
    for node in sorted(want.totals.keys() | got.totals.keys() | got.plugins.keys()):
        mine: Mapping[str, int] = want.plugins.get(node, {})
        theirs: Mapping[str, int] = got.plugins.get(node, {})
        for plugin in sorted(mine.keys() | theirs.keys()):
            a, k = mine.get(plugin), theirs.get(plugin)
            if a != k:
                found.append(
                    f"{pod}: {plugin} on {node}: kube-scheduler {_show(k)}, ascheduler {_show(a)}"
                )
        a, k = want.totals.get(node), got.totals.get(node)
        if a != k:
            found.append(
                f"{pod}: total on {node}: kube-scheduler {_show(k)}, ascheduler {_show(a)}"
            )
    if len(found) > SHOWN:
        found = [*found[:SHOWN], f"{pod}: ... and {len(found) - SHOWN} more score mismatches"]
    return found


def _show(score: int | None) -> str:
    return "-" if score is None else str(score)
