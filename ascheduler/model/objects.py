"""Objects besides pods and nodes that plugins read, as compact records: namespaces (their
labels, for pod affinity's `namespaceSelector`), the Services, ReplicaSets, StatefulSets and
ReplicationControllers that give a pod PodTopologySpread's default constraints, and the
PodDisruptionBudgets preemption weighs its victims against. The cache keeps them
(`ascheduler.cache.objects`); a parser raises `SpecError` on an object it cannot take, which
the informer then skips (and logs), so a broken Service never stops scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ascheduler.model.affinity import SpecError
from ascheduler.model.pod import PodInfo
from ascheduler.model.topology import NOTHING, LabelSelector, parse_selector


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    resource_version: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Selecting:
    """A Service, ReplicaSet, StatefulSet or ReplicationController: what it selects.

    `labels` is a plain label set (a Service's or a ReplicationController's selector, None if
    it has none); `selector` a full label selector (ReplicaSet, StatefulSet)."""

    kind: str
    namespace: str
    name: str
    resource_version: str
    labels: Mapping[str, str] | None = None
    selector: LabelSelector = NOTHING

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as preemption reads it: what it selects, how many more
    disruptions its status allows, and the pods already counted as disrupted."""

    namespace: str
    name: str
    resource_version: str
    #: NOTHING for an absent, empty or invalid selector: kube-scheduler's preemption lets
    #: such a budget match no pod.
    selector: LabelSelector
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: PodInfo) -> bool:
        return (
            pod.namespace == self.namespace
            and bool(pod.labels)
            and self.selector.matches(pod.labels)
        )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _string_map(raw: Any, path: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
        raise SpecError(f"{path}: expected a map of strings")
    return {str(k): v for k, v in raw.items()}


def parse_namespace(obj: Mapping[str, Any]) -> Namespace:
    meta = _meta(obj)
    labels = meta.get("labels")
    return Namespace(
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        _string_map(labels, "metadata.labels") if labels is not None else {},
    )


def parse_selecting(kind: str, obj: Mapping[str, Any]) -> Selecting:
    meta = _meta(obj)
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    raw = spec.get("selector")
    labels: dict[str, str] | None = None
    selector = NOTHING
    if kind in ("Service", "ReplicationController"):
        labels = _string_map(raw, "spec.selector") if raw is not None else None
    else:
        selector = parse_selector(raw, "spec.selector")
    return Selecting(
        kind,
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        labels,
        selector,
    )


def parse_budget(obj: Mapping[str, Any]) -> DisruptionBudget:
    """A `policy/v1` PodDisruptionBudget. A selector that does not parse matches nothing
    (kube-scheduler skips it the same way); a status that is not a number allows nothing."""
    meta = _meta(obj)
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    raw = spec.get("selector")
    selector = NOTHING
    if isinstance(raw, Mapping) and (raw.get("matchLabels") or raw.get("matchExpressions")):
        try:
            selector = parse_selector(raw, "spec.selector")
        except SpecError:
            selector = NOTHING
    allowed = status.get("disruptionsAllowed")
    if not isinstance(allowed, int) or isinstance(allowed, bool):
        allowed = 0
    disrupted = status.get("disruptedPods")
    return DisruptionBudget(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        selector,
        max(min(allowed, 2**31 - 1), -(2**31)),
        frozenset(str(k) for k in disrupted) if isinstance(disrupted, Mapping) else frozenset(),
    )
