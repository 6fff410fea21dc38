"""Coscheduling and GangScheduling: a group's pods are placed all together or not at all.

Both hold a member until its group has enough pods (PreEnqueue), count members as they are
reserved, and make each wait on Permit until the group's quorum is reserved or bound; then
every waiting member is allowed at once. A waiting member holds its node (it is assumed) but no
binding slot, so waiting groups never stop other pods from being scheduled.

* **Coscheduling** drives scheduler-plugins' PodGroup (`scheduling.x-k8s.io/pod-group` label):
  quorum `minMember`, wait `scheduleTimeoutSeconds` (else `permitWaitingTimeSeconds`, 60 s).
  Beyond that plugin, it does not let a doomed group hold capacity: PreFilter rejects a group
  whose `minResources` exceed what the cluster has free, and, once a member was found
  unschedulable (PostFilter, after preemption had its chance), the group's waiting members
  are rejected together and its other members are turned away at PreFilter until that member
  gets through; a group doomed, or timed out, backs off as a whole. The PodGroup's status
  counts the members scheduled (kept current as members bind or go) and carries a
  `PodGroupScheduled` condition; it and Events on the PodGroup say in one line why a group
  failed, or that it still waits for members.
* **GangScheduling** (`ascheduler.plugins.gangscheduling`) drives kube-scheduler's own
  groups: the Workload API's (v1.35) and the `scheduling.k8s.io` PodGroups (v1.36 on).

A member rejected while waiting (timeout, deletion, a sibling's failure) takes its waiting
siblings with it: they are unreserved together and retried when the group may fit again. Once
a group reached its quorum, a member whose bind fails is retried on its own.
"""

from __future__ import annotations

import abc
import asyncio
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import structlog

from ascheduler.durations import go_duration
from ascheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    GangsView,
    GangView,
    GateKeysPlugin,
    Handle,
    NodeTable,
    PermitPlugin,
    PluginArgsError,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    ReservePlugin,
    Status,
    WaitingPod,
)
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import (
    POD_GROUP,
    POD_GROUP_LABEL,
    PodGroupSpec,
    group_key,
    object_of,
)

log = structlog.get_logger(__name__)

NAME: Final = "Coscheduling"

#: kube-scheduler v1.35's words (GangScheduling's, `ascheduler.plugins.gangscheduling`).
WAITING_ON_PERMIT: Final = "waiting for minCount pods from a gang to be waiting on permit"

_MEMBER_EVENTS: Final = frozenset({ClusterEvent.GANG_MEMBER_ADD})
#: The condition a PodGroup's status carries (the name and reasons of kube-scheduler's
#: PodGroup status from v1.36): True once the quorum is placed; False, reason Unschedulable,
#: with the one line that says why not.
POD_GROUP_SCHEDULED: Final = "PodGroupScheduled"
#: A group doomed N rounds in a row is tried again after min(1 s * 2^(N-1), 10 s): the pace of
#: kube-scheduler's pod backoff, for the group as a whole (the members' own backoff does not
#: hold them back while nothing else waits, and they wake each other).
DOOM_BACKOFF_INITIAL: Final = 1.0
DOOM_BACKOFF_MAX: Final = 10.0
#: A PodGroup's status is written at most once per this many seconds (the latest wins).
STATUS_INTERVAL: Final = 1.0
#: A group still short of its quorum this long after it started waiting for members is
#: reported as waiting (one that fills up in a burst never is).
WAITING_REPORT_SECONDS: Final = 5.0
#: Events that add room: they may let a group fit that the cluster could not hold.
_CAPACITY_EVENTS: Final = frozenset(
    {ClusterEvent.NODE_ADD, ClusterEvent.NODE_ALLOCATABLE, ClusterEvent.ASSIGNED_POD_DELETE}
)


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """scheduler-plugins' `CoschedulingArgs`."""

    #: How long members wait for the rest when the PodGroup sets no scheduleTimeoutSeconds.
    permit_waiting_time_seconds: int = 60
    #: How long a group that failed is turned away before it is tried again (0: not at all).
    pod_group_backoff_seconds: int = 0

    def __post_init__(self) -> None:
        if self.permit_waiting_time_seconds <= 0:
            raise PluginArgsError("permitWaitingTimeSeconds: must be greater than 0")
        if self.pod_group_backoff_seconds < 0:
            raise PluginArgsError("podGroupBackoffSeconds: must not be negative")


@dataclass(frozen=True, slots=True)
class _Policy:
    minimum: int
    timeout: float
    #: What the group is called in messages (`PodGroup shop/train`).
    label: str


class _Reporter:
    """Events (and, for PodGroups, the status) written about groups, each at most once per
    change of what they say; writes run in the background and a failure is only logged."""

    def __init__(self, handle: Handle, component: str) -> None:
        self.handle = handle
        self.component = component
        self._tasks: set[asyncio.Task[None]] = set()
        self._said: dict[str, str] = {}
        self._status: dict[str, tuple[bool, int, str, str]] = {}
        #: group key -> the status to write next (its writer runs), and the PodGroup
        self._next: dict[str, tuple[PodGroupSpec, tuple[bool, int, str, str]]] = {}

    def _spawn(self, work: Any) -> bool:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no loop (a unit test of the cycle alone)
            work.close()
            return False
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def event(self, gang: GangView, kind: str, reason: str, note: str) -> None:
        if self.handle.kube is None or self._said.get(gang.key) == note:
            return
        self._said[gang.key] = note
        self._prune()
        self._spawn(self._event(gang, kind, reason, note))

    def status(
        self, gang: GangView, spec: PodGroupSpec, placed: bool, reason: str, line: str
    ) -> None:
        """The PodGroup's `status`: `phase` (Scheduled once the quorum is placed, else
        Pending), `scheduled` (members placed) and a `PodGroupScheduled` condition (True, or
        False with `reason`) whose message is `line`."""
        said = (placed, gang.placed(), reason, line)
        if self.handle.kube is None:
            return
        if gang.key in self._next:  # its writer runs: it writes the latest
            self._next[gang.key] = (spec, said)
            return
        if self._status.get(gang.key) == said:
            return
        self._next[gang.key] = (spec, said)
        self._prune()
        if not self._spawn(self._write_status(gang.key)):
            del self._next[gang.key]

    def recount(self, gang: GangView, spec: PodGroupSpec) -> None:
        """The status said last, with the members placed now (members bound after the
        group was admitted, or deleted)."""
        said = self._next.get(gang.key, (spec, self._status.get(gang.key)))[1]
        if said is not None and said[1] != gang.placed():
            self.status(gang, spec, said[0], said[2], said[3])

    def said_status(self, gang: GangView) -> tuple[bool, int, str, str] | None:
        pending = self._next.get(gang.key)
        return pending[1] if pending is not None else self._status.get(gang.key)

    async def _write_status(self, key: str) -> None:
        """Write the group's latest status, then at most one more per STATUS_INTERVAL
        however often it changes (a large group binding member by member)."""
        try:
            while (pending := self._next.get(key)) is not None:
                spec, said = pending
                if self._status.get(key) == said:
                    break
                self._status[key] = said
                await self._patch_status(spec, *said)
                await asyncio.sleep(STATUS_INTERVAL)
        finally:
            self._next.pop(key, None)

    def _prune(self) -> None:
        """Drop what was said about groups that are gone, once there is more of it than
        groups (a group made again under the same name is told about afresh)."""
        gangs = self.handle.gangs
        if gangs is None or len(self._said) + len(self._status) <= 2 * len(gangs) + 64:
            return
        for memory in (self._said, self._status):
            for key in [k for k in memory if gangs.get(k) is None and k not in self._next]:
                del memory[key]

    async def _event(self, gang: GangView, kind: str, reason: str, note: str) -> None:
        kube = self.handle.kube
        assert kube is not None
        namespace, _, name = object_of(gang.key).partition("/")
        group, version = (
            ("scheduling.x-k8s.io", "v1alpha1")
            if gang.key.startswith(POD_GROUP)
            else ("scheduling.k8s.io", "v1alpha1")
        )
        kind_name = "PodGroup" if gang.key.startswith(POD_GROUP) else "Workload"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{secrets.token_hex(8)}", "namespace": namespace},
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "reportingController": self.component,
            "reportingInstance": self.component,
            "action": "Scheduling",
            "reason": reason,
            "type": kind,
            "note": note[:1024],
            "regarding": {
                "apiVersion": f"{group}/{version}",
                "kind": kind_name,
                "namespace": namespace,
                "name": name,
            },
        }
        try:
            await kube.request(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body
            )
        except Exception as exc:  # reporting never fails scheduling
            log.warning("group_event_failed", group=gang.key, error=str(exc))

    async def _patch_status(
        self, spec: PodGroupSpec, placed: bool, scheduled: int, reason: str, line: str
    ) -> None:
        kube = self.handle.kube
        assert kube is not None
        path = (
            f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{spec.namespace}/podgroups/"
            f"{spec.name}/status"
        )
        condition = {
            "type": POD_GROUP_SCHEDULED,
            "status": "True" if placed else "False",
            "reason": reason,
            "message": line[:32768],
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        status = {
            "phase": "Scheduled" if placed else "Pending",
            "scheduled": scheduled,
            "conditions": [condition],
        }
        try:
            await kube.request(
                "PATCH",
                path,
                body={"status": status},
                content_type="application/merge-patch+json",
            )
        except Exception as exc:
            log.warning("group_status_failed", group=spec.key, error=str(exc))


class _GangPlugin(
    PreEnqueuePlugin,
    GateKeysPlugin,
    QueueingHintPlugin,
    EnqueueExtensions,
    ReservePlugin,
    PermitPlugin,
):
    """What both conventions share: membership, reservations, Permit, sibling rejection."""

    #: POD_GROUP or WORKLOAD: the groups this plugin drives.
    kind: str = ""
    #: Every member waits until the group's one deadline (kube-scheduler's), rather than the
    #: whole timeout from its own Permit (scheduler-plugins'; the first to time out then
    #: takes its siblings with it).
    shared_deadline = False

    def __init__(self, handle: Handle, clock: Callable[[], float] = time.monotonic) -> None:
        self.handle = handle
        self.gangs: GangsView = handle.gangs
        self.clock = clock
        self.reporter = _Reporter(handle, handle.profile or "ascheduler")
        #: Runs a callback after a delay (the event loop's `call_later` by default).
        self.later: Callable[[float, Callable[[], None]], object] = _call_later
        #: Groups with a waiting report due (short of their quorum since then).
        self._short: set[str] = set()
        self.gangs.watchers.append(self._changed)

    # -- what subclasses say about a pod's group -----------------------------------------

    def _key(self, pod: PodInfo) -> str | None:
        key = group_key(pod)
        return key if key is not None and key.startswith(self.kind) else None

    @abc.abstractmethod
    def _policy(self, pod: PodInfo) -> _Policy | Status | None:
        """The group's quorum and wait; a Status holding the pod when its group cannot be
        read; None when the pod is in no group of ours (or one without a gang policy)."""

    @abc.abstractmethod
    def _object_events(self) -> frozenset[ClusterEvent]:
        """The events of the group objects this convention reads."""

    # -- queueing ------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        policy = self._policy(pod)
        if policy is None:
            return SUCCESS
        if isinstance(policy, Status):
            return policy
        gang = self.gangs.of(pod)
        if gang is not None:
            gang.quorum = policy.minimum
        ready = self._members(gang) if gang is not None else 0
        if ready < policy.minimum:
            return self._too_few(pod, policy, ready)
        return SUCCESS

    def _members(self, gang: GangView) -> int:
        """The members that count toward the quorum before any is scheduled."""
        return gang.ready()

    @abc.abstractmethod
    def _too_few(self, pod: PodInfo, policy: _Policy, ready: int) -> Status:
        """The status holding a pod whose group has fewer than its quorum ready."""

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return _MEMBER_EVENTS | self._object_events()

    def gate_keys(self, pod: PodInfo, event: ClusterEvent) -> frozenset[str] | None:
        if event is ClusterEvent.GANG_MEMBER_ADD:
            key = self._key(pod)
            return frozenset() if key is None else frozenset({key})
        if event in self._object_events():
            key = self._key(pod)
            return frozenset() if key is None else frozenset({object_of(key)})
        return frozenset()

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        key = self._key(pod)
        if key is None:
            return False
        if event is ClusterEvent.GANG_MEMBER_ADD:
            return isinstance(new, GangView) and new.key == key
        if event in self._object_events():
            obj = new if new is not None else old
            return getattr(obj, "key", None) == object_of(key)
        return True

    # -- reservations ----------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if self._key(pod) is not None:
            self.gangs.assume(pod)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if self._key(pod) is None:
            return
        gang = self.gangs.of(pod)
        was_waiting = gang is not None and pod.uid in gang.waiting
        # (Read before `forget`, which drops the deadline with the last member waiting.)
        timed_out = (
            gang is not None and gang.deadline is not None and self.clock() >= gang.deadline - 0.05
        )
        self.gangs.forget(pod)
        if gang is None or not was_waiting:
            return
        # Rejected while it waited (timed out, deleted, a sibling failed): its siblings cannot
        # make the quorum without it now; they give their nodes back together.
        policy = self._policy(pod)
        minimum = policy.minimum if isinstance(policy, _Policy) else 0
        if timed_out and isinstance(policy, _Policy):
            why = (
                f"rejected due to timeout after waiting {go_duration(policy.timeout)} at "
                f"plugin {self.name}"
            )
        else:
            why = self._rejected_with(gang, pod, minimum)
        self.reject_waiting(gang, why)
        if timed_out and isinstance(policy, _Policy):
            self._back_off(gang, why)
            self._report(
                gang,
                policy,
                "GangTimeout",
                f"timed out after {go_duration(policy.timeout)} with "
                f"{len(gang.assigned)}/{minimum} members bound; waiting for "
                f"{_names(gang, gang.unscheduled())}",
            )

    def _rejected_with(self, gang: GangView, pod: PodInfo, minimum: int) -> str:
        """Why a waiting member's siblings are let go when it is rejected (not timed out)."""
        return f"rejected with member {pod.name}: {gang.placed()}/{minimum} members placed"

    def reject_waiting(self, gang: GangView, why: str) -> None:
        for w in self._let_go(gang):
            w.reject(self.name, why)

    def _let_go(self, gang: GangView) -> list[WaitingPod]:
        """The group's members waiting on Permit, no longer counted as waiting."""
        waiting = [w for uid in gang.waiting if (w := self.handle.waiting_pods.get(uid))]
        gang.waiting.clear()
        gang.deadline = None
        return waiting

    # -- reports on the group's pods as the informer shows them ----------------------------

    def _changed(self, gang: GangView) -> None:
        """A group's pods changed: a group short of its quorum is reported as waiting once it
        has been short for WAITING_REPORT_SECONDS; an admitted one's count kept current."""
        if not gang.key.startswith(self.kind) or not gang.pods:
            return
        pod = next(iter(gang.pods.values()))
        if self.handle.profile and pod.scheduler_name != self.handle.profile:
            return  # another profile's group (every profile's plugin watches every group)
        policy = self._policy(pod)
        if not isinstance(policy, _Policy):
            return
        if gang.admitted or gang.placed():
            self._recount(gang)
        elif self._members(gang) < policy.minimum and gang.key not in self._short:
            self._short.add(gang.key)
            self.later(WAITING_REPORT_SECONDS, lambda: self._report_waiting(gang.key))

    def _report_waiting(self, key: str) -> None:
        self._short.discard(key)
        gang = self.gangs.get(key)
        if gang is None or gang.admitted or gang.placed() or not gang.pods:
            return
        policy = self._policy(next(iter(gang.pods.values())))
        if not isinstance(policy, _Policy):
            return
        have = self._members(gang)
        if have >= policy.minimum:
            return
        self._report(
            gang,
            policy,
            "GangWaiting",
            f"{have}/{policy.minimum} members exist; waiting for "
            f"{policy.minimum - have} more before any is placed",
        )

    def _recount(self, gang: GangView) -> None:
        """Keep the group's reported count of placed members current (PodGroups)."""

    def _back_off(self, gang: GangView, why: str) -> None:
        """A group whose round failed as a whole (timed out) waits before its next one."""

    # -- Permit ----------------------------------------------------------------------------

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        policy = self._policy(pod)
        if policy is None:
            return SUCCESS, 0.0
        if isinstance(policy, Status):
            return Status.error(policy.message), 0.0
        gang = self.gangs.of(pod)
        if gang is None:
            return SUCCESS, 0.0
        if gang.placed() >= policy.minimum:
            gang.admitted = True
            gang.failed = None
            gang.dooms = 0
            waiting = self._let_go(gang)
            for w in waiting:
                w.allow(self.name)
            if waiting:
                self._admitted(gang, policy)
            return SUCCESS, 0.0
        now = self.clock()
        first = not gang.waiting
        deadline = gang.deadline
        if deadline is None or deadline <= now:
            # The whole timeout from now (`now + t - now` need not be `t` in floats).
            gang.deadline, deadline = now + policy.timeout, None
        gang.waiting.add(pod.uid)
        if first:
            # The first to wait brings back siblings that were turned away earlier.
            self.handle.wake(gang.unscheduled())
        wait = deadline - now if self.shared_deadline and deadline is not None else policy.timeout
        return Status(Code.WAIT, (self._wait_message(gang, policy),)), wait

    def _wait_message(self, gang: GangView, policy: _Policy) -> str:
        return WAITING_ON_PERMIT

    def _admitted(self, gang: GangView, policy: _Policy) -> None:
        self._report(
            gang,
            policy,
            "GangScheduled",
            f"{gang.placed()}/{policy.minimum} members placed together",
        )

    def _report(self, gang: GangView, policy: _Policy, reason: str, line: str) -> None:
        """Tell the group's object what happened to it: an event (`GangScheduled` and
        `GangWaiting` are Normal, anything else a Warning) saying `LABEL: line`. A waiting
        group's event is told once, however its count changes."""
        kind = "Normal" if reason in ("GangScheduled", "GangWaiting") else "Warning"
        note = f"{policy.label}: {line}"
        if reason == "GangWaiting":
            note = f"{policy.label}: waiting for {policy.minimum} members before any is placed"
        self.reporter.event(gang, kind, reason, note)


def _names(gang: GangView, uids: Iterable[str], limit: int = 5) -> str:
    names = sorted(gang.pods[u].name for u in uids if u in gang.pods)
    if not names:
        return "no pod"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


class Coscheduling(_GangPlugin, PreFilterPlugin, PostFilterPlugin):
    name = NAME
    kind = POD_GROUP

    def __init__(
        self,
        args: CoschedulingArgs,
        handle: Handle,
        clock: Callable[[], float] = time.monotonic,
        later: Callable[[float, Callable[[], None]], object] | None = None,
    ) -> None:
        super().__init__(handle, clock)
        self.args = args
        if later is not None:
            self.later = later

    def _spec(self, pod: PodInfo) -> PodGroupSpec | None:
        label = pod.labels.get(POD_GROUP_LABEL) if pod.labels else None
        if not label or pod.workload_ref is not None:
            return None
        return self.gangs.pod_groups.get(f"{pod.namespace}/{label}")

    def _policy(self, pod: PodInfo) -> _Policy | Status | None:
        key = self._key(pod)
        if key is None:
            return None
        spec = self._spec(pod)
        name = object_of(key)
        if spec is None:
            return Status.unschedulable(
                f"waiting for PodGroup {name} to be created", resolvable=False
            )
        if spec.errors:
            return Status.unschedulable(
                f"PodGroup {name} is invalid: {'; '.join(spec.errors)}", resolvable=False
            )
        timeout = spec.schedule_timeout or float(self.args.permit_waiting_time_seconds)
        return _Policy(spec.min_member, timeout, f"PodGroup {name}")

    def _object_events(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.POD_GROUP_ADD, ClusterEvent.POD_GROUP_UPDATE})

    def events_to_register(self) -> frozenset[ClusterEvent]:
        # Room appearing may let a group the cluster could not hold fit.
        return super().events_to_register() | _CAPACITY_EVENTS

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event not in _CAPACITY_EVENTS:
            return super().queueing_hint(pod, event, old, new)
        if self._key(pod) is None:
            return False
        # Room appearing helps only a group the capacity check turned away. A group waiting
        # for members is woken by the member arriving; one a member doomed this round, by that
        # member (it is parked under the plugin that rejected it, and wakes its siblings when
        # it waits on Permit or is deleted).
        gang = self.gangs.of(pod)
        if gang is None:
            return True
        if gang.failed is not None and gang.failed[0] != pod.uid:
            return False
        return gang.quorum is None or gang.ready() >= gang.quorum

    def _too_few(self, pod: PodInfo, policy: _Policy, ready: int) -> Status:
        return Status.unschedulable(
            f"{policy.label} has {ready} of the {policy.minimum} pods it needs (minMember)",
            resolvable=False,
        )

    # -- PreFilter: turn away a group that cannot fit ------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        policy = self._policy(pod)
        if policy is None:
            return None, SUCCESS
        if isinstance(policy, Status):
            return None, policy
        gang = self.gangs.of(pod)
        if gang is None:
            return None, SUCCESS
        if gang.admitted and gang.placed() >= policy.minimum:
            return None, SUCCESS
        now = self.clock()
        if gang.failed_until > now:
            why = f" ({gang.backoff_why})" if gang.backoff_why else ""
            return None, Status.unschedulable(
                f"{policy.label} failed recently{why}; retrying in "
                f"{go_duration(round(gang.failed_until - now))}",
                resolvable=False,
            )
        ready = gang.ready()
        if ready < policy.minimum:
            return None, self._too_few(pod, policy, ready)
        if gang.failed is not None:
            uid, member, why = gang.failed
            if uid == pod.uid:
                if not state.dry_run:
                    gang.failed = None  # the member that failed is tried again: so is the group
            elif uid in gang.pods and uid not in gang.assigned:
                return None, Status.unschedulable(
                    f"{gang.placed()}/{policy.minimum} members of {policy.label} fit; "
                    f"member {member}: {why}",
                    resolvable=False,
                )
            elif not state.dry_run:
                gang.failed = None
        spec = self._spec(pod)
        if spec is not None and spec.min_resources and gang.placed() == 0:
            gap = _resource_gap(spec, policy.minimum, nodes)
            if gap:
                line = f"needs more than the cluster has free (minResources): short of {gap}"
                if not state.dry_run:
                    self._report(gang, policy, "GangUnschedulable", line)
                return None, Status.unschedulable(f"{policy.label} {line}", resolvable=False)
        return None, SUCCESS

    # -- PostFilter: a member that fits nowhere dooms its group's round ------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        policy = self._policy(pod)
        gang = self.gangs.of(pod)
        if not isinstance(policy, _Policy) or gang is None:
            return PostFilterResult(Status(Code.UNSCHEDULABLE, (), self.name))
        if gang.placed() >= policy.minimum or diagnosis.prefilter_status is not None:
            # Admitted already (a straggler), or turned away before any node was looked at.
            return PostFilterResult(Status(Code.UNSCHEDULABLE, (), self.name))
        why = diagnosis.message()
        if state.dry_run:
            return PostFilterResult(
                Status(Code.UNSCHEDULABLE, (f"{policy.label} rejected as a whole",), self.name)
            )
        gang.failed = (pod.uid, pod.name, why)
        line = f"{gang.placed()}/{policy.minimum} members fit; member {pod.name}: {why}"
        self._back_off(gang, f"member {pod.name} fit nowhere")
        self.reject_waiting(gang, line)
        self._report(gang, policy, "GangUnschedulable", line)
        return PostFilterResult(
            Status(Code.UNSCHEDULABLE, (f"{policy.label} rejected as a whole",), self.name)
        )

    def _back_off(self, gang: GangView, why: str) -> None:
        """The whole group waits before its next round, longer each time a round fails
        (doomed by a member, or timed out: `why`); then its members are woken together."""
        gang.backoff_why = why
        gang.dooms += 1
        pace = min(DOOM_BACKOFF_INITIAL * 2.0 ** (gang.dooms - 1), DOOM_BACKOFF_MAX)
        delay = max(pace, float(self.args.pod_group_backoff_seconds))
        gang.failed_until = self.clock() + delay
        self.later(delay + 0.05, lambda: self.handle.wake(gang.unscheduled()))

    # -- status ----------------------------------------------------------------------------

    def _report(self, gang: GangView, policy: _Policy, reason: str, line: str) -> None:
        """The event, and the PodGroup's status with its `PodGroupScheduled` condition."""
        super()._report(gang, policy, reason, line)
        spec = self.gangs.pod_groups.get(object_of(gang.key))
        if spec is None:
            return
        placed = reason == "GangScheduled"
        self.reporter.status(gang, spec, placed, "Scheduled" if placed else "Unschedulable", line)

    def _recount(self, gang: GangView) -> None:
        spec = self.gangs.pod_groups.get(object_of(gang.key))
        if spec is not None:
            self.reporter.recount(gang, spec)


def _call_later(delay: float, callback: Callable[[], None]) -> object:
    try:
        return asyncio.get_running_loop().call_later(delay, callback)
    except RuntimeError:  # no loop (a unit test of the cycle alone)
        return None


def _resource_gap(spec: PodGroupSpec, members: int, nodes: NodeTable) -> str:
    """What the group's minResources (and `members` pods) lack against the free room of all
    schedulable nodes together, as `cpu 1500m, nvidia.com/gpu 2`; "" when nothing."""
    if nodes.n == 0:
        return "every resource (no nodes)"
    usable = ~nodes.unschedulable
    want = dict(spec.min_resources)
    want["pods"] = max(want.get("pods", 0), members)
    short: list[str] = []
    for name, amount in sorted(want.items()):
        row = nodes.resource_row(name)
        have = 0 if row is None else int(np.clip(nodes.free[row][usable], 0, None).sum())
        if have < amount:
            gap = amount - have
            short.append(f"{name} {gap}m" if name == "cpu" else f"{name} {gap}")
    return ", ".join(short)


def new(args: CoschedulingArgs, handle: Handle) -> Coscheduling:
    return Coscheduling(args, handle)


REGISTRATION: Final = Registration(NAME, new, CoschedulingArgs, default_weight=1)
