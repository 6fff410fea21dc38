"""The re-validation view: what a hold checks each bind's fit against, under the node's lock.

The re-validation is what makes several instances safe: each instance's cache may be stale
about the others' binds, but under the node's lock the API server's list of pods on the node
is complete, so two instances never overcommit a node. A hold re-validates each bind against
a `NodeView` of the node's pods, plus the binds before it in this hold, taken from the
cheapest source that is still exact:

* *record*: our last hold's view of the node (its list, plus its own binds), while the
  members' epoch and the locks' lineage are the ones it was recorded under: no hold of ours
  has found the locks taken by another holder since, so nobody else bound there;
* *cache*: the scheduler's cache, once it has seen every pod recorded beside the locks as
  bound under them lately, or holds it where our own Binding put it (*vouched*: the API
  server said our Binding put it there, and the cache still counts it there as assumed);
* *list*: the API server's pods on the node, one LIST.

A view not freshly listed that refuses a bind is read again from the API server first (it may
count a pod deleted since). `ascheduler_node_lock_revalidations_total{source}` counts each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import structlog

from ascheduler import metrics
from ascheduler.binding.leases import LockLeases
from ascheduler.cache import Cache
from ascheduler.framework import Code, Status
from ascheduler.locks import Holds
from ascheduler.model import Node, PodInfo, parse_node, parse_pod
from ascheduler.model.resources import RequestsRule

log = structlog.get_logger(__name__)

#: The plugin name the lock protocol's statuses carry.
NODE_LOCK: Final = "NodeLock"
#: How many of our own binds under a lock are remembered until the cache sees them bound.
VOUCHED_KEPT: Final = 8192


@dataclass(slots=True)
class Usage:
    """What the pods counted on a node request of it, summed as they are counted: each pod
    once (by uid), finished ones not at all."""

    counted: dict[str, PodInfo] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=lambda: {"pods": 0})

    def add(self, pod: PodInfo) -> None:
        if pod.terminal or pod.uid in self.counted:
            return
        self.counted[pod.uid] = pod
        totals = self.totals
        totals["pods"] += 1
        for name, value in pod.requests.items():
            totals[name] = totals.get(name, 0) + value

    def shortfall(self, pod: PodInfo, allocatable: Mapping[str, int]) -> list[str]:
        """Resources `pod` does not fit in beside the pods counted (itself, if counted, not
        among them)."""
        own = self.counted.get(pod.uid)
        mine = own.requests if own is not None else {}
        totals = self.totals
        short = []
        if totals["pods"] - (own is not None) + 1 > allocatable.get("pods", 0):
            short.append("pods")
        for name, value in sorted(pod.requests.items()):
            if value > allocatable.get(name, 0) - totals.get(name, 0) + mine.get(name, 0):
                short.append(name)
        return short


@dataclass(slots=True)
class NodeView:
    """The pods a hold re-validates against, each counted once as it comes (`usage`), so a
    re-validation costs the pod's own resources, not the node's pods; `fresh`: listed from
    the API server in this hold."""

    usage: Usage
    fresh: bool
    #: The uids of the pods this hold bound (or tried to: a Binding may land unanswered).
    added: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, pods: Iterable[PodInfo], *, fresh: bool) -> NodeView:
        view = cls(Usage(), fresh)
        for pod in pods:
            view.add(pod)
        return view

    def read_again(self, pods: Iterable[PodInfo]) -> None:
        """Count `pods` instead (the API server's list, plus this hold's fitting binds)."""
        self.usage, self.fresh = Usage(), True
        for pod in pods:
            self.add(pod)

    def add(self, pod: PodInfo) -> None:
        """Count `pod` too, unless it is counted already (the cache's view holds the pods
        of this hold's binds as assumed)."""
        self.usage.add(pod)


class Revalidation(LockLeases):
    """The binder's re-validation: its records of the nodes it held, and the views built from
    them, the cache, or the API server."""

    #: The scheduler's cache: with it, a hold whose lock object's record of bound pods the
    #: cache has all seen re-validates against the cache instead of a LIST.
    cache: Cache | None
    #: node -> what our last hold there counted (its list, plus its binds), the members'
    #: epoch then, and the lineage of its locks (see `Hold.lineage`)
    _records: dict[str, tuple[int, tuple[tuple[str, int], ...], NodeView]]
    #: pod uid -> the node our Binding of it under the locks put it on (the API server said
    #: so), oldest first: the cache counts such a pod there while it is assumed, so it need
    #: not have seen it bound yet to stand in for the API server's list.
    _vouched: dict[str, str]
    #: How the release reads a listed pod's requests (`resources.RequestsRule`).
    requests_rule: RequestsRule

    async def _allocatable(self, node: str, hold: Holds, cached: Node | None) -> dict[str, int]:
        """The node's allocatable: off the Node our lock write returned, else the cache's
        (a Lease lock), else read."""
        if not self.on_lease:
            return dict(parse_node(hold.node_obj).allocatable)
        if cached is not None:
            return dict(cached.allocatable)
        return dict(parse_node(await self.kube.get(f"/api/v1/nodes/{node}")).allocatable)

    async def _view(self, node: str, hold: Holds) -> NodeView:
        """The node's pods for re-validation: our record of them while the locks' lineage is
        the one it was recorded under (no hold of ours has found the locks taken by another
        holder since, so nobody else bound here: the record is what that hold saw, plus its
        own binds; a hold that went on all along, shared by the nodes of a group, keeps its
        lineage whatever it found when it was taken); else the cache, once it has seen the
        pods recorded beside the locks, or holds them where our own Bindings put them; else
        the API server's list."""
        record = self._records.pop(node, None)
        if record is not None and record[0] == self._epoch() and record[1] == hold.lineage:
            metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "record").inc()
            view = record[2]  # ours alone: a record is taken out to be used
            view.fresh = False
            view.added = []
            return view
        trusted = self.members is None or self.members.trusted
        if self.cache is not None and hold.bound_before is not None and trusted:
            cache = self.cache
            counted = cache.pods_on(node)
            # A group's record names pods bound on any of its nodes: the cache must have
            # seen each one bound, wherever, or count it where our own Binding put it.
            if all(cache.bound(uid) or self._counted(uid) for uid in hold.bound_before):
                # Every pod bound under the locks lately is in the cache as bound, or is
                # one of ours it counts where we bound it: it has caught up with the other
                # holders. Our own assumed pods count too (some are bound already); the
                # ones still on their way here count once, as each is re-validated without
                # itself.
                metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "cache").inc()
                return NodeView.of(counted, fresh=False)
        metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "list").inc()
        return NodeView.of(await self._pods_on(node), fresh=True)

    def _epoch(self) -> int:
        return self.members.epoch if self.members is not None else 0

    def _vouch(self, pod: PodInfo, node: str) -> None:
        """Remember that our Binding put `pod` on `node` under the locks."""
        vouched = self._vouched
        vouched.pop(pod.uid, None)
        vouched[pod.uid] = node
        if len(vouched) > VOUCHED_KEPT:
            del vouched[next(iter(vouched))]

    def _counted(self, uid: str) -> bool:
        """Whether the cache counts pod `uid` on the node our Binding put it on: assumed
        there still, its bind confirmed by the API server's answer."""
        assert self.cache is not None
        node = self._vouched.get(uid)
        return node is not None and self.cache.pod_node(uid) == node

    async def _pods_on(self, node: str) -> list[PodInfo]:
        """The API server's pods on `node`: the one read a hold makes."""
        listing = await self.kube.get(
            "/api/v1/pods",
            params={
                "fieldSelector": f"spec.nodeName={node},status.phase!=Succeeded,"
                "status.phase!=Failed"
            },
        )
        return [parse_pod(raw, rule=self.requests_rule) for raw in listing.get("items") or []]

    def _revalidate(
        self, pod: PodInfo, node: str, allocatable: dict[str, int], view: NodeView
    ) -> Status:
        missing = view.usage.shortfall(pod, allocatable)
        if not missing:
            return Status()
        reasons = ", ".join(
            "Too many pods" if m == "pods" else f"Insufficient {m}" for m in missing
        )
        log.info("bind_revalidation_failed", pod=pod.key, node=node, reasons=reasons)
        return Status(Code.UNSCHEDULABLE, (f"node {node} no longer fits: {reasons}",), NODE_LOCK)
