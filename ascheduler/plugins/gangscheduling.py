"""GangScheduling: kube-scheduler's own pod groups, placed all or nothing.

* **v1.35** (gate `GangScheduling`): a pod's `spec.workloadRef` names a Workload
  (`scheduling.k8s.io/v1alpha1`) and one of its pod groups; a group with a `gang` policy needs
  `minCount` pods. Members are held (PreEnqueue) until the group has that many pods, then each
  waits on Permit until `minCount` are reserved or bound, for at most 5 minutes, all of them
  until the group's one deadline. The Workload has no status; Events on it report the group.
* **v1.36 and v1.37** (gate `GangScheduling` in 1.36, `GenericWorkload` in 1.37, where the
  GangScheduling gate is gone): a pod's `spec.schedulingGroup.podGroupName` names a PodGroup
  object (`scheduling.k8s.io/v1alpha2`, `v1beta1` in 1.37) whose `schedulingPolicy` is `gang`
  or `basic`. kube-scheduler schedules a group's pods in one *pod group cycle*: each member is
  tried in turn, those that fit wait on Permit, and unless the quorum is reached in that cycle
  no member is placed: the members that fit are failed with `pod group is unschedulable,
  waiting for minCount pods from a gang to be scheduled`, the others with their own reasons.
  In v1.37 the cycle stops as soon as the members left cannot make the quorum (GangScheduling's
  PlacementFeasible), no member runs PostFilter (the group's PodGroupPostFilter, workload-aware
  preemption, runs instead), and the members failed with the group say `pod group is
  unschedulable, minCount (M) cannot be satisfied: S scheduled, R remaining, pod group
  preemption: ...`; and a gang is queued as one entity, held while any of its members is
  gated (1.36 tries the others, and fails them with the group).
  Here the members come up together as there (`PodGroupCycle.members`: the queued siblings
  with the first, in kube's order, each popped as its turn comes) and are tried one after the
  other, the first ones waiting on Permit; when a member fails while the rest can no longer
  make the quorum, the members waiting on Permit are let go with kube's words, and so is any
  member of the same attempt that reaches Permit later (until the member that failed is
  tried again or goes); in v1.37 the members after it are not tried
  (`PodGroupCycle.stopped`). A `basic` group is no gang: its pods are scheduled one by one.
  A failed group's line ends with what the profile's PodGroupPostFilter plugins say
  (`Handle.pod_group_post_filter`): from 1.37 DefaultPreemption's workload-aware preemption,
  which may evict victims and nominate the members (`ascheduler.plugins.grouppreemption`).

What both share with Coscheduling (membership, reservations, waiting, sibling rejection) is
`ascheduler.plugins.coscheduling._GangPlugin`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from ascheduler.features import (
    GANG_SCHEDULING,
    GENERIC_WORKLOAD,
)
from ascheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    GangView,
    Handle,
    NoArgs,
    Registration,
    Status,
)
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SCHEDULING_GROUP, WORKLOAD, SchedulingGroup
from ascheduler.plugins.coscheduling import WAITING_ON_PERMIT, _GangPlugin, _Policy

NAME: Final = "GangScheduling"

#: kube-scheduler's gang timeout (`permitTimeoutDuration`, 5 minutes in every release).
WORKLOAD_TIMEOUT: Final = 300.0
#: The feature gate GangScheduling answers to in v1.35 and v1.36 (removed in v1.37, where
#: `GenericWorkload` puts the plugin in the default profile).
GANG_GATE: Final = GANG_SCHEDULING

#: kube-scheduler's words: v1.35 (Workloads).
WAITING_FOR_WORKLOAD: Final = "waiting for pods's workload {!r} to appear in scheduling queue"
NO_POD_GROUP: Final = "pod group {!r} doesn't exist for a workload {!r}"
#: Every release's (PreEnqueue).
WAITING_FOR_MIN_COUNT: Final = "waiting for minCount pods from a gang to appear in scheduling queue"
#: v1.36 on (PodGroups): PreEnqueue (Go's %q of the name), Permit, and what the pod group
#: cycle says of a member that fit when its group did not: `errPodGroupUnschedulable` joined
#: with the member's Permit status, the waiting plugin's message with the reason the framework
#: appends to a wait (`RunPermitPlugins`, v1.36 on).
WAITING_FOR_POD_GROUP: Final = 'waiting for pods\'s pod group "{}" to appear in scheduling queue'
WAITING_TO_BE_SCHEDULED: Final = "waiting for minCount pods from a gang to be scheduled"
PERMIT_WAIT: Final = "one or more plugins asked to wait and no plugin rejected pod"
GROUP_UNSCHEDULABLE: Final = f"pod group is unschedulable, {WAITING_TO_BE_SCHEDULED}, {PERMIT_WAIT}"
#: v1.37: GangScheduling's PlacementFeasible verdict (the members the pod group cycle has not
#: tried are told it alone), and what the members tried are told: it, then the pod group
#: preemption's.
OUT_OF_REACH: Final = "minCount ({}) cannot be satisfied: {} scheduled, {} remaining"
CANNOT_BE_SATISFIED: Final = f"pod group is unschedulable, {OUT_OF_REACH}"


class GangScheduling(_GangPlugin):
    name = NAME
    kind = WORKLOAD
    shared_deadline = True

    def __init__(self, handle: Handle, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(handle, clock)
        features = handle.features
        #: From v1.36 the groups are PodGroup objects named by `spec.schedulingGroup`.
        self.pod_groups = features.since(1, 36)
        if self.pod_groups:
            self.kind = SCHEDULING_GROUP
            self.gangs.failure_watchers.append(self._member_failed)
        self.enabled = (GENERIC_WORKLOAD if features.since(1, 37) else GANG_GATE) in features
        #: v1.37 watches PodGroup updates too (minCount became mutable).
        self._events = (
            frozenset({ClusterEvent.WORKLOAD_ADD})
            if not self.pod_groups
            else frozenset({ClusterEvent.SCHEDULING_GROUP_ADD})
            | (
                frozenset({ClusterEvent.SCHEDULING_GROUP_UPDATE})
                if features.since(1, 37)
                else frozenset()
            )
        )

    # -- the group of a pod ----------------------------------------------------------------

    def _policy(self, pod: PodInfo) -> _Policy | Status | None:
        if not self.enabled:
            return None
        if self.pod_groups:
            return self._pod_group_policy(pod)
        ref = pod.workload_ref
        if ref is None:
            return None
        workload = self.gangs.workloads.get(f"{pod.namespace}/{ref[0]}")
        if workload is None:
            return Status.unschedulable(WAITING_FOR_WORKLOAD.format(ref[0]), resolvable=False)
        if ref[1] not in workload.groups:
            return Status.unschedulable(
                NO_POD_GROUP.format(ref[1], workload.name), resolvable=False
            )
        minimum = workload.groups[ref[1]]
        if minimum is None:
            return None  # a basic policy: no gang
        return _Policy(minimum, WORKLOAD_TIMEOUT, f"Workload {workload.key} pod group {ref[1]}")

    def _pod_group_policy(self, pod: PodInfo) -> _Policy | Status | None:
        name = pod.scheduling_group
        if name is None:
            return None
        group = self.gangs.scheduling_groups.get(f"{pod.namespace}/{name}")
        if group is None:
            return Status.unschedulable(WAITING_FOR_POD_GROUP.format(name), resolvable=False)
        if group.errors:
            return Status.unschedulable(
                f"PodGroup {group.key} is invalid: {'; '.join(group.errors)}", resolvable=False
            )
        if group.min_count is None:
            return None  # a basic policy: no gang
        return _Policy(group.min_count, WORKLOAD_TIMEOUT, f"PodGroup {group.key}")

    def _object_events(self) -> frozenset[ClusterEvent]:
        return self._events

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event is ClusterEvent.SCHEDULING_GROUP_UPDATE:
            # Only a gang's minCount going down may let its held members in (v1.37).
            if not (isinstance(old, SchedulingGroup) and isinstance(new, SchedulingGroup)):
                return super().queueing_hint(pod, event, old, new)
            if old.min_count is None or new.min_count is None:
                return False
            if new.min_count >= old.min_count:
                return False
        return super().queueing_hint(pod, event, old, new)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        status = super().pre_enqueue(pod)
        if not status.ok or not self.handle.features.since(1, 37):
            return status
        gang = self.gangs.of(pod)
        if gang is None or not gang.gated or not isinstance(self._policy(pod), _Policy):
            return status
        # 1.37 queues a pod group as one entity, held while any member is gated (its
        # members are not tried without it, as in 1.36 they were and failed).
        gated = sorted(p.name for p in gang.pods.values() if p.scheduling_gates)
        return Status.unschedulable(
            f"waiting for the scheduling gates of pod group members: {', '.join(gated)}",
            resolvable=False,
        )

    def _too_few(self, pod: PodInfo, policy: _Policy, ready: int) -> Status:
        return Status.unschedulable(WAITING_FOR_MIN_COUNT, resolvable=False)

    def _members(self, gang: GangView) -> int:
        return len(gang.pods)  # kube-scheduler counts every pod of the group, gated or not

    # -- Permit, and the pod group cycle's verdict (v1.36 on) -------------------------------

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        status, wait = super().permit(state, pod, node)
        if not self.pod_groups or status.code is not Code.WAIT:
            return status, wait
        gang = self.gangs.of(pod)
        if gang is None:
            return status, wait
        if gang.failed is not None:
            uid = gang.failed[0]
            if uid != pod.uid and uid in gang.pods and uid not in gang.assigned:
                # A member of this attempt failed and the rest cannot make the quorum: the
                # attempt has failed; this member is let go once its wait is registered.
                failed = gang.failed
                self.later(0.0, lambda: self._fail_attempt(gang, failed))
                return status, wait
            gang.failed = None  # the member that failed is tried again (or gone): a new attempt
        policy = self._policy(pod)
        if not isinstance(policy, _Policy):
            return status, wait
        left = self._untried(gang, pod)
        if gang.placed() + left < policy.minimum:
            # Even with every member that can be tried (a gated one is in no queue), the group
            # falls short: kube-scheduler's cycle fails it before (1.37) or after (1.36)
            # trying them. Scheduled before this attempt: the members bound (or assumed)
            # before it; remaining: this attempt's members and those not tried yet.
            waiting = len(gang.waiting)
            self._doom(gang, pod, policy, gang.placed() - waiting, waiting + left)
            doomed = gang.failed
            self.later(0.0, lambda: self._fail_attempt(gang, doomed))
        return status, wait

    @staticmethod
    def _untried(gang: GangView, pod: PodInfo) -> int:
        """Members neither placed nor `pod` that this scheduler may still try (not gated; a
        gated pod is never placed). Counted, not listed: a group may have thousands."""
        unscheduled = len(gang.pods) - gang.placed() - gang.gated
        if pod.uid in gang.pods and pod.uid not in gang.assumed and pod.uid not in gang.assigned:
            unscheduled -= 1
        return max(unscheduled, 0)

    def _doom(
        self, gang: GangView, pod: PodInfo, policy: _Policy, scheduled: int, remaining: int
    ) -> None:
        """The group's attempt fails with `pod`: what its members are told, in the release's
        words (1.37: PlacementFeasible's verdict, then the group preemption's)."""
        line, verdict = GROUP_UNSCHEDULABLE, ""
        if self.handle.features.since(1, 37):
            verdict = OUT_OF_REACH.format(policy.minimum, scheduled, remaining)
            group = self.gangs.scheduling_groups.get(f"{pod.namespace}/{pod.scheduling_group}")
            line = (
                f"{CANNOT_BE_SATISFIED.format(policy.minimum, scheduled, remaining)}, "
                f"{self.handle.pod_group_post_filter(group, pod).message}"
            )
        gang.failed = (pod.uid, pod.name, line)
        gang.out_of_reach = verdict

    def _admitted(self, gang: GangView, policy: _Policy) -> None:
        """A v1.35 Workload has no status, so an event on it says the gang was placed; a
        PodGroup's condition says so (`ascheduler.groupstatus`), and kube-scheduler records
        no event on it: neither does this plugin (one request per group less)."""
        if not self.pod_groups:
            super()._admitted(gang, policy)

    def _wait_message(self, gang: GangView, policy: _Policy) -> str:
        return WAITING_TO_BE_SCHEDULED if self.pod_groups else WAITING_ON_PERMIT

    def _rejected_with(self, gang: GangView, pod: PodInfo, minimum: int) -> str:
        if self.pod_groups:
            return self._verdict(gang)
        return super()._rejected_with(gang, pod, minimum)

    def _member_failed(self, pod: PodInfo, plugin: str) -> None:
        """A member found no node (or failed): when the members left can no longer make the
        quorum, the group's attempt fails as kube-scheduler's pod group cycle fails it. (A
        member this plugin let go is the group's failure already, not a new one.)"""
        if plugin == self.name or self._key(pod) is None:
            return
        if self.handle.profile and pod.scheduler_name != self.handle.profile:
            return  # another profile's member (every profile's plugin is told)
        gang = self.gangs.of(pod)
        policy = self._policy(pod)
        if gang is None or not isinstance(policy, _Policy) or gang.admitted:
            return
        if gang.placed() >= policy.minimum:
            return
        # Every member not placed could still be (but this one, and gated ones).
        left = self._untried(gang, pod)
        if gang.placed() + left >= policy.minimum:
            return
        self._doom(gang, pod, policy, gang.placed(), left)
        self._fail_attempt(gang)

    def _fail_attempt(self, gang: GangView, failed: object = None) -> None:
        """The members waiting on Permit let go with the group's failed attempt (`failed`,
        when told later: unless a new attempt of the group has begun since)."""
        if failed is not None and gang.failed is not failed:
            return
        if gang.waiting:
            self.reject_waiting(gang, self._verdict(gang))

    @staticmethod
    def _verdict(gang: GangView) -> str:
        """What the members failed with their group's attempt are told."""
        return gang.failed[2] if gang.failed is not None else GROUP_UNSCHEDULABLE


def new(args: NoArgs, handle: Handle) -> GangScheduling:
    return GangScheduling(handle)


REGISTRATION: Final = Registration(NAME, new, NoArgs, default_weight=1)
