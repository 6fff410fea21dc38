"""Pods that a Permit plugin told to wait, and the Allow / Reject calls that release them.

A waiting pod holds its node (it is assumed and reserved) until every plugin that said WAIT
allows it, any plugin rejects it, or a plugin's timeout fires. Its binding cycle awaits
`WaitingPod.wait()`; the scheduling loop is never blocked by it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from ascheduler.durations import go_duration
from ascheduler.framework.interface import SUCCESS, Code, Status
from ascheduler.model import PodInfo


class WaitingPod:
    def __init__(self, pod: PodInfo, node: str, timeouts: Mapping[str, float]) -> None:
        loop = asyncio.get_running_loop()
        self.pod = pod
        self.node = node
        self._pending = set(timeouts)
        self._result: asyncio.Future[Status] = loop.create_future()
        self._timers = {
            plugin: loop.call_later(seconds, self._timeout, plugin, seconds)
            for plugin, seconds in timeouts.items()
        }

    @property
    def pending_plugins(self) -> frozenset[str]:
        return frozenset(self._pending)

    def allow(self, plugin: str) -> None:
        self._pending.discard(plugin)
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self._pending:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """kube-scheduler's `waitingPod.Preempt` (1.36): the wait ends in an error, not a
        rejection, so the pod is retried after the error backoff rather than parked until
        an event; False when the wait was already over (the pod was let go or rejected), so
        the caller deletes it through the API as any other victim."""
        if self._result.done():
            return False
        self._finish(Status(Code.ERROR, (message,), plugin))
        return True

    def _timeout(self, plugin: str, seconds: float) -> None:
        self._finish(
            Status(
                Code.UNSCHEDULABLE,
                (
                    f"rejected due to timeout after waiting {go_duration(seconds)} at plugin "
                    f"{plugin}",
                ),
                plugin,
            )
        )

    def _finish(self, status: Status) -> None:
        if not self._result.done():
            self._result.set_result(status)
        for timer in self._timers.values():
            timer.cancel()

    async def wait(self) -> Status:
        return await self._result


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
