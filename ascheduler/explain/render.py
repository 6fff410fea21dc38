"""An explanation as a table for people, or as JSON / YAML for scripts (`to_dict`)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from ascheduler.explain.core import Capacity, Explanation

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
        header = ["NODE", "TOTAL", *(f"{p}x{exp.weights[p]}" for p in plugins)]
        rows = [header]
        for s in exp.scores:
            cells = [s.name, str(s.total)]
            for p in plugins:
                if p not in s.plugins:
                    cells.append("-")
                    continue
                raw, weighted = s.plugins[p]
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
    if cap is not None:
        say("")
        fit = len(cap.placed)
        say(f"Copies that fit: {fit} of {cap.requested}")
        for node, count in cap.per_node.items():
            say(f"  {count:>6}  {node}")
        if cap.stopped:
            say(f"  the next one: {cap.stopped}")
    return "\n".join(lines) + "\n"
