"""Pods whose binding cycle is in PreBind, and the cancellation preemption makes of it
(kube-scheduler 1.36's `podsInPreBindMap`, `framework/runtime/pods_in_prebind_map.go`).

A pod enters the registry after WaitOnPermit when some PreBind plugin has work to do for it
(`PreBindPreFlight` succeeded: volumes to bind, claims to write) and leaves it when its
PreBind is over. Meanwhile it holds its node, assumed, and may be chosen as a preemption
victim. From 1.36 kube-scheduler cancels such a victim's binding cycle instead of deleting
the pod through the API: the pod was never bound, so there is nothing to delete, only a
PreBind to stop (`CancelPod("preempted by DefaultPreemption")`); the cycle then fails like any
other (Unreserve, forget, the error backoff). A pod past PreBind (`MarkPrebound`) can no
longer be cancelled, and the preemptor falls back to the API.

The PreBind phase runs as a task of its own (`PodInPreBind.run`), child of the binding
cycle's task: cancelling it stops the plugin at its current await, so its own cleanup
(`finally`, context managers: device locks, the binding slot) runs, and the binding cycle
resumes with a failed status instead of a `CancelledError`. A cancellation of the binding
cycle itself (shutdown) still reaches the plugin, and still propagates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from ascheduler.framework.interface import Status


class PodInPreBind:
    """One pod in PreBind: cancellable until it is marked prebound."""

    __slots__ = ("_task", "cause", "finished", "plugin", "uid")

    def __init__(self, uid: str) -> None:
        self.uid = uid
        #: Why the binding was cancelled (`preempted by <plugin>`); None while it is not.
        self.cause: str | None = None
        #: PreBind is over: the pod can no longer be cancelled.
        self.finished = False
        #: The PreBind plugin running now (the framework says), for the failure's message.
        self.plugin = ""
        self._task: asyncio.Task[Status] | None = None

    @property
    def cancelled(self) -> bool:
        return self.cause is not None

    def cancel_pod(self, message: str) -> bool:
        """`CancelPod`: stop the pod's PreBind with `message` as the cause; False when its
        PreBind is already over (the caller deletes the pod through the API instead). A
        second cancellation keeps the first cause and still answers True."""
        if self.finished:
            return False
        if self.cause is None:
            self.cause = message
            if self._task is not None and not self._task.done():
                self._task.cancel(message)
        return True

    def mark_prebound(self) -> bool:
        """`MarkPrebound`: PreBind is over and the bind may go on; False when the pod was
        cancelled meanwhile (its binding cycle must fail with the cause)."""
        if self.cause is not None:
            return False
        self.finished = True
        return True

    async def run(self, pre_bind: Coroutine[Any, Any, Status]) -> Status:
        """Run the PreBind phase, cancellable by `cancel_pod`, then mark the pod prebound.

        The status kube-scheduler's binding cycle ends with: a cancellation that stopped a
        plugin fails as that plugin's error (`running PreBind plugin "<name>": <cause>`,
        `context.Cause` replacing the plugin's `context canceled`); a PreBind that finished
        anyway fails with the cause alone (`MarkPrebound` returned false); a PreBind that
        failed on its own keeps its status."""
        task = asyncio.get_running_loop().create_task(pre_bind, name=f"prebind {self.uid}")
        self._task = task
        if self.cause is not None:  # cancelled before the task could start
            task.cancel(self.cause)
        try:
            status = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.cause is None or (current is not None and current.cancelling()):
                raise  # the binding cycle itself is cancelled (shutdown)
            if self.plugin:
                failed = f'running PreBind plugin "{self.plugin}": {self.cause}'
                return Status.error(failed, self.plugin)
            return Status.error(self.cause)
        finally:
            self._task = None
        if status.ok and not self.mark_prebound():
            assert self.cause is not None
            return Status.error(self.cause)
        return status


class PodsInPreBind:
    """The pods in PreBind by uid (shared by every profile, as kube-scheduler's map is)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodInPreBind] = {}

    def add(self, uid: str) -> PodInPreBind:
        """Register `uid` (replacing an entry left by an earlier cycle of the same pod)."""
        entry = PodInPreBind(uid)
        self._pods[uid] = entry
        return entry

    def get(self, uid: str) -> PodInPreBind | None:
        return self._pods.get(uid)

    def remove(self, entry: PodInPreBind) -> None:
        """Drop `entry`, unless a later cycle of the pod registered another meanwhile."""
        if self._pods.get(entry.uid) is entry:
            del self._pods[entry.uid]

    def __len__(self) -> int:
        return len(self._pods)
