"""Preemptions carried out off the scheduling cycle (kube-scheduler's asynchronous preemption,
`SchedulerAsyncPreemption`, on by default since v1.33).

DefaultPreemption chooses a node and its victims inside the cycle, then hands them here and
the loop goes on. A background task per preemptor:

1. clears the nominations of lower-priority pods nominated to that node (they may no longer
   fit there) and sends them back to the active queue;
2. evicts each victim that is not already terminating: a pod waiting on Permit is rejected
   (1.35) or preempted in memory (1.36 on: its wait ends in an error, and the `Preempted`
   event says ` (in kube-scheduler memory).`; a wait already over falls back to the API);
   from 1.36 a pod in PreBind (`framework.prebind`) has its binding cycle cancelled, in
   memory too (a pod already past PreBind falls back to the API);
   any other gets the `DisruptionTarget` condition kube-scheduler writes
   (`PreemptionByScheduler`), is deleted, and a `Preempted` event is recorded on it. All but
   the last in parallel, then the last; from 1.36 the last is left alone when one of the
   others failed (the preemptor is retried instead, as on any failure).

The preemptor is held back by DefaultPreemption's PreEnqueue while its room is being made,
so it is not tried elsewhere meanwhile: until the last victim is going (deleting, or gone from
the cache), as kube-scheduler's `IsPodRunningPreemption` reads its informer. It is then left
to the events that may help it (that victim's deletion above all), not activated: a victim
that terminates slowly does not make the preemptor retry in a loop, and one still
terminating when the task ends lets the preemptor out with its deletion, as kube-scheduler's
queue does (a retry before that would find it terminating on the nominated node, "not
eligible"). It is activated when the task ends in a failure, from 1.37 when its last victim
was preempted in memory (no deletion event will come for it), and when it is held (gated)
while its last victim is already gone from the cache: the deletion that would have let it
out came before the task recorded that victim, and no other event is due. A write that
fails transiently is retried with backoff; a victim already gone is done; a permanent
failure (403, a webhook) ends the task early (the nomination stays, as kube-scheduler
leaves it). Nothing awaits these tasks but shutdown.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog

from ascheduler import metrics
from ascheduler.events import Related, StatusWriter
from ascheduler.features import Features
from ascheduler.framework.handle import group_uid
from ascheduler.framework.nominated import Nominator
from ascheduler.framework.prebind import PodsInPreBind
from ascheduler.framework.waiting import WaitingPods
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import STRATEGIC_MERGE_PATCH
from ascheduler.model import PodInfo
from ascheduler.model.pod import PREEMPTION_BY_SCHEDULER
from ascheduler.model.podgroups import SchedulingGroup, scheduling_group_api

log = structlog.get_logger(__name__)

#: Attempts per write before a transient failure counts as a failure.
ATTEMPTS: Final = 5
FIRST_RETRY: Final = 0.2


@dataclass(frozen=True, slots=True)
class _Preemptor:
    """Who the victims make room for: a pod, or a pod group (workload-aware preemption)."""

    #: What `running` is asked with: the pod's uid, or the group's (`group_uid`).
    uid: str
    key: str
    scheduler: str
    #: kube-scheduler's word for it in the DisruptionTarget condition and the event.
    kind: str
    related: Related
    #: Pods woken when the task ends (a group's members; a pod: itself).
    wake: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Evicted:
    """One victim's eviction: done (gone or going), and whether without an API call."""

    ok: bool
    in_memory: bool = False


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A preemptor's task: every eviction done, and whether the preemptor must be activated
    because its last victim was preempted in memory (1.37)."""

    ok: bool
    last_in_memory: bool = False


class Evictions:
    def __init__(
        self,
        kube: KubeClient | None,
        writer: StatusWriter,
        nominator: Nominator,
        waiting: WaitingPods,
        activate: Callable[[str], None],
        plugin: str = "DefaultPreemption",
        going: Callable[[str], bool] | None = None,
        gated: Callable[[str], bool] | None = None,
        features: Features | None = None,
        in_pre_bind: PodsInPreBind | None = None,
        gone: Callable[[str], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.writer = writer
        self.nominator = nominator
        self.waiting = waiting
        #: Moves a pod (by uid) from wherever the queue holds it to the active queue.
        self.activate = activate
        self.plugin = plugin
        #: Whether a pod (by uid) is deleting or gone, as the cache has it.
        self.going = going or (lambda uid: False)
        #: Whether the queue holds a pod (by uid) gated by PreEnqueue.
        self.gated = gated or (lambda uid: False)
        #: Whether a pod (by uid) is gone from the cache (not knowing: assumed gone, so a
        #: gated preemptor is let out rather than left waiting for an event).
        self.gone = gone or (lambda uid: True)
        #: The release whose executor this is (victims' handling changed in 1.36 and 1.37).
        self.features = features if features is not None else Features.defaults()
        #: Pods whose binding cycle is in PreBind (from 1.36 a victim there is cancelled).
        self.in_pre_bind = in_pre_bind if in_pre_bind is not None else PodsInPreBind()
        self._tasks: dict[str, asyncio.Task[_Outcome]] = {}
        #: Preemptor -> its last victim, once that one's eviction is under way.
        self._last: dict[str, str] = {}

    def running(self, uid: str) -> bool:
        """Whether the preemptor's room is still being made (its PreEnqueue holds it)."""
        if uid not in self._tasks:
            return False
        last = self._last.get(uid)
        return last is None or not self.going(last)

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, preemptor: PodInfo, node: str, victims: Sequence[PodInfo]) -> None:
        todo = [v for v in victims if not v.deleting]
        # 1.36 counts the victims only when one is left to evict (1.35 and 1.37 always).
        if todo or not self.features.since(1, 36) or self.features.since(1, 37):
            metrics.PREEMPTION_VICTIMS.observe(len(victims))
        lower = [
            p
            for p in self.nominator.on_node(node)
            if p.uid != preemptor.uid and p.priority < preemptor.priority
        ]
        who = _Preemptor(
            preemptor.uid,
            preemptor.key,
            preemptor.scheduler_name,
            "pod",
            Related.pod(preemptor),
            (preemptor.uid,),
        )
        self._start(who, node, todo, lower)

    def start_group(
        self,
        group: SchedulingGroup,
        scheduler: str,
        victims: Sequence[PodInfo],
        members: Sequence[str] = (),
    ) -> None:
        """A workload-aware preemption's victims evicted for `group` (kube-scheduler's
        `actuatePodGroupPreemption`): its domain is the cluster, so no node's nominations
        are cleared and the events name node `cluster`; `members` (uids) are woken when the
        task ends as a pod preemptor is."""
        api = scheduling_group_api(self.features.release) or "/apis/scheduling.k8s.io/v1beta1/"
        version = api.removeprefix("/apis/").rsplit("/", 1)[0]
        who = _Preemptor(
            group_uid(group),
            f"PodGroup {group.key}",
            scheduler,
            "podgroup",
            Related(version, "PodGroup", group.namespace, group.name, group.uid),
            tuple(members),
        )
        self._start(who, "cluster", [v for v in victims if not v.deleting], [])

    def _start(
        self,
        preemptor: _Preemptor,
        node: str,
        todo: Sequence[PodInfo],
        lower: Sequence[PodInfo],
    ) -> None:
        if not todo:
            return
        uid = preemptor.uid
        loop = asyncio.get_running_loop()
        began = loop.time()
        task = loop.create_task(
            self._run(preemptor, node, todo, lower), name=f"preempt {preemptor.key}"
        )
        self._tasks[uid] = task

        def finished(t: asyncio.Task[_Outcome]) -> None:
            last = None
            if self._tasks.get(uid) is t:
                del self._tasks[uid]
                last = self._last.pop(uid, None)
            if t.cancelled():
                return
            failure = t.exception()
            if failure is not None:
                log.error("preemption_crashed", preemptor=preemptor.key, error=repr(failure))
            outcome = t.result() if failure is None else _Outcome(ok=False)
            result = "success" if outcome.ok else "error"
            metrics.PREEMPTION_GOROUTINES.labels(result).inc()
            metrics.PREEMPTION_GOROUTINES_DURATION.labels(result).observe(loop.time() - began)
            for pod in preemptor.wake:
                # Held, with no deletion event to come for its last victim: only activation
                # lets it out (a last victim still terminating wakes it when it is deleted).
                stuck = self.gated(pod) and (last is None or self.gone(last))
                if result == "error" or outcome.last_in_memory or stuck:
                    self.activate(pod)

        task.add_done_callback(finished)

    async def _run(
        self,
        preemptor: _Preemptor,
        node: str,
        victims: Sequence[PodInfo],
        lower: Sequence[PodInfo],
    ) -> _Outcome:
        log.info(
            "preemption_started",
            preemptor=preemptor.key,
            node=node,
            victims=[v.key for v in victims],
        )
        ok = True
        for pod in lower:
            self.nominator.forget(pod.uid)
            self.writer.clear_nomination(pod)
            self.activate(pod.uid)
        if len(victims) > 1:
            results = await asyncio.gather(
                *(self._evict(preemptor, node, v) for v in victims[:-1]), return_exceptions=True
            )
            ok = all(isinstance(r, _Evicted) and r.ok for r in results)
        in_memory = False
        # kube-scheduler 1.36 on (`prepareCandidateAsync`): after a failure among the
        # others, the last victim is spared; the preemptor is activated to try again.
        if victims and (ok or not self.features.since(1, 36)):
            self._last[preemptor.uid] = victims[-1].uid
            last = await self._evict(preemptor, node, victims[-1])
            ok = last.ok and ok
            in_memory = last.in_memory
        log.info("preemption_finished", preemptor=preemptor.key, node=node, ok=ok)
        # 1.37: a last victim preempted in memory sends no deletion event to wake the
        # preemptor (PreEnqueue watches only that victim), so it is activated.
        return _Outcome(ok, last_in_memory=in_memory and self.features.since(1, 37))

    async def _evict(self, preemptor: _Preemptor, node: str, victim: PodInfo) -> _Evicted:
        """One victim: ok when it is gone or going; `in_memory` when no API call was made
        (a pod waiting on Permit, 1.36 on)."""
        waiting = self.waiting.get(victim.uid)
        binding = self.in_pre_bind.get(victim.uid) if self.features.since(1, 36) else None
        if waiting is not None and not self.features.since(1, 36):
            waiting.reject(self.plugin, "preempted")
        elif (waiting is not None and waiting.preempt(self.plugin, "preempted")) or (
            waiting is None
            and binding is not None
            and binding.cancel_pod(f"preempted by {self.plugin}")
        ):
            log.info(
                "preemption_victim_in_memory",
                victim=victim.key,
                preemptor=preemptor.key,
                phase="Permit" if waiting is not None else "PreBind",
            )
            self.writer.preempted_by(
                victim, preemptor.related, preemptor.kind, preemptor.scheduler, node, True
            )
            return _Evicted(True, in_memory=True)
        else:
            path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}"
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": PREEMPTION_BY_SCHEDULER,
                "message": (
                    f"{preemptor.scheduler}: preempting to accommodate a higher priority "
                    f"{preemptor.kind}"
                ),
                "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            patch = {"metadata": {"uid": victim.uid}, "status": {"conditions": [condition]}}
            for step, args in (
                ("condition", ("PATCH", f"{path}/status", patch, STRATEGIC_MERGE_PATCH)),
                ("delete", ("DELETE", path, {"preconditions": {"uid": victim.uid}}, None)),
            ):
                outcome = await self._write(*args)
                if outcome == "gone":
                    log.info("preemption_victim_gone", victim=victim.key, preemptor=preemptor.key)
                    return _Evicted(True)
                if outcome != "ok":
                    log.warning(
                        "preemption_eviction_failed",
                        victim=victim.key,
                        preemptor=preemptor.key,
                        step=step,
                        error=outcome,
                    )
                    return _Evicted(False)
        self.writer.preempted_by(
            victim, preemptor.related, preemptor.kind, preemptor.scheduler, node
        )
        return _Evicted(True)

    async def _write(self, method: str, path: str, body: Any, content_type: str | None) -> str:
        """ "ok", "gone" (404, or a uid precondition that no longer holds: another pod of that
        name), or the error that stopped it."""
        if self.kube is None:
            return "ok"
        delay = FIRST_RETRY
        for attempt in range(ATTEMPTS):
            try:
                if content_type is None:
                    await self.kube.request(method, path, body=body)
                else:
                    await self.kube.request(method, path, body=body, content_type=content_type)
                return "ok"
            except KubeError as exc:
                if exc.not_found or exc.conflict:
                    return "gone"
                if not exc.transient or attempt == ATTEMPTS - 1:
                    return str(exc)
            await asyncio.sleep(delay)
            delay *= 2
        return "retries exhausted"

    async def drain(self, timeout: float) -> None:
        """Let the evictions under way finish for up to `timeout` seconds, then cancel the
        rest (shutdown: a cancelled preemptor keeps its nomination and is retried by
        whichever instance schedules it next)."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        await self.close()

    async def close(self) -> None:
        """Cancel what is still running (shutdown)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
