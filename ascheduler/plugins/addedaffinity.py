"""`NodeAffinityArgs.addedAffinity`, read and checked as kube-scheduler reads it.

kube-scheduler decodes the field strictly as a core/v1 `NodeAffinity` and checks it with
component-helpers' `NewNodeSelector` / `NewPreferredSchedulingTerms` (and apimachinery's
`labels.NewRequirement`): a term with neither matchExpressions nor matchFields is dropped
(so a required selector of only such terms matches no node), a preferred term of weight 0 or
an empty preference is dropped, label keys and values must be valid label names, `In`/`NotIn`
need values, `Exists`/`DoesNotExist` none, `Gt`/`Lt` one integer, and matchFields take `In` or
`NotIn` with exactly one value. Unlike a pod's spec, no range is imposed on preferred weights.
The first problem is reported with its path under `addedAffinity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.framework import PluginArgsError
from ascheduler.model.affinity import (
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
    parse_int64,
)
from ascheduler.model.labelnames import label_key_problem, label_value_problem

REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class AddedAffinity:
    """The terms a profile adds to every pod (None: no required terms)."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredTerm, ...] = ()


def _obj(raw: Any, path: str, allowed: set[str], problems: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected an object")
        return {}
    problems.extend(f"{path}.{k}: unknown field" for k in raw if k not in allowed)
    return raw


def _list(raw: Any, path: str, problems: list[str]) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{path}: expected a list")
        return []
    return raw


def _requirement(raw: Any, path: str, problems: list[str], *, fields: bool) -> Requirement | None:
    body = _obj(raw, path, {"key", "operator", "values"}, problems)
    key, op, values = body.get("key", ""), body.get("operator", ""), body.get("values") or []
    if not isinstance(key, str) or not isinstance(op, str):
        problems.append(f"{path}: key and operator must be strings")
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        problems.append(f"{path}.values: expected a list of strings")
        return None
    before = len(problems)
    if fields:
        if op not in ("In", "NotIn"):
            problems.append(f'{path}.operator: unsupported value {op!r}: supported "In", "NotIn"')
        elif len(values) != 1:
            problems.append(f"{path}.values: must have one element")
        return Requirement(key, op, tuple(values)) if len(problems) == before else None
    if op not in _OPERATORS:
        supported = ", ".join(f'"{o}"' for o in _OPERATORS)
        problems.append(f"{path}.operator: unsupported value {op!r}: supported {supported}")
        return None
    if why := label_key_problem(key):
        problems.append(f"{path}.key: invalid value {key!r}: {why}")
    if op in ("In", "NotIn") and not values:
        problems.append(f"{path}.values: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        problems.append(f"{path}.values: values set must be empty for exists and does not exist")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            problems.append(
                f"{path}.values: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        problems.extend(
            f"{path}.values[{i}]: for 'Gt', 'Lt' operators, the value must be an integer"
            for i, v in enumerate(values)
            if parse_int64(v) is None
        )
    for i, v in enumerate(values):
        if why := label_value_problem(v):
            problems.append(f"{path}.values[{i}][{key}]: invalid value {v!r}: {why}")
    return Requirement(key, op, tuple(values)) if len(problems) == before else None


def _term(raw: Any, path: str, problems: list[str]) -> NodeSelectorTerm | None:
    """A term, or None when it is empty (dropped, as kube-scheduler drops it) or invalid."""
    body = _obj(raw, path, {"matchExpressions", "matchFields"}, problems)
    exprs = _list(body.get("matchExpressions"), f"{path}.matchExpressions", problems)
    fields = _list(body.get("matchFields"), f"{path}.matchFields", problems)
    if not exprs and not fields:
        return None
    before = len(problems)
    parsed_exprs = [
        _requirement(e, f"{path}.matchExpressions[{i}]", problems, fields=False)
        for i, e in enumerate(exprs)
    ]
    parsed_fields = [
        _requirement(f, f"{path}.matchFields[{i}]", problems, fields=True)
        for i, f in enumerate(fields)
    ]
    if len(problems) > before:
        return None
    return NodeSelectorTerm(
        tuple(r for r in parsed_exprs if r is not None),
        tuple(r for r in parsed_fields if r is not None),
    )


def parse_added_affinity(raw: Any) -> AddedAffinity:
    """`raw` (None: nothing added) as an AddedAffinity; PluginArgsError listing every problem
    under `addedAffinity`."""
    if raw is None:
        return AddedAffinity()
    problems: list[str] = []
    body = _obj(raw, "addedAffinity", {REQUIRED, PREFERRED}, problems)
    required: tuple[NodeSelectorTerm, ...] | None = None
    if body.get(REQUIRED) is not None:
        path = f"addedAffinity.{REQUIRED}"
        selector = _obj(body[REQUIRED], path, {"nodeSelectorTerms"}, problems)
        terms = _list(selector.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", problems)
        parsed = [_term(t, f"{path}.nodeSelectorTerms[{i}]", problems) for i, t in enumerate(terms)]
        required = tuple(t for t in parsed if t is not None)
    preferred: list[PreferredTerm] = []
    path = f"addedAffinity.{PREFERRED}"
    for i, item in enumerate(_list(body.get(PREFERRED), path, problems)):
        entry = _obj(item, f"{path}[{i}]", {"weight", "preference"}, problems)
        weight = entry.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool):
            problems.append(f"{path}[{i}].weight: expected an integer, got {weight!r}")
            continue
        if not weight:
            continue  # not even checked, as in kube-scheduler
        term = _term(entry.get("preference"), f"{path}[{i}].preference", problems)
        if term is not None:
            preferred.append(PreferredTerm(weight, term))
    if problems:
        # One message, under the args' path: the first problem (fix it, the next shows).
        raise PluginArgsError(problems[0])
    return AddedAffinity(required, tuple(preferred))
