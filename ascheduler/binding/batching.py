"""Batching: binds to one node coalesce under one hold of its locks.

    async with node_locks.hold_all(keys, first_pod) as hold:  # asyncio lock, then annotation
        the node's pods, for re-validation (see `revalidation`)
        the binds queued for this node, in batches (a hold serves MAX_BINDS_PER_HOLD at most,
        one under HAMi's key, and only while its time budget lasts):
            from the second batch on: check the lock is still ours, stop if not
            re-validate each fit against the view plus the binds before it in this hold
            then, for the ones that fit, concurrently (each within the hold's cutoff):
                Bind plugins (POST pods/binding, carrying the bind phase, see `phases`)
    (released on every path: success, error, cancellation)

The first binding cycle to reach a node *leads*: it takes the lock and serves, in order, every
bind that queues for the node while it holds it; the others wait for their result. The lock
writes (lock, unlock) and the one read are then shared by the batch. A lock held by another
holder ends the queue's binds as `Pending` (they wait for the lock, see `NodeLocks.wait_for`),
not as errors of the pods.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from dataclasses import dataclass
from typing import Final

import structlog

from ascheduler import metrics
from ascheduler.binding.phases import phase_annotations
from ascheduler.binding.revalidation import NODE_LOCK, NodeView, Revalidation
from ascheduler.framework import CycleState, Status
from ascheduler.framework.interface import BINDING_ANNOTATIONS
from ascheduler.framework.runtime import Framework
from ascheduler.kube import KubeError
from ascheduler.locks import Holds, Known, LockContended, LockSettings, lock_wait_message
from ascheduler.model import PodInfo

log = structlog.get_logger(__name__)

#: A hold serves at most this many binds, so one busy node cannot keep its lock for long.
MAX_BINDS_PER_HOLD: Final = 32


@dataclass
class QueuedBind:
    fw: Framework
    state: CycleState
    pod: PodInfo
    result: asyncio.Future[Status]

    def finish(self, status: Status) -> None:
        if not self.result.done():  # its binding cycle may have been cancelled meanwhile
            self.result.set_result(status)


def take(queue: deque[QueuedBind], most: int) -> list[QueuedBind]:
    """Up to `most` binds from the front of `queue`, skipping the ones whose binding cycle
    was cancelled while they waited."""
    taken: list[QueuedBind] = []
    while queue and len(taken) < most:
        bind = queue.popleft()
        if not bind.result.done():
            taken.append(bind)
    return taken


class Batching(Revalidation):
    """The binder's queues: one per node whose hold is being served."""

    lock_settings: LockSettings
    annotation_prefix: str
    #: node -> binds waiting for the binding cycle that leads the node's current hold
    _queues: dict[str, deque[QueuedBind]]

    async def _queued(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> Status:
        """`pod`'s bind served by the hold on `node`: the one being served (it joins the
        queue), else one this bind leads."""
        mine = QueuedBind(fw, state, pod, asyncio.get_running_loop().create_future())
        queue = self._queues.get(node)
        if queue is not None:  # a hold on this node is being served: join it
            queue.append(mine)
            return await mine.result
        self._queues[node] = queue = deque([mine])
        try:
            await self._lead(node, queue)
        finally:
            # Whatever the leader did not serve (it failed, or was cancelled) fails with it;
            # the node is free for the next leader.
            del self._queues[node]
            while queue:
                queue.popleft().finish(Status.error("bind abandoned with its node lock", NODE_LOCK))
        return mine.result.result()

    async def _lead(self, node: str, queue: deque[QueuedBind]) -> None:
        """Take the node's lock and serve the queue, one hold after another."""
        most = 1 if self.lock_settings.hami else MAX_BINDS_PER_HOLD
        while queue:
            first = queue[0]
            if first.result.done():  # its binding cycle was cancelled while it waited
                queue.popleft()
                continue
            cached = first.fw.handle.nodes.node(node)
            known = None
            if cached is not None:
                self._node_uids[node] = cached.uid
                known = Known(cached.resource_version, cached.annotations)
            keys = self.lock_keys(node)
            try:
                async with self.locks.hold_all(
                    keys,
                    first.pod,
                    known=functools.partial(self._known_for, cached=known),
                    node=node,
                ) as hold:
                    if most == 1 and first.result.done():
                        continue  # HAMi's value names this pod, cancelled meanwhile: relock
                    allocatable = await self._allocatable(node, hold, cached)
                    view = await self._view(node, hold)
                    served = 0
                    while queue and served < most:
                        if served and not await self.locks.still_all_ours(hold):
                            break  # out of time (or robbed): the next hold serves the rest
                        batch = take(queue, most - served)
                        await self._serve(hold, batch, node, allocatable, view)
                        served += len(batch)
                    metrics.NODE_LOCK_BINDS_PER_HOLD.observe(served)
                    # For our next hold here, if nobody else takes the locks meanwhile; and
                    # for whoever holds them next, the pods bound under them, left beside.
                    self._records[node] = (self._epoch(), hold.lineage, view)
                    hold.record(view.added)
            except LockContended as exc:
                # Another instance binds there: the pods wait for it, not fail (see `waiting`).
                waiting = [b for b in queue if not b.result.done()]
                self.locks.wait_for(exc.node, exc.value, [b.pod.uid for b in waiting])
                status = Status.pending(lock_wait_message(node, exc), NODE_LOCK)
                while queue:  # they would meet the same lock
                    queue.popleft().finish(status)
            except KubeError as exc:
                failed = Status.error(f"node lock: {exc}", NODE_LOCK)
                while queue:  # they would meet the same failure
                    queue.popleft().finish(failed)

    async def _serve(
        self,
        hold: Holds,
        batch: list[QueuedBind],
        node: str,
        allocatable: dict[str, int],
        view: NodeView,
    ) -> None:
        """Re-validate each bind against the node's pods plus the ones before it, then write
        the fitting ones concurrently; every bind of the batch is finished when this returns,
        or fails with the batch if it is cancelled. A failed bind stays in the view: its
        Binding may have landed all the same, and counting too much never overcommits. A view
        from the record that refuses a bind is read again from the API server first (it may
        count a pod deleted since)."""
        try:
            fitting: list[QueuedBind] = []
            for bind in batch:
                status = self._revalidate(bind.pod, node, allocatable, view)
                if not status.ok and not view.fresh:
                    view.read_again([*await self._pods_on(node), *(b.pod for b in fitting)])
                    metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "refresh").inc()
                    status = self._revalidate(bind.pod, node, allocatable, view)
                if status.ok:
                    view.add(bind.pod)
                    view.added.append(bind.pod.uid)
                    fitting.append(bind)
                else:
                    bind.finish(status)
            outcomes: list[Status | BaseException]
            if len(fitting) == 1:  # the common case: no task to gather
                try:
                    outcomes = [await self._bind_one(hold, fitting[0], node)]
                except Exception as exc:
                    outcomes = [exc]
            else:
                outcomes = await asyncio.gather(
                    *(self._bind_one(hold, bind, node) for bind in fitting),
                    return_exceptions=True,
                )
            for bind, outcome in zip(fitting, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, Exception):
                        raise outcome  # cancellation and the like
                    log.error("bind_failed", pod=bind.pod.key, error=repr(outcome))
                    outcome = Status.error(f"bind: {outcome!r}", NODE_LOCK)
                bind.finish(outcome)
        finally:
            for bind in batch:  # only those not finished above: cancelled meanwhile
                bind.finish(Status.error("bind interrupted", NODE_LOCK))

    async def _bind_one(self, hold: Holds, bind: QueuedBind, node: str) -> Status:
        """The Bind plugins for one pod already re-validated, started only within the hold's
        time budget and cut off at its cutoff (see `locks.hold`). The Binding carries the bind
        phase and time (see `phases`)."""
        pod = bind.pod
        if not hold.writable():
            return Status.error(f"node lock on {node}: the hold ran out of time", NODE_LOCK)
        bind.state.write(
            BINDING_ANNOTATIONS, phase_annotations(self.annotation_prefix, str(int(time.time())))
        )
        try:
            async with asyncio.timeout(hold.remaining()):
                status = await bind.fw.bind(bind.state, pod, node)
        except TimeoutError:
            status = Status.error(f"node lock on {node}: bind cut off with the hold", NODE_LOCK)
        if status.ok and self.cache is not None:
            self._vouch(pod, node)
        return status
