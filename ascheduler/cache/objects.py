"""The store of the objects besides pods and nodes that plugins read (`ascheduler.model.objects`
has the records): namespaces, the Services and pod controllers that give a pod
PodTopologySpread's default constraints, and PodDisruptionBudgets.

Each kind is watched by an informer into compact records; this store keeps them by key and
answers the questions the plugins ask (kube-scheduler's namespace lister and its
`helper.DefaultSelector`), through `ascheduler.framework.listers.ClusterObjectsView`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ascheduler.model.objects import DisruptionBudget, Namespace, Selecting
from ascheduler.model.pod import PodInfo
from ascheduler.model.topology import LabelSelector, selector_from_set

#: An owner reference's (apiVersion, kind) -> the kind whose selector it lends.
_OWNER_KINDS = {
    ("v1", "ReplicationController"): "ReplicationController",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
}


class _Kind:
    """The informer handler of one kind: records by key into the store."""

    def __init__(self, store: ClusterObjects, kind: str) -> None:
        self.store = store
        self.kind = kind

    def on_add(self, obj: Selecting) -> None:
        self.store.selecting[self.kind].setdefault(obj.namespace, {})[obj.name] = obj

    def on_update(self, old: Selecting, new: Selecting) -> None:
        self.on_add(new)

    def on_delete(self, obj: Selecting) -> None:
        group = self.store.selecting[self.kind].get(obj.namespace, {})
        group.pop(obj.name, None)


class _Namespaces:
    def __init__(self, store: ClusterObjects) -> None:
        self.store = store

    def on_add(self, ns: Namespace) -> None:
        self.store.namespaces[ns.name] = ns

    def on_update(self, old: Namespace, new: Namespace) -> None:
        self.on_add(new)

    def on_delete(self, ns: Namespace) -> None:
        self.store.namespaces.pop(ns.name, None)


class _Budgets:
    def __init__(self, store: ClusterObjects) -> None:
        self.store = store

    def on_add(self, pdb: DisruptionBudget) -> None:
        self.store.budgets.setdefault(pdb.namespace, {})[pdb.name] = pdb

    def on_update(self, old: DisruptionBudget, new: DisruptionBudget) -> None:
        if old.key != new.key:
            self.on_delete(old)
        self.on_add(new)

    def on_delete(self, pdb: DisruptionBudget) -> None:
        group = self.store.budgets.get(pdb.namespace)
        if group is not None:
            group.pop(pdb.name, None)
            if not group:
                del self.store.budgets[pdb.namespace]


class ClusterObjects:
    KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")

    def __init__(self) -> None:
        self.namespaces: dict[str, Namespace] = {}
        #: kind -> namespace -> name -> record.
        self.selecting: dict[str, dict[str, dict[str, Selecting]]] = {k: {} for k in self.KINDS}
        #: PodDisruptionBudgets by namespace, then name.
        self.budgets: dict[str, dict[str, DisruptionBudget]] = {}
        self.namespace_handler = _Namespaces(self)
        self.handlers = {k: _Kind(self, k) for k in self.KINDS}
        self.budget_handler = _Budgets(self)

    # -- namespaces --------------------------------------------------------------------------

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """The labels of namespace `name` (none if it is not known: kube-scheduler assumes
        an empty set then)."""
        ns = self.namespaces.get(name)
        return ns.labels if ns is not None else {}

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset(n for n, ns in self.namespaces.items() if selector.matches(ns.labels))

    def budgets_for(self, namespaces: Iterable[str]) -> list[DisruptionBudget]:
        """The PodDisruptionBudgets of these namespaces (a budget covers pods of its own)."""
        return [b for ns in namespaces for b in self.budgets.get(ns, {}).values()]

    # -- PodTopologySpread's default selector -------------------------------------------------

    def default_selector(self, pod: PodInfo) -> LabelSelector:
        """kube-scheduler's `helper.DefaultSelector`: the selectors of the Services that select
        the pod, merged, and its controller's (ReplicationController, ReplicaSet,
        StatefulSet) added; empty when nothing selects it."""
        merged: dict[str, str] = {}
        for svc in self.selecting["Service"].get(pod.namespace, {}).values():
            if svc.labels is None:
                continue
            if all(pod.labels.get(k) == v for k, v in svc.labels.items()):
                merged.update(svc.labels)
        selector = selector_from_set(merged)
        if pod.controller is None:
            return selector
        kind = _OWNER_KINDS.get((pod.controller[0], pod.controller[1]))
        if kind is None:
            return selector
        owner = self.selecting[kind].get(pod.namespace, {}).get(pod.controller[2])
        if owner is None:
            return selector
        if kind == "ReplicationController":
            return selector_from_set({**merged, **(owner.labels or {})})
        if owner.selector.nothing:
            return selector
        return LabelSelector(
            tuple(sorted({*selector.requirements, *owner.selector.requirements}, key=_req_key))
        )


def _req_key(r: Any) -> tuple[str, str, tuple[str, ...]]:
    return (r.key, r.operator, r.values)
