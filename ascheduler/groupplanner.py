"""The pod group algorithm as a dry run (`GroupPlanner` of the plugin API): what a
workload-aware preemption asks once it has taken its victims off the cluster
(kube-scheduler's `PodGroupSchedulingFunc`, a fresh cycle over the group's members).

The members are placed on the cache's own node table, one after another as the pod group
cycle tries them (each member's PreFilter .. Score with the members before it assumed), and
every change is undone before `place` returns: it runs within one scheduling cycle, with no
await between the change and its undoing, so nothing else ever sees the table changed. The
group's verdict is GangScheduling's PlacementFeasible: a gang stops as soon as the members
scheduled and remaining cannot make `minCount` (`minCount (M) cannot be satisfied: S
scheduled, R remaining`); a basic group needs one member placed (none: an Unschedulable
status with no reason, as kube-scheduler's `errPodGroupUnschedulable` carries none). Only the
node table is changed: devices and volumes the members would take are not reserved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ascheduler.cache import Cache
from ascheduler.framework import SUCCESS, Assignment, CycleState, GroupPlacement, Status
from ascheduler.framework.runtime import Framework
from ascheduler.groupcycle import FAILED_OTHER_POD
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SCHEDULING_GROUP, SchedulingGroup
from ascheduler.plugins.gangscheduling import OUT_OF_REACH


class GroupPlanner:
    def __init__(self, cache: Cache, frameworks: Mapping[str, Framework]) -> None:
        self.cache = cache
        self.frameworks = frameworks

    def members(self, group: SchedulingGroup) -> Sequence[PodInfo]:
        gang = self.cache.gangs.get(f"{SCHEDULING_GROUP}:{group.key}")
        if gang is None:
            return []
        out = [
            p
            for uid, p in gang.pods.items()
            if uid not in gang.assigned
            and not p.deleting
            and not p.scheduling_gates
            and p.scheduler_name in self.frameworks
        ]
        # kube-scheduler's order: higher priority first, then as they joined the group.
        out.sort(key=lambda p: -p.priority)
        return out

    def reserved(self, group: SchedulingGroup) -> Sequence[PodInfo]:
        gang = self.cache.gangs.get(f"{SCHEDULING_GROUP}:{group.key}")
        if gang is None:
            return []
        return [
            p
            for uid, p in gang.pods.items()
            if uid in gang.assumed and uid not in gang.assigned and self.cache.is_assumed(uid)
        ]

    def place(self, group: SchedulingGroup, removed: Sequence[PodInfo]) -> GroupPlacement:
        members = self.members(group)
        if not members:
            return GroupPlacement(Status.unschedulable())
        fw = self.frameworks[members[0].scheduler_name]
        gang = self.cache.gangs.get(f"{SCHEDULING_GROUP}:{group.key}")
        table = self.cache.table
        taken: list[tuple[int, PodInfo]] = []
        added: list[tuple[int, PodInfo]] = []
        seen: set[str] = set()
        for pod in [*self.reserved(group), *removed]:
            row = table.pod_row(pod.uid)
            counted = None if row is None or pod.uid in seen else table.pods(row).get(pod.uid)
            if row is not None and counted is not None:
                seen.add(pod.uid)
                taken.append((row, counted))
        table.add_usages(taken, -1)
        try:
            scheduled = 0 if gang is None else len(gang.assigned)
            remaining = len(members)
            minimum = group.min_count
            if minimum is not None and scheduled + remaining < minimum:
                return GroupPlacement(
                    Status.unschedulable(OUT_OF_REACH.format(minimum, scheduled, remaining))
                )
            placed: list[Assignment] = []
            for pod in members:
                state = CycleState(dry_run=True)
                result = fw.find_nodes(state, pod, table)
                remaining -= 1
                row = None if result.node is None else table.index.get(result.node)
                if result.node is not None and row is not None:
                    table.add_usage(row, pod, 1)
                    added.append((row, pod))
                    placed.append(Assignment(pod, result.node, state))
                    scheduled += 1
                elif not result.status.rejected:
                    return GroupPlacement(
                        Status.error(FAILED_OTHER_POD.format(result.status.message))
                    )
                if minimum is not None and scheduled + remaining < minimum:
                    return GroupPlacement(
                        Status.unschedulable(OUT_OF_REACH.format(minimum, scheduled, remaining))
                    )
            if not placed:
                return GroupPlacement(Status.unschedulable())
            return GroupPlacement(SUCCESS, tuple(placed))
        finally:
            table.add_usages(reversed(added), -1)
            table.add_usages(taken, 1)
