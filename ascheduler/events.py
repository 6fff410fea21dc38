"""Events and the PodScheduled condition, written in the background.

The scheduling loop only enqueues (never awaits); a few workers send `events.k8s.io/v1` Events
(`Scheduled`, `FailedScheduling`, `Preempted`) and patch `PodScheduled=False` onto pods that
did not fit. During a burst binds come first: Events queued while binds are under way are set
aside and sent once the burst is over, or after `EVENT_DEFER` seconds at the latest (the
condition and nominations are never held back). The queue is sized for a burst of 100,000
pods; past that, when the API server cannot keep up, new items are dropped and counted
(`ascheduler_status_writes_dropped_total`); the scheduling loop never waits for it."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from ascheduler import metrics
from ascheduler.groupstatus import PodGroupStatusWriter
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import STRATEGIC_MERGE_PATCH
from ascheduler.model import PodInfo
from ascheduler.model.bindrequest import BindRequest
from ascheduler.model.bindrequest import object_path as request_path
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

NOTE_LIMIT: Final = 1024
#: How long an Event may be held back while binds are under way.
EVENT_DEFER: Final = 5.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate_note(note: str) -> str:
    """kube-scheduler's cut: at most 1024 bytes, the first 1020 then ` ...`."""
    raw = note.encode()
    if len(raw) <= NOTE_LIMIT:
        return note
    return raw[: NOTE_LIMIT - 4].decode(errors="ignore") + " ..."


@dataclass(frozen=True, slots=True)
class Related:
    """An event's other object (`related`): a preemptor pod, or a PodGroup."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def pod(cls, pod: PodInfo) -> Related:
        return cls("v1", "Pod", pod.namespace, pod.name, pod.uid)


@dataclass(frozen=True)
class _Event:
    pod: PodInfo
    profile: str
    type: str
    reason: str
    action: str
    note: str
    #: The other object involved (the preemptor of a `Preempted` victim).
    related: Related | None = None
    #: When it was queued (monotonic seconds).
    queued: float = field(default_factory=time.monotonic, compare=False)


@dataclass(frozen=True)
class _Condition:
    pod: PodInfo
    reason: str
    message: str
    #: Set with the condition, as kube-scheduler does when PostFilter nominated a node.
    nominated_node: str = ""
    #: Clear the pod's nominated node instead (a preemption found nothing to do).
    clear_nomination: bool = False


@dataclass(frozen=True)
class _ClearNomination:
    """A lower-priority pod's nomination to a node a preemption is emptying, dropped."""

    pod: PodInfo


@dataclass(frozen=True)
class _DropRequest:
    """A BindRequest that failed for good (or whose pod is bound or gone), deleted if it is
    still the same object."""

    request: BindRequest

    @property
    def pod(self) -> _Named:
        return _Named(f"{self.request.namespace}/{self.request.pod_name}")


@dataclass(frozen=True)
class _Named:
    key: str


_Item = _Event | _Condition | _ClearNomination | _DropRequest


class StatusWriter:
    def __init__(
        self,
        kube: KubeClient | None,
        *,
        maxsize: int = 100_000,
        workers: int = 4,
        hostname: str | None = None,
        defer: float = EVENT_DEFER,
    ) -> None:
        self.kube = kube
        #: How long an Event may wait while binds are under way (`idle` clear): binds first.
        #: The PodScheduled condition and nominations are never held back.
        self.defer = defer
        self.idle = asyncio.Event()
        self.idle.set()
        self._held: collections.deque[_Event] = collections.deque()
        self._held_added = asyncio.Event()
        self.queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=maxsize)
        self.workers = workers
        self.hostname = hostname or socket.gethostname()
        self.dropped = 0
        self.sent = 0
        #: The PodGroups' scheduling condition (1.36 on), written beside the pods' status.
        self.pod_groups: PodGroupStatusWriter | None = None

    def _put(self, item: _Item) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            metrics.EVENTS_DROPPED.inc()

    def scheduled(self, pod: PodInfo, node: str, profile: str) -> None:
        self._put(
            _Event(
                pod,
                profile,
                "Normal",
                "Scheduled",
                "Binding",
                f"Successfully assigned {pod.key} to {node}",
            )
        )

    def failed(
        self,
        pod: PodInfo,
        message: str,
        profile: str,
        *,
        reason: str = "Unschedulable",
        nominated_node: str = "",
        clear_nomination: bool = False,
    ) -> None:
        self._put(_Event(pod, profile, "Warning", "FailedScheduling", "Scheduling", message))
        unchanged = pod.scheduled_condition == ("False", reason, message)
        clear = clear_nomination and bool(pod.nominated_node_name)
        if not unchanged or clear or (nominated_node and nominated_node != pod.nominated_node_name):
            self._put(_Condition(pod, reason, message, nominated_node, clear))

    def preempted(
        self, victim: PodInfo, preemptor: PodInfo, node: str, *, in_memory: bool = False
    ) -> None:
        """kube-scheduler's `Preempted` event on a victim (reported by the preemptor's
        profile, related to the preemptor); `in_memory`: the victim was preempted without
        an API call (a pod waiting on Permit, 1.36 on), which the note says."""
        self.preempted_by(
            victim, Related.pod(preemptor), "pod", preemptor.scheduler_name, node, in_memory
        )

    def preempted_by(
        self,
        victim: PodInfo,
        preemptor: Related,
        kind: str,
        profile: str,
        node: str,
        in_memory: bool = False,
    ) -> None:
        """The `Preempted` event of a preemptor of any kind (`pod`, `podgroup`: its words
        in the note; a pod group's preemption names node `cluster`, its domain)."""
        note = f"Preempted by {kind} {preemptor.uid} on node {node}"
        if in_memory:
            note += " (in kube-scheduler memory)."
        self._put(_Event(victim, profile, "Normal", "Preempted", "Preempting", note, preemptor))

    def drop_request(self, request: BindRequest) -> None:
        self._put(_DropRequest(request))

    async def nominate_for_binding(self, pod: PodInfo, node: str) -> None:
        """The pod's `nominatedNodeName` set to the node its binding cycle binds it to
        (kube-scheduler's `bindingCycle` with NominatedNodeNameForExpectation), unless it
        already says so. Awaited, not queued: it must land before the binding (the API
        server clears the field when the pod is bound), and a failure is logged, not fatal,
        as kube-scheduler goes on binding."""
        if self.kube is None or pod.nominated_node_name == node:
            return
        try:
            await self.kube.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                body={"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}},
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except KubeError as exc:
            log.warning("binding_nomination_failed", pod=pod.key, node=node, error=str(exc))

    def clear_nomination(self, pod: PodInfo) -> None:
        if pod.nominated_node_name:
            self._put(_ClearNomination(pod))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for _ in range(self.workers):
                group.create_task(self._work())
            group.create_task(self._release())
            if self.pod_groups is not None:
                group.create_task(self.pod_groups.run())

    async def drain(self) -> None:
        """Everything queued so far written (or given up on): the stop waits for it."""
        await self.queue.join()
        if self.pod_groups is not None:
            await self.pod_groups.flush()

    async def _work(self) -> None:
        """Send items until cancelled. An Event queued while binds are under way is set
        aside for `_release` (binds go first); everything else is sent at once."""
        while True:
            item = await self.queue.get()
            if isinstance(item, _Event) and not self.idle.is_set():
                self._held.append(item)
                self._held_added.set()
                continue  # `_release` marks it done once sent
            await self._write(item)

    async def _release(self) -> None:
        """Send the Events set aside, oldest first: once binds are over, or when one has
        waited `defer` seconds (so a steady load delays them by that much, no more)."""
        while True:
            if not self._held:
                self._held_added.clear()
                await self._held_added.wait()
                continue
            remaining = self._held[0].queued + self.defer - time.monotonic()
            if remaining > 0 and not self.idle.is_set():
                await wait_event(self.idle, remaining)
                continue
            await self._write(self._held.popleft())

    async def _write(self, item: _Item) -> None:
        """One write. A failed write is logged and dropped, never retried: a newer attempt
        of the same pod reports again, and the writer must never die (it runs in the
        scheduler's task group, whose failure stops the process)."""
        try:
            if self.kube is not None:
                await self._send(item)
                self.sent += 1
        except KubeError as exc:
            if not exc.not_found:  # the pod is gone: nothing to report on
                log.warning(
                    "status_write_failed",
                    pod=item.pod.key,
                    failure=exc.kind.value,
                    error=str(exc),
                )
        except Exception:
            log.exception("status_write_crashed", pod=item.pod.key)
        finally:
            self.queue.task_done()

    async def _send(self, item: _Item) -> None:
        assert self.kube is not None
        if isinstance(item, _DropRequest):
            req = item.request
            precondition = {"preconditions": {"uid": req.uid}} if req.uid else None
            try:
                await self.kube.request(
                    "DELETE", request_path(req.namespace, req.name), body=precondition
                )
            except KubeError as exc:
                if not exc.conflict:  # a conflict: a newer request of the same name stays
                    raise
            return
        pod = item.pod
        if isinstance(item, _Event):
            body: dict[str, Any] = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{pod.name}.{secrets.token_hex(8)}",
                    "namespace": pod.namespace,
                },
                "eventTime": _now(),
                "reportingController": item.profile,
                "reportingInstance": f"{item.profile}-{self.hostname}",
                "action": item.action,
                "reason": item.reason,
                "type": item.type,
                "note": truncate_note(item.note),
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                },
            }
            if item.related is not None:
                body["related"] = {
                    "apiVersion": item.related.api_version,
                    "kind": item.related.kind,
                    "namespace": item.related.namespace,
                    "name": item.related.name,
                    "uid": item.related.uid,
                }
            await self.kube.request(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events", body=body
            )
            return
        if isinstance(item, _ClearNomination):
            await self.kube.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                body={"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": None}},
                content_type=STRATEGIC_MERGE_PATCH,
            )
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": item.reason,
            "message": item.message,
        }
        if pod.scheduled_condition is None or pod.scheduled_condition[0] != "False":
            condition["lastTransitionTime"] = _now()[:19] + "Z"  # only when the status changes
        status: dict[str, Any] = {"conditions": [condition]}
        if item.nominated_node:
            status["nominatedNodeName"] = item.nominated_node
        elif item.clear_nomination:
            status["nominatedNodeName"] = None
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        await self.kube.request(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )
