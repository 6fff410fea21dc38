"""An explanation as a table for people, or as JSON / YAML for scripts (`to_dict`)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from ascheduler.explain.core import Capacity, Explanation
from ascheduler.framework.extender import MAX_EXTENDER_PRIORITY
from ascheduler.framework.interface import MAX_NODE_SCORE

OUTPUTS = ("table", "json", "yaml")


def render(data: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2) + "\n"
    if output == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    raise ValueError(f"unknown output {output!r}")


def table(exp: Explanation, cap: Capacity | None = None) -> str:
    lines: list[str] = []
    say = lines.append
    state = f"bound to {exp.bound_to}" if exp.bound_to else "pending"
    say(f"Pod {exp.namespace}/{exp.name} (profile {exp.profile}): {state}")
    if exp.held:
        say(f"  held before the queue: {exp.held}")
    if exp.message:
        say(f"  {exp.reason}: {exp.message}")
    elif exp.best:
        say(f"  fits: {exp.feasible} of {exp.num_nodes} node(s) feasible")
    if exp.bound_to:
        say("  (where it would go now, were it pending)")
    if exp.prefilter is not None:
        plugin, why = exp.prefilter
        say("")
        say(f"Turned away by {plugin} before any node was looked at: {why}")
    if exp.rejected:
        rejected = sum(g.count for g in exp.rejected)
        say("")
        say(f"Rejected nodes ({rejected} of {exp.num_nodes}):")
        for g in exp.rejected:
            say(f"  {g.count:>6}  {g.plugin}: {', '.join(g.reasons)}")
            width = max((len(v.name) for v in g.nodes), default=0)
            for v in g.nodes:
                facts = "; ".join(v.details)
                say(f"          {v.name:<{width}}  {facts}".rstrip())
            if g.count > len(g.nodes):
                say(f"          ... and {g.count - len(g.nodes)} more")
    if exp.preemption is not None:
        pre = exp.preemption
        victims = ", ".join(f"{v.namespace}/{v.name} (priority {v.priority})" for v in pre.victims)
        say("")
        say(f"Preemption would make room on {pre.node} by evicting: {victims}")
        if pre.pdb_violations:
            say(f"  ({pre.pdb_violations} of them against a PodDisruptionBudget)")
    if exp.scores:
        say("")
        sampled = (
            f"; the scheduler scores {exp.scored_by_scheduler} of them"
            if exp.scored_by_scheduler < exp.feasible
            else ""
        )
        say(f"Feasible nodes ({exp.feasible}{sampled}), best first; score (weighted):")
        plugins = list(exp.weights)
        scoring = [e for e in exp.extenders if e.prioritizes]
        header = [
            "NODE",
            "TOTAL",
            *(f"{p}x{exp.weights[p]}" for p in plugins),
            *(f"{_short(exp, e.name)}x{e.weight}" for e in scoring),
        ]
        rows = [header]
        for s in exp.scores:
            cells = [s.name, str(s.total)]
            for parts, names in ((s.plugins, plugins), (s.extenders, [e.name for e in scoring])):
                for p in names:
                    if p not in parts:
                        cells.append("-")
                        continue
                    raw, weighted = parts[p]
                    cells.append(str(raw) if raw == weighted else f"{raw} ({weighted})")
            rows.append(cells)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        for r in rows:
            say("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if len(exp.scores) < exp.feasible:
            say(f"  ... and {exp.feasible - len(exp.scores)} more")
        say("")
        if len(exp.best) == 1:
            say(f"Chosen: {exp.best[0]}")
        else:
            say(f"Best: {', '.join(exp.best)} (a tie: the scheduler picks one at random)")
        if exp.runner_up is not None:
            behind = exp.scores[0].total - exp.runner_up.total
            say(f"Runner-up: {exp.runner_up.name}, {behind} behind")
    if exp.extenders:
        say("")
        say("Extenders:")
        for e in exp.extenders:
            say(f"  {_short(exp, e.name)} {e.name}{' (ignorable)' if e.ignorable else ''}")
            if not e.interested:
                say("    not asked: the pod asks for none of its managedResources")
            if e.filter_error:
                skipped = "skipped" if e.ignorable else "the attempt fails"
                say(f"    filter failed ({skipped}): {e.filter_error}")
            elif e.filters:
                failed = len(e.failed) + len(e.unresolvable)
                say(f"    filter: {e.sent} node(s) sent, {len(e.passed)} passed, {failed} failed")
            if e.prioritize_error:
                say(f"    prioritize failed (ignored): {e.prioritize_error}")
            elif e.prioritizes and e.scores:
                say(
                    f"    prioritize: weight {e.weight}, score x {e.weight} x "
                    f"{MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY} added to the total"
                )
    if cap is not None:
        say("")
        fit = len(cap.placed)
        say(f"Copies that fit: {fit} of {cap.requested}")
        for node, count in cap.per_node.items():
            say(f"  {count:>6}  {node}")
        if cap.stopped:
            say(f"  the next one: {cap.stopped}")
    return "\n".join(lines) + "\n"


def _short(exp: Explanation, name: str) -> str:
    """An extender's column name: `ext1`, `ext2`... in the configuration's order."""
    for i, e in enumerate(exp.extenders, 1):
        if e.name == name:
            return f"ext{i}"
    return name
