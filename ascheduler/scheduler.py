"""The scheduling cycle, the binding cycles, and the routing of cluster events.

One pod at a time (kube-scheduler's `scheduleOne`):

    qp = await queue.pop()
    job = schedule_pod(qp):                             # the scheduling cycle, no await
        fw = frameworks[pod.schedulerName]
        result = fw.find_nodes(state, pod, cache.table) # PreFilter .. NormalizeScore
        cache.assume(pod, node); fw.reserve(); fw.permit()  # approve / reject / wait
    spawn binding_cycle(job)                            # the loop goes on at once

A member of a PodGroup (1.36 on, GenericWorkload) comes up with its queued siblings, and they
are tried one after another, in kube-scheduler's order, with no other pod between them
(`PodGroupCycle.members`), each taken from the queue as its turn comes; a group of thousands
lets informers in every few milliseconds.

Each binding cycle is an asyncio task owned by `Scheduler.run`'s task group and bounded by a
semaphore: WaitOnPermit, PreBind, Bind, then PostBind and the `Scheduled` event. Any failure
takes one path: Unreserve (reverse order), forget the assumed pod, put the pod back (backoff),
report `FailedScheduling`, and move pods waiting for room. The scheduling loop never awaits the
network, so a slow or failing bind cannot stall it.

One bad pod fails alone: an exception anywhere in its scheduling cycle (a plugin, the cache)
undoes what the attempt did, reports `SchedulerError` and puts the pod back with backoff; a
binding cycle never lets an exception out of its task. Either would otherwise end the task
group, and with it the process.

A pod is put back as the informer has it now, not as it was popped (kube-scheduler re-reads
it from its lister too): updates that arrived while it was assumed (new tolerations, a new
resourceVersion, a deletionTimestamp) are not lost, and a pod deleted or bound meanwhile is
not put back at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import structlog

from ascheduler import metrics
from ascheduler.binding.binder import LockedBinder
from ascheduler.cache import Cache
from ascheduler.diagnoses import Diagnoses
from ascheduler.events import StatusWriter
from ascheduler.features import (
    NOMINATED_NODE_NAME_FOR_EXPECTATION,
    SCHEDULER_PREEMPTION_FOR_RESIZE,
    Features,
)
from ascheduler.framework import (
    BINDING_SLOT,
    SUCCESS,
    BindingSlot,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    QueuedPodInfo,
    Status,
    slot_released,
)
from ascheduler.framework.extender import EXTENDER, ExtenderError
from ascheduler.framework.nominated import Nominator
from ascheduler.framework.runtime import Framework, ScheduleResult
from ascheduler.framework.waiting import WaitingPods
from ascheduler.groupcycle import PodGroupCycle
from ascheduler.groupplanner import GroupPlanner
from ascheduler.groupstatus import PodGroupStatusWriter
from ascheduler.model import PodInfo
from ascheduler.preemption import Evictions
from ascheduler.queue import SchedulingQueue

log = structlog.get_logger(__name__)

#: kube-scheduler records extension-point durations for a sample of cycles, too.
METRICS_SAMPLE_RATE = 0.1
#: How long the members of one pod group are tried back to back before the loop lets
#: informers and binding cycles run (a gang of thousands is not one turn of the loop).
GROUP_TURN_SECONDS = 0.005
_STARTED = "ascheduler/cycle-started"
#: The node the binding cycle wrote as the pod's nominated node (NominatedNodeNameForExpectation).
_NOMINATED_FOR_BINDING = "ascheduler/nominated-for-binding"

#: Pods with an invalid spec are rejected by this pseudo-plugin; only their own update helps.
INVALID_SPEC = "PodSpecValidation"

#: The informer's current copy of a pod by uid; None once it is gone.
PodLookup = Callable[[str], PodInfo | None]


@dataclass(frozen=True, slots=True)
class BindingJob:
    """What a scheduling cycle hands its pod's binding cycle."""

    fw: Framework
    state: CycleState
    qp: QueuedPodInfo
    node: str


@dataclass
class Stats:
    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bind_failures: int = 0


class Scheduler:
    def __init__(
        self,
        *,
        frameworks: Mapping[str, Framework],
        cache: Cache,
        queue: SchedulingQueue,
        writer: StatusWriter,
        binding_concurrency: int = 256,
        binder: LockedBinder | None = None,
        pods: PodLookup | None = None,
    ) -> None:
        self.frameworks = dict(frameworks)
        #: Where a failed pod is re-read before it is put back (None: no informer, as in unit
        #: tests of the cycle alone; the popped copy is then taken as current).
        self.pods = pods
        #: Whether a pod of our profiles is ours to schedule: every one, but in sharding
        #: mode only our share (`ascheduler.sharding`).
        self.owns: Callable[[PodInfo], bool] = lambda _pod: True
        #: Node locks and bind phases around Bind; None binds directly.
        self.binder = binder
        #: Binds go through the binder's node locks (direct mode). In bindrequest mode the
        #: Bind point only writes a BindRequest: `ascheduler binder` takes the lock to bind.
        self.lock_binds = True
        self.cache = cache
        self.queue = queue
        self.writer = writer
        self.stats = Stats()
        self._bind_slots = asyncio.Semaphore(binding_concurrency)
        self._cycle_started = time.perf_counter()
        self._rng = random.Random()
        self._binding: set[asyncio.Task[None]] = set()
        #: The last failed attempt of each pending pod, when the debug endpoints are on.
        self.diagnoses: Diagnoses | None = None
        first = next(iter(self.frameworks.values()), None)
        #: Pods nominated to nodes, shared by every profile's frameworks.
        self.nominator = first.handle.nominator if first is not None else Nominator()
        #: Preemptions under way (DefaultPreemption hands its choices to it).
        self.evictions = Evictions(
            writer.kube,
            writer,
            self.nominator,
            first.handle.waiting_pods if first is not None else WaitingPods(),
            queue.activate,
            going=self._pod_going,
            gated=lambda uid: queue.where(uid) == "gated",
            gone=lambda uid: not self.cache.has_pod(uid),
            features=first.handle.features if first is not None else None,
            in_pre_bind=first.handle.pods_in_pre_bind if first is not None else None,
        )
        features = first.handle.features if first is not None else None
        # From 1.36 the status writer writes the PodGroups' condition too (the release is
        # known here, from the profiles).
        if features is not None and writer.pod_groups is None and features.since(1, 36):
            writer.pod_groups = PodGroupStatusWriter(
                writer.kube, features.release, lookup=cache.gangs.scheduling_groups.get
            )
        #: The pod group cycle's checks and its verdicts on the PodGroups (1.36 on).
        self.groups = PodGroupCycle(
            cache.gangs, writer.pod_groups, self.frameworks, features or Features()
        )
        if binder is not None:
            # A pod that met another instance's lock is retried as soon as it is let go.
            binder.locks.on_free = self._lock_freed
        #: The pod group algorithm's dry run, for workload-aware preemption (1.37).
        planner = GroupPlanner(cache, self.frameworks)
        for fw in self.frameworks.values():
            fw.handle.set_activator(self._wake)
            fw.handle.set_evictor(self.evictions)
            fw.handle.set_group_planner(planner)

    def _wake(self, uids: Iterable[str]) -> None:
        """A plugin's `handle.wake`: the pods are woken, keeping their backoff."""
        for uid in uids:
            self.queue.wake(uid)

    def _lock_freed(self, uids: Iterable[str]) -> None:
        """The node lock these pods waited for was let go: they are tried again now, their
        backoff cut short (they waited for the lock, not for a failure to clear)."""
        for uid in uids:
            self.queue.activate(uid)

    def _pod_going(self, uid: str) -> bool:
        """A pod deleting, or gone from the cache."""
        pod = self.cache.pod(uid)
        return pod is None or pod.deleting

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until the queue closes; then wait for binding cycles in flight."""
        async with asyncio.TaskGroup() as group:
            while True:
                qp = await self.queue.pop()
                if qp is None:
                    break
                # A PodGroup's members come up together (1.36 on): tried one after another
                # in kube-scheduler's order, with no other pod between them.
                batch = self.groups.members(qp, self.queue.waiting)
                before = self.groups.failure(qp.pod) if len(batch) > 1 else None
                turn = time.perf_counter()
                for i, queued in enumerate(batch):
                    if i and time.perf_counter() - turn > GROUP_TURN_SECONDS:
                        # A large group lets informers and binding cycles in now and then.
                        await asyncio.sleep(0)
                        turn = time.perf_counter()
                    member = queued
                    if queued is not qp:
                        # A sibling (first, maybe: tried before) is taken from the queue as
                        # its turn comes (kube's PopSpecificPod): one gone, or held by
                        # PreEnqueue, meanwhile is not tried.
                        taken = self.queue.pop_specific(queued.pod.uid)
                        if taken is None:
                            continue
                        member = taken
                    if i and (status := self._stopped(member.pod, before)) is not None:
                        self._fail_with_group(member, status)
                        continue
                    # A slot for the binding cycle, taken only once there is a pod: a cycle
                    # back from a wait outside the scheduler (`slot_released`) must not find
                    # the last slot held by a loop waiting for pods.
                    await self._bind_slots.acquire()
                    job = await self.schedule_pod(member)
                    if job is None:
                        self._bind_slots.release()
                    else:
                        task = group.create_task(self.binding_cycle(job))
                        self._binding.add(task)
                        self.writer.idle.clear()
                        task.add_done_callback(self._bound)
                # Let informers and binding cycles run between pods.
                await asyncio.sleep(0)

    def _stopped(self, pod: PodInfo, before: object) -> Status | None:
        """`PodGroupCycle.stopped`, and a crash in it logged: the member is then tried, and
        its own attempt (which undoes what fails) meets whatever failed."""
        try:
            return self.groups.stopped(pod, before)
        except Exception:
            log.exception("pod_group_check_crashed", pod=pod.key)
            return None

    def _fail_with_group(self, qp: QueuedPodInfo, status: Status) -> None:
        """A member the pod group cycle did not try (its group failed before it): it fails
        with the group's status, as those let go at Permit do."""
        fw = self.frameworks.get(qp.pod.scheduler_name)
        if fw is None or qp.pod.deleting or not self.owns(qp.pod):
            self.queue.done(qp.pod.uid)
            return
        self._cycle_started = time.perf_counter()
        self.handle_scheduling_failure(
            fw, qp, status, rejected_by=frozenset({status.plugin}), binding=True
        )

    def _bound(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not self._binding:
            self.writer.idle.set()

    @property
    def binding_in_flight(self) -> int:
        return len(self._binding)

    async def schedule_pod(self, qp: QueuedPodInfo) -> BindingJob | None:
        """The scheduling cycle; returns what the binding cycle needs, or None when done. It
        awaits only the HTTP extenders, when there are any."""
        pod = qp.pod
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None or pod.deleting or not self.owns(pod):
            # Not ours (any more): another sharding member's, its re-split not yet here.
            self.queue.done(pod.uid)
            return None
        if (pod.assigned or self.cache.has_pod(pod.uid)) and not _deferred(fw, pod):
            # A deferred resize is bound and in the cache: scheduled again all the same.
            self.queue.done(pod.uid)
            return None
        self.stats.attempts += 1
        self._cycle_started = time.perf_counter()
        try:
            return await self._attempt(fw, qp)
        except Exception as exc:
            log.exception("scheduling_cycle_crashed", pod=pod.key, profile=fw.profile)
            self._abort(fw, qp, exc)
            return None

    async def _attempt(self, fw: Framework, qp: QueuedPodInfo) -> BindingJob | None:
        pod = qp.pod
        if pod.errors:
            message = f"invalid pod {pod.key}: " + "; ".join(pod.errors)
            log.warning("pod_invalid", pod=pod.key, errors=list(pod.errors))
            self.handle_scheduling_failure(
                fw,
                qp,
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)),
                rejected_by=frozenset({INVALID_SPEC}),
                reason="SchedulerError",
            )
            return None
        invalid = self.groups.validate(pod)
        if invalid is not None:
            # The pod group cycle refuses a group whose members disagree, before any is tried.
            self.handle_scheduling_failure(fw, qp, invalid, error=True, reason="SchedulerError")
            return None

        state = CycleState()
        state.write(_STARTED, self._cycle_started)
        if fw.extenders is None:
            result = fw.find_nodes(state, pod, self.cache.table)
        else:
            try:
                result = await fw.find_nodes_with_extenders(state, pod, self.cache.table)
            except ExtenderError as exc:
                result = ScheduleResult(None, Status.error(f"extender: {exc}", EXTENDER))
            if self._gone_meanwhile(pod):
                # Deleted, or bound by someone else, while the extenders were asked.
                self.queue.done(pod.uid)
                return None
        if self._rng.random() < METRICS_SAMPLE_RATE:
            for point, seconds in state.timings.items():
                duration = metrics.EXTENSION_POINT_DURATION
                metrics.labelled(duration, point, "Success", fw.profile).observe(seconds)
        if result.node is None:
            if result.status.rejected:
                rejecting = (
                    frozenset(result.diagnosis.rejecting_plugins)
                    if result.diagnosis
                    else frozenset()
                )
                if _deferred(fw, pod):
                    # Preemption may have evicted victims on its node; a bound pod is never
                    # nominated (`handleSchedulingFailure` returns before the nomination).
                    pass
                elif result.nominated_node:
                    self.nominator.nominate(pod, result.nominated_node)
                elif result.clear_nomination:
                    self.nominator.forget(pod.uid)
                self.handle_scheduling_failure(
                    fw,
                    qp,
                    result.status,
                    rejected_by=rejecting,
                    nominated_node=result.nominated_node,
                    clear_nomination=result.clear_nomination,
                    diagnosis=result.diagnosis,
                )
            else:
                self.handle_scheduling_failure(
                    fw, qp, result.status, error=True, reason="SchedulerError"
                )
            return None

        node = result.node
        if _deferred(fw, pod):
            # kube-scheduler's AssumePod refuses a pod its cache already holds (a deferred
            # resize is bound): the cycle ends in an error before Reserve and Permit.
            self.handle_scheduling_failure(
                fw,
                qp,
                Status.error(f"pod {pod.uid}({pod.key}) is in the cache, so can't be assumed"),
                error=True,
                reason="SchedulerError",
            )
            return None
        self.cache.assume(pod, node)
        self.nominator.forget(pod.uid)
        status = fw.reserve(state, pod, node)
        if not status.ok:
            self.cache.forget(pod)
            self.handle_scheduling_failure(
                fw, qp, status, error=not status.rejected, rejected_by=frozenset({status.plugin})
            )
            return None
        status = fw.permit(state, pod, node)
        if not (status.ok or status.code is Code.WAIT):
            fw.unreserve(state, pod, node)
            self.cache.forget(pod)
            self.handle_scheduling_failure(
                fw, qp, status, error=not status.rejected, rejected_by=frozenset({status.plugin})
            )
            return None
        if status.ok:
            self.groups.scheduled(pod)
        return BindingJob(fw, state, qp, node)

    def _abort(self, fw: Framework, qp: QueuedPodInfo, exc: Exception) -> None:
        """Undo whatever a crashed attempt did (it found the pod outside the cache, so an
        assumed pod is its own doing), then report and requeue it with backoff."""
        pod = qp.pod
        failed = Status.error(f"scheduling failed: {exc!r}")
        try:
            fw.handle.waiting_pods.remove(pod.uid)
            node = self.cache.pod_node(pod.uid)
            if node is not None and self.cache.is_assumed(pod.uid):
                fw.unreserve(CycleState(), pod, node)
                self.cache.forget(pod)
            self.handle_scheduling_failure(fw, qp, failed, error=True, reason="SchedulerError")
        except Exception:
            # Only a bug in the undo itself lands here; the loop goes on regardless.
            log.exception("scheduling_cycle_abort_failed", pod=pod.key)
            if self.queue.where(pod.uid) in (None, "in-flight"):  # not put back already
                with contextlib.suppress(Exception):
                    self.queue.requeue(qp, error=True)

    def handle_scheduling_failure(
        self,
        fw: Framework,
        qp: QueuedPodInfo,
        status: Status,
        *,
        rejected_by: frozenset[str] = frozenset(),
        error: bool = False,
        backoff: bool = False,
        reason: str = "Unschedulable",
        started: float | None = None,
        nominated_node: str = "",
        clear_nomination: bool = False,
        diagnosis: Diagnosis | None = None,
        nominated_for_binding: str = "",
        binding: bool = False,
    ) -> None:
        """Put the pod back and report why; `started` is when its attempt began (default:
        the current scheduling cycle's start). `backoff`: not an error, but the pod waits out
        its backoff all the same, as one does (nothing it could be parked for would tell).
        `binding`: it failed in its binding cycle (its scheduling cycle had succeeded)."""
        if error:
            self.stats.errors += 1
        else:
            self.stats.unschedulable += 1
        message = status.message or "scheduling failed"
        log.info(
            "pod_unschedulable" if not error else "pod_scheduling_error",
            pod=qp.pod.key,
            profile=fw.profile,
            attempt=qp.attempts,
            message=message,
        )
        # A group member's failure may fail its group's attempt (v1.36's pod group cycle).
        self.cache.gangs.member_failed(qp.pod, status.plugin or "")
        self.groups.failed(
            fw, qp.pod, status, error=error, binding=binding, nominated=bool(nominated_node)
        )
        if qp.pod.scheduling_group is not None and not nominated_node and not clear_nomination:
            # A member its group's preemption (PodGroupPostFilter) nominated to a node.
            nominated_node = self.nominator.node_of(qp.pod.uid)
        deferred = _deferred(fw, qp.pod)
        current = self._current(qp.pod, deferred=deferred)
        if current is None:
            # Deleted, being deleted, or bound (by us after all, or by someone else) while
            # this attempt ran: nothing to retry, nobody to report to.
            self.queue.done(qp.pod.uid)
        else:
            self.queue.requeue(
                replace(qp, pod=current), rejected_by=rejected_by, error=error or backoff
            )
            if self.diagnoses is not None:
                self.diagnoses.record(
                    current,
                    fw.profile,
                    reason,
                    message,
                    attempts=qp.attempts,
                    rejected_by=rejected_by,
                    diagnosis=diagnosis,
                    names=self.cache.table.names,
                )
            if deferred:
                # A deferred resize stays bound and running: requeued, but no event, no
                # PodScheduled condition and no nomination (`handleSchedulingFailure`).
                log.debug("deferred_resize_requeued", pod=current.key, message=message)
            else:
                if nominated_for_binding and not current.nominated_node_name:
                    # Written by its binding cycle, not seen back yet: cleared all the same.
                    current = replace(current, nominated_node_name=nominated_for_binding)
                self.writer.failed(
                    current,
                    message,
                    fw.profile,
                    reason=reason,
                    nominated_node=nominated_node,
                    clear_nomination=clear_nomination,
                )
        result = "error" if error else "unschedulable"
        metrics.labelled(metrics.SCHEDULE_ATTEMPTS, result, fw.profile).inc()
        began = self._cycle_started if started is None else started
        metrics.labelled(metrics.SCHEDULING_ATTEMPT_DURATION, result, fw.profile).observe(
            time.perf_counter() - began
        )

    def _gone_meanwhile(self, pod: PodInfo) -> bool:
        if self.cache.has_pod(pod.uid) or self.queue.deleted_in_flight(pod.uid):
            return True
        return self.pods is not None and self._current(pod) is None

    def _current(self, pod: PodInfo, *, deferred: bool = False) -> PodInfo | None:
        """The informer's copy of `pod`, if it is still a pod of ours to schedule (bound
        as it is, for a `deferred` resize)."""
        if self.pods is None:
            return pod
        current = self.pods(pod.uid)
        if current is None or current.deleting or (current.assigned and not deferred):
            return None
        return current

    async def binding_cycle(self, job: BindingJob) -> None:
        """Never raises but for cancellation: the task group it runs in is the scheduler's."""
        try:
            await self._bind(job.fw, job.state, job.qp, job.node)
        except Exception:
            log.exception("binding_cycle_crashed", pod=job.qp.pod.key, node=job.node)

    async def _bind(self, fw: Framework, state: CycleState, qp: QueuedPodInfo, node: str) -> None:
        pod = qp.pod
        bind_started = time.perf_counter()
        slot = BindingSlot(self._bind_slots)
        state.write(BINDING_SLOT, slot)
        try:
            await self._nominate_for_binding(fw, state, pod, node)
            if fw.handle.waiting_pods.get(pod.uid) is not None:
                # A pod waiting on Permit (a gang's other members, say) holds its node but
                # no binding slot: waits never stop the scheduling of other pods.
                async with slot_released(state):
                    status = await fw.wait_on_permit(pod)
            else:
                status = SUCCESS
            if status.ok:
                status = await self._pre_bind(fw, state, pod, node)
            if status.ok:
                if self.binder is not None and self.lock_binds:
                    status = await self.binder.bind(fw, state, pod, node)
                else:
                    status = await fw.bind(state, pod, node)
        except asyncio.CancelledError:
            self.handle_binding_cycle_error(fw, state, qp, node, Status.error("binding cancelled"))
            raise
        except Exception as exc:
            log.exception("binding_cycle_failed", pod=pod.key, node=node)
            status = Status.error(f"binding failed: {exc}")
        finally:
            slot.release()
        done = time.perf_counter()
        metrics.labelled(metrics.BIND_DURATION, "success" if status.ok else "error").observe(
            done - bind_started
        )
        if not status.ok:
            self.handle_binding_cycle_error(fw, state, qp, node, status)
            return
        self.queue.done(pod.uid)
        if self.diagnoses is not None:
            self.diagnoses.forget(pod.uid)
        self.stats.scheduled += 1
        metrics.labelled(metrics.SCHEDULE_ATTEMPTS, "scheduled", fw.profile).inc()
        metrics.labelled(metrics.SCHEDULING_ATTEMPT_DURATION, "scheduled", fw.profile).observe(
            done - (state.read(_STARTED) or done)
        )
        if qp.initial_attempt_timestamp is not None:
            metrics.labelled(metrics.POD_SCHEDULING_SLI_DURATION, str(qp.attempts)).observe(
                max(self.queue.clock.now() - qp.initial_attempt_timestamp, 0.0)
            )
        if qp.flushed:
            log.debug(
                "pod_scheduled_after_flush", pod=pod.key, plugins=sorted(qp.unschedulable_plugins)
            )
            metrics.POD_SCHEDULED_AFTER_FLUSH.inc()
        fw.post_bind(state, pod, node)
        log.debug("pod_bound", pod=pod.key, node=node, profile=fw.profile, attempt=qp.attempts)
        self.writer.scheduled(pod, node, fw.profile)

    async def _nominate_for_binding(
        self, fw: Framework, state: CycleState, pod: PodInfo, node: str
    ) -> None:
        """kube-scheduler's NominatedNodeNameForExpectation: when Permit will make the pod
        wait or a PreBind plugin has work for it, its binding is not immediate, so the node
        is written as its nominated node first, for other components to count as taken."""
        if NOMINATED_NODE_NAME_FOR_EXPECTATION not in fw.handle.features:
            return
        waits = fw.handle.waiting_pods.get(pod.uid) is not None
        if waits and self.groups.active and pod.scheduling_group is not None:
            # A member of a pod group cycle (1.36 on) waits here for its siblings, where
            # kube-scheduler's cycle holds it before any binding cycle: none is nominated.
            waits = False
        if waits or fw.pre_bind_pre_flight(state, pod, node):
            state.write(_NOMINATED_FOR_BINDING, node)
            await self.writer.nominate_for_binding(pod, node)

    async def _pre_bind(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind. From 1.36 a pod some PreBind plugin has work for is registered as in
        PreBind meanwhile (`bindingCycle`'s `AddPodInPreBind`): preemption cancels it there
        rather than deleting it, and its cycle fails with the cancellation's cause. Without
        NominatedNodeNameForExpectation no PreBindPreFlight runs and every pod is registered
        (kube-scheduler's PreFlight status is then nil, which counts as success)."""
        if not fw.handle.features.since(1, 36):
            return await fw.pre_bind(state, pod, node)
        pre_flight = NOMINATED_NODE_NAME_FOR_EXPECTATION in fw.handle.features
        if pre_flight and not fw.pre_bind_pre_flight(state, pod, node):
            return await fw.pre_bind(state, pod, node)
        registry = fw.handle.pods_in_pre_bind
        entry = registry.add(pod.uid)
        try:
            return await entry.run(fw.pre_bind(state, pod, node))
        finally:
            registry.remove(entry)

    def handle_binding_cycle_error(
        self, fw: Framework, state: CycleState, qp: QueuedPodInfo, node: str, status: Status
    ) -> None:
        """The one failure path of a binding cycle."""
        pod = qp.pod
        self.stats.bind_failures += 1
        fw.unreserve(state, pod, node)
        if self.cache.is_assumed(pod.uid):
            self.cache.forget(pod)
        rejected = status.rejected
        # Pending (another instance's node lock): no plugin rejected the pod, so it goes
        # back with backoff, never popped early (kube-scheduler's way with a PreBind
        # rejection), reported Unschedulable, not as an error.
        pending = status.code is Code.PENDING
        self.handle_scheduling_failure(
            fw,
            qp,
            status,
            error=not rejected,
            backoff=pending,
            rejected_by=frozenset({status.plugin}) if rejected and not pending else frozenset(),
            reason="Unschedulable" if rejected else "SchedulerError",
            started=state.read(_STARTED),
            # kube-scheduler's `clearNominatedNode`: a failed binding cycle leaves the pod
            # nominated nowhere (its own nomination for the binding included, even if the
            # informer has not shown it yet).
            clear_nomination=True,
            nominated_for_binding=state.read(_NOMINATED_FOR_BINDING) or "",
            binding=True,
        )
        # The node has room again: pods waiting for room may fit now.
        self.queue.move_all(ClusterEvent.ASSIGNED_POD_DELETE)


def _deferred(fw: Framework, pod: PodInfo) -> bool:
    """`pod` is a bound pod whose in-place resize the kubelet deferred, scheduled again to
    make room for it (InPlacePodVerticalScalingSchedulerPreemption, 1.37)."""
    return pod.resize_deferred and SCHEDULER_PREEMPTION_FOR_RESIZE in fw.handle.features
