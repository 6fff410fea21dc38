"""Node selector terms, tolerations and taints as small immutable values, matched the way the
Kubernetes API defines them (component-helpers `nodeaffinity`, `v1helper.TolerationsTolerateTaint`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
FIELD_OPERATORS: Final = frozenset({"In", "NotIn"})
TAINT_EFFECTS: Final = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


_INT64_RE: Final = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str | None) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: None where it would fail (Python's `int()` also
    takes `1_0` and spaces, and any size)."""
    if text is None or not _INT64_RE.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


class SpecError(ValueError):
    """A field of an object is invalid; the message names the field."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return labels.get(self.key) not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        have = parse_int64(labels.get(self.key))
        want = parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions and fields ANDed; a term with neither matches nothing."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        return all(r.matches({"metadata.name": name}) for r in self.fields)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerated(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def _requirement(raw: Any, path: str, *, fields: bool) -> Requirement:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise SpecError(f"{path}.key: required")
    op = raw.get("operator")
    allowed = FIELD_OPERATORS if fields else OPERATORS
    if op not in allowed:
        raise SpecError(
            f"{path}.operator: invalid operator {op!r}, expected one of "
            f"{', '.join(sorted(allowed))}"
        )
    if fields and key != "metadata.name":
        raise SpecError(f"{path}.key: unsupported field {key!r}, only metadata.name")
    values = raw.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SpecError(f"{path}.values: expected a list of strings")
    if op in ("Exists", "DoesNotExist") and values:
        raise SpecError(f"{path}.values: must be empty for operator {op}")
    if op in ("In", "NotIn") and not values:
        raise SpecError(f"{path}.values: must not be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SpecError(f"{path}.values: operator {op} takes exactly one value")
        if parse_int64(values[0]) is None:
            raise SpecError(f"{path}.values[0]: {values[0]!r} is not an integer")
    return Requirement(key, op, tuple(values))


def parse_term(raw: Any, path: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    exprs = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list):
        raise SpecError(f"{path}: matchExpressions and matchFields must be lists")
    return NodeSelectorTerm(
        tuple(
            _requirement(e, f"{path}.matchExpressions[{i}]", fields=False)
            for i, e in enumerate(exprs)
        ),
        tuple(
            _requirement(f, f"{path}.matchFields[{i}]", fields=True) for i, f in enumerate(fields)
        ),
    )


def parse_taint(raw: Any, path: str) -> Taint:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str):
        raise SpecError(f"{path}.key: required")
    effect = raw.get("effect")
    if effect not in TAINT_EFFECTS:
        raise SpecError(f"{path}.effect: invalid effect {effect!r}")
    return Taint(raw["key"], str(raw.get("value") or ""), effect)


def parse_toleration(raw: Any, path: str) -> Toleration:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    op = raw.get("operator") or "Equal"
    if op not in ("Equal", "Exists"):
        raise SpecError(f"{path}.operator: invalid operator {op!r}, expected Equal or Exists")
    effect = raw.get("effect") or ""
    if effect and effect not in TAINT_EFFECTS:
        raise SpecError(f"{path}.effect: invalid effect {effect!r}")
    key = str(raw.get("key") or "")
    if not key and op != "Exists":
        raise SpecError(f"{path}.operator: must be Exists when key is empty")
    return Toleration(key, op, str(raw.get("value") or ""), effect)
