"""Label selectors, topology spread constraints and pod (anti-)affinity terms, as small
immutable values matched the way the Kubernetes API defines them.

A `LabelSelector` is apimachinery's `metav1.LabelSelectorAsSelector` result: an absent
selector matches nothing (`labels.Nothing()`), an empty one `{}` everything, and every
requirement must hold (`NotIn` holds where the key is missing). Requirements are kept sorted,
so two selectors written differently but meaning the same are equal and hash alike: plugins
key their per-selector counts on them.

Pod affinity terms carry the namespaces they apply to already resolved as kube-scheduler's
`framework.AffinityTerm` does: no `namespaces` and no `namespaceSelector` means the pod's own
namespace. `matchLabelKeys` / `mismatchLabelKeys` of affinity terms are merged into the
selector by the API server when the pod is created (kube-scheduler reads only the selector),
so they are kept here for explanation only. Topology spread's `matchLabelKeys` are merged by
the plugin, as kube-scheduler does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, TypeVar

from ascheduler.model.affinity import Requirement, SpecError

SELECTOR_OPERATORS: Final = ("DoesNotExist", "Exists", "In", "NotIn")
UNSATISFIABLE_ACTIONS: Final = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES: Final = ("Honor", "Ignore")
INT32_MAX: Final = 2**31 - 1


T = TypeVar("T")


_COMPARED: dict[type, tuple[str, ...]] = {}


def _hash_once(self: Any) -> int:
    cached: int = self._hash
    if cached == 0:
        names = _COMPARED.get(type(self))
        if names is None:
            names = _COMPARED[type(self)] = tuple(f.name for f in fields(self) if f.compare)
        cached = hash(tuple([getattr(self, name) for name in names])) or 1
        object.__setattr__(self, "_hash", cached)
    return cached


def cached_hash(cls: type[T]) -> type[T]:
    """Frozen values used as dictionary keys on every scheduling cycle hash once: their
    fields are nested tuples of frozen values, slow to hash again and again. (Applied after
    `dataclass`, which would otherwise put its own `__hash__` in place.)"""
    cls.__hash__ = _hash_once  # type: ignore[method-assign]
    return cls


@cached_hash
@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    #: An absent selector: matches no labels at all.
    nothing: bool = False
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """`labels.Selector.Empty()`: no requirement, and not the absent selector."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def merged(self, extra: Mapping[str, str]) -> LabelSelector:
        """This selector with `key In (value)` for each of `extra` (matchLabelKeys); the
        absent selector stays absent (`Requirements()` of Nothing is not ok)."""
        if self.nothing or not extra:
            return self
        added = tuple(Requirement(k, "In", (v,)) for k, v in extra.items())
        return LabelSelector(_normalised((*added, *self.requirements)))


NOTHING: Final = LabelSelector(nothing=True)
EVERYTHING: Final = LabelSelector()


def _normalised(reqs: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    unique = {(r.key, r.operator, tuple(sorted(set(r.values)))) for r in reqs}
    return tuple(Requirement(k, op, vs) for k, op, vs in sorted(unique))


def parse_selector(raw: Any, path: str) -> LabelSelector:
    """A `metav1.LabelSelector` (None: the absent selector); SpecError naming the field."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    reqs: list[Requirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SpecError(f"{path}.matchLabels: expected an object")
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise SpecError(f"{path}.matchLabels.{key}: expected a string")
        reqs.append(Requirement(str(key), "In", (value,)))
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise SpecError(f"{path}.matchExpressions: expected a list")
    for i, expr in enumerate(exprs):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise SpecError(f"{where}: expected an object")
        key = expr.get("key")
        if not isinstance(key, str) or not key:
            raise SpecError(f"{where}.key: required")
        op = expr.get("operator")
        if op not in SELECTOR_OPERATORS:
            raise SpecError(
                f"{where}.operator: invalid operator {op!r}, expected one of "
                f"{', '.join(SELECTOR_OPERATORS)}"
            )
        values = expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SpecError(f"{where}.values: expected a list of strings")
        if op in ("In", "NotIn") and not values:
            raise SpecError(f"{where}.values: must not be empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise SpecError(f"{where}.values: must be empty for operator {op}")
        reqs.append(Requirement(key, op, tuple(values)))
    return LabelSelector(_normalised(tuple(reqs)))


def selector_from_set(labels: Mapping[str, str]) -> LabelSelector:
    """`labels.Set.AsSelector()`: equality on each key (an empty set selects everything)."""
    return LabelSelector(_normalised(tuple(Requirement(k, "In", (v,)) for k, v in labels.items())))


@cached_hash
@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    match_label_keys: tuple[str, ...] = ()
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    _hash: int = field(default=0, init=False, repr=False, compare=False)


def _int32(raw: Any, path: str, *, minimum: int) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise SpecError(f"{path}: expected an integer, got {raw!r}")
    if not minimum <= raw <= INT32_MAX:
        raise SpecError(f"{path}: must be in {minimum}..{INT32_MAX}, got {raw}")
    return raw


def _str_list(raw: Any, path: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise SpecError(f"{path}: expected a list of strings")
    return tuple(raw)


def parse_spread_constraint(raw: Any, path: str) -> SpreadConstraint:
    """One `topologySpreadConstraints` entry, checked as the API server validates it."""
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    max_skew = _int32(raw.get("maxSkew"), f"{path}.maxSkew", minimum=1)
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise SpecError(f"{path}.topologyKey: required")
    action = raw.get("whenUnsatisfiable")
    if action not in UNSATISFIABLE_ACTIONS:
        raise SpecError(
            f"{path}.whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway, got {action!r}"
        )
    min_domains = 1
    if raw.get("minDomains") is not None:
        min_domains = _int32(raw.get("minDomains"), f"{path}.minDomains", minimum=1)
        if action != "DoNotSchedule":
            raise SpecError(f"{path}.minDomains: only allowed with whenUnsatisfiable=DoNotSchedule")
    policies = []
    for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
        value = raw.get(name)
        if value is None:
            value = default
        if value not in INCLUSION_POLICIES:
            raise SpecError(f"{path}.{name}: must be Honor or Ignore, got {value!r}")
        policies.append(value)
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=action,
        selector=parse_selector(raw.get("labelSelector"), f"{path}.labelSelector"),
        match_label_keys=_str_list(raw.get("matchLabelKeys"), f"{path}.matchLabelKeys"),
        min_domains=min_domains,
        node_affinity_policy=policies[0],
        node_taints_policy=policies[1],
    )


@cached_hash
@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term: pods matching `selector` in the namespaces it names (or
    whose namespace labels match `namespace_selector`), counted by `topology_key` domain."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def matches(self, pod_namespace: str, pod_labels: Mapping[str, str], ns_labels: Any) -> bool:
        """`AffinityTerm.Matches`: `ns_labels` are the labels of the pod's namespace (None
        where kube-scheduler passes none: only an empty namespace selector then matches)."""
        if pod_namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(pod_labels)
        return False


@cached_hash
@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm
    _hash: int = field(default=0, init=False, repr=False, compare=False)


@cached_hash
@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's `podAffinity` and `podAntiAffinity`, required and preferred."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __bool__(self) -> bool:
        return bool(self.required or self.required_anti or self.preferred or self.preferred_anti)


NO_POD_AFFINITY: Final = PodAffinity()


def parse_affinity_term(raw: Any, path: str, namespace: str) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{path}: expected an object")
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise SpecError(f"{path}.topologyKey: required")
    namespaces = _str_list(raw.get("namespaces"), f"{path}.namespaces")
    ns_raw = raw.get("namespaceSelector")
    ns_selector = parse_selector(ns_raw, f"{path}.namespaceSelector")
    if not namespaces and ns_raw is None:
        namespaces = (namespace,)
    _str_list(raw.get("matchLabelKeys"), f"{path}.matchLabelKeys")
    _str_list(raw.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    return AffinityTerm(
        parse_selector(raw.get("labelSelector"), f"{path}.labelSelector"),
        frozenset(namespaces),
        ns_selector,
        key,
    )


def _items(raw: Any, path: str, errors: list[str]) -> list[Any]:
    """The entries of a list field (None: none; anything else: none, and an error)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(f"{path}: expected a list")
        return []
    return raw


def _terms(raw: Any, path: str, namespace: str, errors: list[str]) -> tuple[AffinityTerm, ...]:
    out = []
    for i, t in enumerate(_items(raw, path, errors)):
        try:
            out.append(parse_affinity_term(t, f"{path}[{i}]", namespace))
        except SpecError as exc:
            errors.append(str(exc))
    return tuple(out)


def _weighted(raw: Any, path: str, namespace: str, errors: list[str]) -> tuple[WeightedTerm, ...]:
    out = []
    for i, w in enumerate(_items(raw, path, errors)):
        where = f"{path}[{i}]"
        if not isinstance(w, Mapping):
            errors.append(f"{where}: expected an object")
            continue
        weight = w.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            errors.append(f"{where}.weight: must be an integer in 1..100, got {weight!r}")
            continue
        try:
            term = parse_affinity_term(
                w.get("podAffinityTerm"), f"{where}.podAffinityTerm", namespace
            )
        except SpecError as exc:
            errors.append(str(exc))
            continue
        out.append(WeightedTerm(weight, term))
    return tuple(out)


def parse_pod_affinity(
    affinity: Mapping[str, Any], namespace: str, errors: list[str]
) -> PodAffinity:
    """`spec.affinity.podAffinity` / `podAntiAffinity`; problems appended to `errors`."""
    parts: list[Any] = []
    for name in ("podAffinity", "podAntiAffinity"):
        base = f"spec.affinity.{name}"
        raw = affinity.get(name)
        if raw is not None and not isinstance(raw, Mapping):
            errors.append(f"{base}: expected an object")
            raw = None
        raw = raw or {}
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        parts.append(_terms(raw.get(req), f"{base}.{req}", namespace, errors))
        parts.append(_weighted(raw.get(pref), f"{base}.{pref}", namespace, errors))
    affinity_value = PodAffinity(parts[0], parts[2], parts[1], parts[3])
    return affinity_value if affinity_value else NO_POD_AFFINITY
