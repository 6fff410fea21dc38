"""What kube-scheduler's pod group cycle decides beyond each member's own attempt (1.36 on,
with GenericWorkload): whether the group may be scheduled at all (its members agree), and the
PodGroup's status condition (`ascheduler.groupstatus`).

kube-scheduler pops a `scheduling.k8s.io` PodGroup's pods together (`schedule_one_podgroup.go`)
and, before trying any:

* **1.36** (`frameworkForPodGroup`): every member it pops must name one `schedulerName`, else
  each fails with an error (`SchedulerError`) and the PodGroup's status is left alone.
* **1.37** (`validatePodGroup`): the members it pops and those already scheduled (bound or
  assumed) must name one `schedulerName`, each pod's priority must be the PodGroup's
  (`spec.priority`, 0 when unset), and they must share one preemption policy (the first pod's;
  the PodGroup's own with PodGroupPreemptionPolicy). A failure fails every member with the
  error and writes the condition False, reason `SchedulerError`, with it
  (`handlePodGroupFailureBeforeScheduling`).

Then the cycle's outcome is written on the PodGroup: True `Scheduled` when a member passes
Permit with Success (a basic group's first member that fits, a gang's quorum); False
`Unschedulable` when the group fails (a gang: when GangScheduling finds the quorum out of
reach, `Gang.failed`; a basic group: when a member fits nowhere), with the group's message
(1.36: `pod group is unschedulable`; 1.37: PlacementFeasible's verdict as the loop over the
members stopped on it, `minCount (M) cannot be satisfied: S scheduled, R remaining`, then the
group preemption's, where the members failed with the group read it after `pod group is
unschedulable, `: what kube-scheduler writes, observed on the plane); False
`SchedulerError` when a member's attempt fails with an error (`failed to schedule other pod
from a pod group: ...`). Here a member coming up brings its queued siblings with it
(`members`, kube's `podGroupInfoForPod`), and the scheduling loop tries them one after
another in kube's order with no other pod between them (1.37: not past the member that left
the quorum out of reach, `stopped`); each is still its own attempt, checked on its own (the
same members, so the same verdict), and a basic group's member that fits nowhere reports the
group unschedulable until a sibling fits (a True is never undone). A gang's verdict is
written only from an attempt that tried its members in kube-scheduler's order
(`PodGroupCycle._verdict_due`: a member back from flight on its own may not be).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Final

from ascheduler.cache.gangs import Gang, Gangs
from ascheduler.features import GENERIC_WORKLOAD, Features
from ascheduler.framework import QueuedPodInfo, Status
from ascheduler.framework.runtime import Framework
from ascheduler.groupstatus import (
    SCHEDULED,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    PodGroupStatusWriter,
    Verdict,
)
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SchedulingGroup
from ascheduler.plugins.gangscheduling import NAME as GANG_SCHEDULING
from ascheduler.plugins.gangscheduling import OUT_OF_REACH

#: The pseudo-plugin named on the error a member of a group whose members disagree fails
#: with (an error: the member is retried after its backoff, as kube-scheduler retries it).
POD_GROUP_VALIDATION: Final = "PodGroupValidation"
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
POD_GROUP_PREEMPTION_POLICY: Final = "PodGroupPreemptionPolicy"

#: kube-scheduler's words (`frameworkForPodGroup` in 1.36, `validatePodGroup` in 1.37).
SCHEDULER_NAME_MISMATCH: Final = (
    "all pods in a single pod group should have the same .spec.schedulerName set, got: {} and {}"
)
PRIORITY_MISMATCH: Final = (
    "all pods in a single pod group should have the same priority as the pod group's "
    "priority, got {} and {}"
)
GROUP_POLICY_MISMATCH: Final = (
    "all pods in a single pod group should have the same preemption policy as the pod "
    "group's preemption policy, got {} and {}"
)
POLICY_MISMATCH: Final = (
    "all pods in a single pod group should have the same preemption policy, got {} and {}"
)
#: `errPodGroupUnschedulable`, what 1.36 appends when the group needs preemption, and how a
#: member's error becomes the group's.
GROUP_UNSCHEDULABLE: Final = "pod group is unschedulable"
WAITING_FOR_PREEMPTION: Final = "pod group is waiting for preemption to complete"
FAILED_OTHER_POD: Final = "failed to schedule other pod from a pod group: {}"


def go_quote(text: str) -> str:
    """Go's `%q` of a name (printable ASCII: a JSON string is the same)."""
    return json.dumps(text, ensure_ascii=False)


class PodGroupCycle:
    def __init__(
        self,
        gangs: Gangs,
        writer: PodGroupStatusWriter | None,
        frameworks: Mapping[str, Framework],
        features: Features,
    ) -> None:
        self.gangs = gangs
        self.writer = writer
        self.frameworks = frameworks
        self.features = features
        #: kube-scheduler sends pods naming a PodGroup through its pod group cycle from 1.36,
        #: while GenericWorkload is on (whatever the profile's plugins).
        self.active = features.since(1, 36) and GENERIC_WORKLOAD in features
        #: Group key -> the member whose failure left its gang short: True when the verdict
        #: was written, False when it was not (an attempt out of kube-scheduler's order); the
        #: members let go with the group follow it.
        self._verdict_of: dict[str, tuple[str, bool]] = {}
        #: Group key -> (what the group was, the first member's schedulerName, priority and
        #: policy) when its members last agreed: a member's schedulerName, priority and
        #: preemption policy never change, so until the group's members do, each member
        #: coming up is checked against that alone rather than against them all.
        self._agreed: dict[str, tuple[tuple[object, ...], tuple[str, int, str]]] = {}

    def _group(self, pod: PodInfo) -> SchedulingGroup | None:
        if not self.active or pod.scheduling_group is None:
            return None
        return self.gangs.scheduling_groups.get(f"{pod.namespace}/{pod.scheduling_group}")

    # -- the members tried together ---------------------------------------------------------

    def members(
        self, qp: QueuedPodInfo, waiting: Callable[[str], QueuedPodInfo | None]
    ) -> list[QueuedPodInfo]:
        """The pods to try in this cycle, in order: `qp` alone, or, for a member of a PodGroup
        the cycle schedules, with every sibling still queued for this scheduler, as each
        waits (`waiting`, the queue's: in flight or gone, left out), in kube-scheduler's
        order: priority, higher first, then the time first tried; one never tried goes after
        those that were, in the order it joined the group, as kube-scheduler's pop stamps it
        (`podGroupInfoForPod`). The siblings are not taken from the queue here: the loop
        pops each (`pop_specific`) as its turn comes, so that a group of thousands, the
        most part parked unschedulable, holds the event loop for none of them at once."""
        pod = qp.pod
        if not self.active or pod.scheduling_group is None:
            return [qp]
        gang = self.gangs.of(pod)
        if gang is None:
            return [qp]
        batch = [qp]
        for uid in gang.unscheduled():
            if uid != pod.uid and (sibling := waiting(uid)) is not None:
                batch.append(sibling)
        if gang.failed is not None and any(q.pod.uid == gang.failed[0] for q in batch):
            # The member that failed the group's last attempt is tried again: this is a new
            # attempt, and its members are not let go with the last one.
            gang.failed = None
        if len(batch) > 1:
            batch.sort(key=lambda q: (-q.pod.priority, q.initial_attempt_timestamp or math.inf))
        return batch

    def stopped(self, pod: PodInfo, before: object) -> Status | None:
        """1.37: once a member tried in this cycle leaves the quorum out of reach
        (PlacementFeasible), the cycle stops; the members not tried yet fail with the
        group's status (`completePodGroupAlgorithmResult`). `before` is the gang's `failed`
        when the cycle began (`failure`). None: go on."""
        if not self.active or not self.features.since(1, 37):
            return None
        gang = self.gangs.of(pod)
        if gang is None or gang.failed is None or gang.failed is before:
            return None
        if self.validate(pod) is not None:
            return None  # a group its members disagree on fails before any is tried
        # They are told the group's status as PlacementFeasible left it, before the group
        # preemption's verdict was appended to it (kube-scheduler clones it first).
        return Status.unschedulable(gang.out_of_reach or gang.failed[2], plugin=GANG_SCHEDULING)

    def failure(self, pod: PodInfo) -> object:
        """What `stopped` compares with: the gang's failed attempt as the cycle begins."""
        gang = self.gangs.of(pod)
        return None if gang is None else gang.failed

    # -- before the members are tried -------------------------------------------------------

    def validate(self, pod: PodInfo) -> Status | None:
        """The error failing `pod` because its group's members disagree; None when they
        agree (or the pod is in no group the cycle checks)."""
        if not self.active or pod.scheduling_group is None:
            return None
        group = self._group(pod)
        gang = self.gangs.of(pod)
        if gang is None:
            return None
        # A member assumed stays among those checked (1.37) or leaves them (1.36): either
        # way the rest still agree; one bound (by anyone) may join them.
        shape = (group, len(gang.pods), gang.gated, len(gang.assigned))
        fields = (pod.scheduler_name, pod.priority, pod.preemption_policy or PREEMPT_LOWER_PRIORITY)
        agreed = self._agreed.get(gang.key)
        if agreed is not None and agreed[0] == shape and agreed[1] == fields:
            return None
        queued, scheduled = [pod], []
        for uid, p in gang.pods.items():
            if uid == pod.uid:
                continue
            if uid in gang.assigned or uid in gang.assumed:
                scheduled.append(p)
            elif not p.deleting and not p.scheduling_gates and p.scheduler_name in self.frameworks:
                queued.append(p)
        since_137 = self.features.since(1, 37)
        if since_137 and group is None:
            return None  # held at PreEnqueue until the PodGroup exists
        by_group = POD_GROUP_PREEMPTION_POLICY in self.features
        checked = [*queued, *scheduled] if since_137 else queued
        if self._agree(checked, group if since_137 else None, by_group):
            # The common case, told in one pass, in no particular order.
            self._agreed[gang.key] = (shape, fields)
            if len(self._agreed) > 2 * len(self.gangs) + 64:
                for gone in [k for k in self._agreed if self.gangs.get(k) is None]:
                    del self._agreed[gone]
            return None
        self._agreed.pop(gang.key, None)
        # In kube-scheduler's order (`PodGroupMemberPodsOrderingFunc`: priority, higher
        # first, then the time queued), here the time created: whichever member comes up,
        # the group is checked alike and fails with the same words.
        queued.sort(key=lambda p: (-p.priority, p.creation_timestamp, p.name))
        scheduled.sort(key=lambda p: p.uid)
        first = queued[0].scheduler_name
        if group is None or not since_137:
            for p in queued:
                if p.scheduler_name != first:
                    return self._invalid(p.scheduler_name, first)
            return None
        policy = (group.preemption_policy or PREEMPT_LOWER_PRIORITY) if by_group else ""
        for p in [*queued, *scheduled]:
            if p.scheduler_name != first:
                return self._invalid(p.scheduler_name, first)
            if p.priority != group.priority:
                return Status.error(
                    PRIORITY_MISMATCH.format(p.priority, group.priority), POD_GROUP_VALIDATION
                )
            own = p.preemption_policy or PREEMPT_LOWER_PRIORITY
            if by_group and own != policy:
                return Status.error(GROUP_POLICY_MISMATCH.format(own, policy), POD_GROUP_VALIDATION)
            if not by_group:
                if not policy:
                    policy = own
                elif own != policy:
                    return Status.error(POLICY_MISMATCH.format(own, policy), POD_GROUP_VALIDATION)
        return None

    @staticmethod
    def _agree(pods: list[PodInfo], group: SchedulingGroup | None, by_group: bool) -> bool:
        """Whether nothing `validate` checks differs among `pods` (with `group`: their
        priority is its own, and so is their preemption policy `by_group`)."""
        first = pods[0]
        if any(p.scheduler_name != first.scheduler_name for p in pods):
            return False
        if group is None:
            return True
        policy = first.preemption_policy or PREEMPT_LOWER_PRIORITY
        if by_group and policy != (group.preemption_policy or PREEMPT_LOWER_PRIORITY):
            return False
        return all(
            p.priority == group.priority
            and (p.preemption_policy or PREEMPT_LOWER_PRIORITY) == policy
            for p in pods
        )

    @staticmethod
    def _invalid(name: str, first: str) -> Status:
        return Status.error(
            SCHEDULER_NAME_MISMATCH.format(go_quote(name), go_quote(first)), POD_GROUP_VALIDATION
        )

    # -- the cycle's outcome ----------------------------------------------------------------

    def scheduled(self, pod: PodInfo) -> None:
        """`pod` passed Permit with Success in its scheduling cycle: its group is scheduled."""
        group = self._group(pod)
        if group is not None and self.writer is not None:
            self.writer.set(group, Verdict(True, SCHEDULED))

    def failed(
        self,
        fw: Framework,
        pod: PodInfo,
        status: Status,
        *,
        error: bool,
        binding: bool,
        nominated: bool,
    ) -> None:
        """`pod`'s attempt failed (in its scheduling cycle, or in its binding cycle: a
        member let go with its group). Told after the gang plugins were
        (`Gangs.member_failed`), so a gang's `failed` already says whether the group's
        attempt is over."""
        group = self._group(pod)
        if group is None or self.writer is None:
            return
        if status.plugin == POD_GROUP_VALIDATION:
            if self.features.since(1, 37):
                self.writer.set(group, Verdict(False, SCHEDULER_ERROR, status.message))
            return
        if error and not binding:
            message = FAILED_OTHER_POD.format(status.message)
            self.writer.set(group, Verdict(False, SCHEDULER_ERROR, message))
            return
        gang = self.gangs.of(pod)
        holds = _gang_plugin(fw)
        if holds and group.min_count is not None:
            # A gang: over when GangScheduling found its quorum out of reach.
            if gang is None or gang.failed is None:
                return
            if not self._verdict_due(gang, pod, binding):
                return
            line = GROUP_UNSCHEDULABLE
            if self.features.since(1, 37):
                line = gang.failed[2].removeprefix(f"{GROUP_UNSCHEDULABLE}, ")
            self.writer.set(group, Verdict(False, UNSCHEDULABLE, line))
            return
        if binding:
            return  # a bind that failed: the cycle succeeded
        line = self._one_by_one(fw, pod, group, gang, holds, nominated)
        self.writer.set(group, Verdict(False, UNSCHEDULABLE, line))

    def _verdict_due(self, gang: Gang, pod: PodInfo, binding: bool) -> bool:
        """Whether the verdict of the gang's failed attempt is written: kube-scheduler's
        cycle tries the members in one order and counts them as it goes, so its verdict is
        only known from an attempt that tried the members in that order. Here members come
        up one by one: one retried before the siblings ahead of it are back (let go with the
        group a moment ago, or still backing off) would be counted against fewer scheduled
        and more remaining than kube-scheduler's next cycle counts, so such an attempt leaves
        the group's condition as the last in-order attempt wrote it (the first verdict is
        written whatever the order: there is none to keep)."""
        assert gang.failed is not None
        doomed_by = gang.failed[0]
        if binding:
            # Let go with the group: as the member that failed it went.
            seen = self._verdict_of.get(gang.key)
            return seen is None or seen[0] != doomed_by or seen[1]
        due = gang.key not in self._verdict_of or self._in_order(gang, pod)
        self._verdict_of[gang.key] = (pod.uid, due)
        if len(self._verdict_of) > 2 * len(self.gangs) + 64:
            for gone in [k for k in self._verdict_of if self.gangs.get(k) is None]:
                del self._verdict_of[gone]
        return due

    def _in_order(self, gang: Gang, pod: PodInfo) -> bool:
        """Whether every member kube-scheduler tries before `pod` (higher priority, or the
        same and queued earlier: `PodGroupMemberPodsOrderingFunc`, the order members joined
        the group here) is scheduled, reserved, or one it would not try (gated, deleted,
        another scheduler's). A walk over the group, once per failed attempt."""
        ahead = True
        for uid, p in gang.pods.items():
            if uid == pod.uid:
                ahead = False
                continue
            if p.priority < pod.priority or (p.priority == pod.priority and not ahead):
                continue
            if uid in gang.assigned or uid in gang.assumed or uid in gang.waiting:
                continue
            if p.scheduling_gates or p.deleting or p.scheduler_name not in self.frameworks:
                continue
            return False
        return True

    def _one_by_one(
        self,
        fw: Framework,
        pod: PodInfo,
        group: SchedulingGroup,
        gang: Gang | None,
        holds: bool,
        nominated: bool,
    ) -> str:
        """The message of a group whose members each may do (a basic group, or a gang no
        plugin holds together) when none fit: 1.36's, with its wait for preemption; 1.37's
        with GangScheduling's PlacementFeasible (minCount 1) when none is scheduled, and the
        group preemption's verdict."""
        if not self.features.since(1, 37):
            if nominated:
                return f"{GROUP_UNSCHEDULABLE}, {WAITING_FOR_PREEMPTION}"
            return GROUP_UNSCHEDULABLE
        preemption = fw.pod_group_post_filter(group, pod).message
        if holds and (gang is None or gang.placed() == 0):
            return f"{OUT_OF_REACH.format(1, 0, 0)}, {preemption}"
        return f"{GROUP_UNSCHEDULABLE}, {preemption}"


def _gang_plugin(fw: Framework) -> bool:
    """Whether the profile's GangScheduling holds gangs together (it is in the profile, and
    its gate on)."""
    return any(p.name == GANG_SCHEDULING and getattr(p, "enabled", True) for p in fw.permit_plugins)
