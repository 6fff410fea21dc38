"""The scheduler's cache: nodes with the aggregated requests of the pods on them.

Pod states (as kube-scheduler's cache documents them):

    Initial --assume--> Assumed --add (watch: bound)--> Added --update--> Added
       |                   |                               |
       |                   +--forget (binding failed)--> Initial
       |                                                   +--remove--> gone
       +--add (watch: a pod assigned by anyone)--> Added

* `assume` counts the pod on its node the moment the scheduling cycle picks the node, so the
  next cycle sees the node as used although the bind has not landed.
* The watch confirming the pod (`add` with `spec.nodeName`) replaces the assumed entry: the pod
  is never counted twice. If it landed on another node than assumed, it moves.
* `forget` is the only way an assumed pod leaves without the watch, and only a failed binding
  calls it. Assumed pods never expire silently: a bind that succeeded is confirmed by the watch,
  and one that failed is forgotten by its binding cycle.
* Pods may arrive before their node (the informers are independent); their usage is applied
  when the node appears.
* Every mutation is all-or-nothing: the node table's arithmetic saturates and cannot raise, and
  it runs before a pod is registered, so no input leaves a pod registered but uncounted.

All methods are plain synchronous code on the event loop: see `NodeTable` for why the table
doubles as the scheduling cycle's snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog

from ascheduler.cache.attachments import AttachedVolumes
from ascheduler.cache.gangs import Gangs
from ascheduler.cache.nodetable import MutableNodeTable
from ascheduler.cache.objects import ClusterObjects
from ascheduler.cache.storage import StorageObjects
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import Features, Release
from ascheduler.model import Node, PodInfo

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _PodState:
    pod: PodInfo
    node: str
    assumed: bool


class CacheError(RuntimeError):
    """A state-machine violation (assume twice, forget a pod not assumed...)."""


class Cache:
    def __init__(self, features: Features | None = None) -> None:
        """`features`: the release behaved as (what NodeVolumeLimits counts depends on it)."""
        release = (features or Features()).release
        self.table = MutableNodeTable()
        #: Namespaces, Services and pod controllers (their own informers fill it).
        self.objects = ClusterObjects()
        #: PersistentVolumes, claims, storage classes and CSI objects (their informers).
        self.storage = StorageObjects()
        #: DeviceClasses, ResourceSlices, ResourceClaims and templates (their informers).
        self.resources = ResourceObjects(features)
        #: CSI volumes attached per node and driver (NodeVolumeLimits).
        self.attachments = AttachedVolumes(
            self.storage, self.table, portworx=release >= Release(1, 36)
        )
        #: Pod groups (PodGroups, Workloads) and their members (the pod informer's events).
        self.gangs = Gangs()
        self._pods: dict[str, _PodState] = {}
        self._by_node: dict[str, set[str]] = {}

    # -- nodes -------------------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        if node.errors:
            log.warning("node_invalid_fields", node=node.name, errors=list(node.errors))
        if node.name in self.table.index:
            self.update_node(node)
            return
        row = self.table.add(node)
        for uid in self._by_node.get(node.name, ()):
            self.table.add_usage(row, self._pods[uid].pod, 1)
        self.attachments.node_added(node.name)

    def update_node(self, node: Node) -> None:
        if node.name not in self.table.index:
            self.add_node(node)
            return
        if node.errors and node.errors != self.table.infos[self.table.index[node.name]].errors:
            log.warning("node_invalid_fields", node=node.name, errors=list(node.errors))
        self.table.update(node)

    def remove_node(self, name: str) -> None:
        if name in self.table.index:
            self.table.remove(name)

    def node(self, name: str) -> Node | None:
        row = self.table.index.get(name)
        return None if row is None else self.table.infos[row]

    # -- pods --------------------------------------------------------------------------------

    def _count(self, pod: PodInfo, node: str, sign: int) -> None:
        row = self.table.index.get(node)
        if row is not None:
            self.table.add_usage(row, pod, sign)

    def _place(self, pod: PodInfo, node: str, *, assumed: bool) -> None:
        self._count(pod, node, 1)
        self.attachments.add(pod, node)
        self._pods[pod.uid] = _PodState(pod, node, assumed)
        self._by_node.setdefault(node, set()).add(pod.uid)

    def _unplace(self, uid: str) -> _PodState:
        state = self._pods[uid]
        self._count(state.pod, state.node, -1)
        self.attachments.remove(uid)
        del self._pods[uid]
        members = self._by_node.get(state.node)
        if members is not None:
            members.discard(uid)
            if not members:
                del self._by_node[state.node]
        return state

    def assume(self, pod: PodInfo, node: str) -> None:
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is already in the cache")
        self._place(pod, node, assumed=True)

    def forget(self, pod: PodInfo) -> None:
        state = self._pods.get(pod.uid)
        if state is None or not state.assumed:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is not assumed; cannot forget it")
        self._unplace(pod.uid)

    def add_pod(self, pod: PodInfo) -> None:
        """An assigned pod seen by the watch (confirms an assumed one)."""
        state = self._pods.get(pod.uid)
        if state is not None:
            row = self.table.index.get(state.node)
            if (
                state.node == pod.node_name
                and row is not None
                and self.table.replace_pod(row, state.pod, pod)
            ):
                # Confirmed, or a status update: counted as it was.
                state.pod, state.assumed = pod, False
                return
            self._unplace(pod.uid)
        self._place(pod, pod.node_name, assumed=False)

    def update_pod(self, pod: PodInfo) -> None:
        self.add_pod(pod)

    def remove_pod(self, pod: PodInfo) -> None:
        if pod.uid in self._pods:
            self._unplace(pod.uid)

    def storage_changed(self, kind: str, old: Any, new: Any) -> None:
        """A claim, volume, class or VolumeAttachment changed: the pods and attachments
        whose CSI volumes it may resolve differently are counted again."""
        if kind == "VolumeAttachment":
            self.attachments.attachment_changed(old, new)
            return
        if kind == "PersistentVolume":
            self.attachments.volume_changed((new or old).name)
        claims: set[tuple[str, str]] = set()
        for obj in (old, new):
            if obj is None:
                continue
            if kind == "PersistentVolumeClaim":
                claims.add((obj.namespace, obj.name))
            elif kind == "PersistentVolume" and obj.claim_ref is not None:
                claims.add((obj.claim_ref.namespace, obj.claim_ref.name))
            elif kind == "StorageClass":
                claims.update(self.attachments.claims_of_class(obj.name))
        if claims:
            self.attachments.claims_changed(claims)

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def has_pod(self, uid: str) -> bool:
        return uid in self._pods

    def bound(self, uid: str) -> bool:
        """Whether the cache counts pod `uid` as bound: seen on its node, not only assumed."""
        state = self._pods.get(uid)
        return state is not None and not state.assumed and bool(state.node)

    def pod(self, uid: str) -> PodInfo | None:
        state = self._pods.get(uid)
        return None if state is None else state.pod

    def pod_node(self, uid: str) -> str | None:
        state = self._pods.get(uid)
        return None if state is None else state.node

    def assumed_count(self) -> int:
        return sum(1 for s in self._pods.values() if s.assumed)

    def pod_count(self) -> int:
        return len(self._pods)

    def placements(self) -> Iterator[tuple[PodInfo, str, bool]]:
        """Every pod the cache counts: (pod, node, assumed)."""
        for state in self._pods.values():
            yield state.pod, state.node, state.assumed

    def pods_on(self, node: str) -> list[PodInfo]:
        return [self._pods[uid].pod for uid in self._by_node.get(node, ())]
