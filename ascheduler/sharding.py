"""Sharding mode: several active instances, each scheduling its share of the pending pods.

The members (`ascheduler.shards.members`) and the rule that picks a pod's owner
(`ascheduler.shards.split`) are the library's; this is what the split does to the scheduler:

* **Only our share is scheduled.** `Scheduler.owns` answers for the event handlers (a pod that
  is not ours is never queued; one updated out of our share leaves the queue) and for the
  loop, which drops a popped pod that stopped being ours before its re-split reached it.
* **A re-split on every change of the live members.** The pods the informer holds are walked
  in chunks (the event loop is never held for more than one chunk): a pending pod that became
  ours is queued, one that became another's leaves the queue (`SchedulingQueue.disown`). A pod
  in its scheduling or binding cycle finishes that cycle; if it fails, it is not put back.
  The walk decides each pod by the split as it is when it reaches it, so a change during a
  walk is caught by the walk that follows.

Why no pod is dropped: every pending pod has exactly one owner among the live members each
instance sees, and an instance queues every pod it owns, at once on a change. A pod whose
owner dies becomes another member's once that member counts the dead one's Lease expired (its
duration after the last renewal seen); a pod whose owner stops gracefully, once its Lease is
deleted, after its last bind. Until then the pod waits, as it would for a restarted leader.
A member that sees no live member, not even itself (its own Lease late), owns nothing until
its Lease is renewed.

Why no pod is bound twice, nor a node overcommitted: two members may briefly both hold a pod
(their views of the members differ for a moment; an old owner's attempt in flight goes on).
The API server binds a pod once: a second Binding of a bound pod fails, and the loser forgets
its assumption. Every member binds under the node locks (sharding requires the `all` policy),
which re-validate the fit of each bind against the node's pods as the API server has them, so
members sharing nodes never overcommit them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from ascheduler import metrics
from ascheduler.features import SCHEDULER_PREEMPTION_FOR_RESIZE
from ascheduler.model import PodInfo
from ascheduler.scheduler import Scheduler
from ascheduler.shards import ShardMembers, Split

log = structlog.get_logger(__name__)

#: Pods decided per step of a re-split before the event loop is let go.
CHUNK = 256


class Sharding:
    """The split applied to one scheduler's queue, and re-applied when the members change."""

    def __init__(
        self,
        members: ShardMembers,
        scheduler: Scheduler,
        pods: Callable[[], Mapping[str, PodInfo]],
    ) -> None:
        """`pods`: the pod informer's store (looked up each time: a relist replaces it)."""
        self.members = members
        self.scheduler = scheduler
        self._pods = pods
        self._changed = asyncio.Event()
        first = next(iter(scheduler.frameworks.values()), None)
        #: Bound pods whose resize the kubelet deferred are scheduled again (1.37 gate), by
        #: their owner like any other pod.
        self.deferred_resizes = first is not None and (
            SCHEDULER_PREEMPTION_FOR_RESIZE in first.handle.features
        )
        scheduler.owns = self.owns
        members.on_change = self._on_change

    def owns(self, pod: PodInfo) -> bool:
        return self.members.split.mine(pod)

    def _on_change(self, split: Split) -> None:
        self._changed.set()

    async def run(self) -> None:
        """Re-split after each change of the members, until cancelled."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            moved_in, moved_out = await self.resplit()
            log.info(
                "shard_resplit",
                members=len(self.members.split.members),
                moved_in=moved_in,
                moved_out=moved_out,
            )

    async def resplit(self) -> tuple[int, int]:
        """Every pending pod of our profiles queued if ours, out of the queue if not; how
        many came in and went out."""
        moved_in = moved_out = 0
        uids = list(self._pods())
        for start in range(0, len(uids), CHUNK):
            if start:
                await asyncio.sleep(0)
            store = self._pods()
            for uid in uids[start : start + CHUNK]:
                pod = store.get(uid)
                if pod is None:
                    continue
                moved = self.place(pod)
                moved_in += moved > 0
                moved_out += moved < 0
        if moved_in:
            metrics.labelled(metrics.SHARD_PODS_MOVED, "in").inc(moved_in)
        if moved_out:
            metrics.labelled(metrics.SHARD_PODS_MOVED, "out").inc(moved_out)
        return moved_in, moved_out

    def place(self, pod: PodInfo) -> int:
        """One pod where the split puts it: 1 queued, -1 out of the queue, 0 unchanged."""
        scheduler = self.scheduler
        queue = scheduler.queue
        deferred = self.deferred_resizes and pod.resize_deferred
        if (
            (pod.assigned and not deferred)
            or pod.deleting
            or pod.terminal
            or pod.scheduler_name not in scheduler.frameworks
        ):
            return 0  # nothing to schedule
        where = queue.where(pod.uid)
        if self.owns(pod):
            # An unbound pod the cache holds is assumed: its bind is under way.
            if where is None and (pod.assigned or not scheduler.cache.has_pod(pod.uid)):
                queue.add(pod)
                return 1
            if where == "in-flight":
                queue.update(pod)  # ours again, if it was disowned meanwhile
            return 0
        if where is None:
            return 0
        queue.disown(pod)
        return -1
