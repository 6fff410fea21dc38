"""Workload-aware preemption: DefaultPreemption's PodGroupPostFilter (kube-scheduler 1.37,
`framework/preemption/podgrouppreemption.go`), for a pod group whose attempt failed.

1. A group whose preemption policy is `Never` is not eligible (Unschedulable).
2. A preemption of the group already under way (one of its members nominated to a node that
   holds a lower-priority pod terminating by preemption; here also: its evictions still
   running) answers Success, `ongoing preemption on nominated nodes`, the members kept on
   their nominations.
3. Victims: every pod of the cluster, one victim each, except that every scheduled pod of a
   PodGroup whose `spec.disruptionMode` is `all` makes one victim together. A victim's
   priority is its PodGroup's `spec.priority` (a pod in no group: its own); only those below
   the group's are kept. None: `No preemption victims found for incoming preemptor`
   (UnschedulableAndUnresolvable).
4. Every victim is taken off the cluster and the group's members placed as its cycle would
   (`GroupPlanner.place`): when they cannot be, that is the answer.
5. Reprieve, most important victim first (`more_important`: priority, a group before a pod,
   more pods, the earlier start), those whose eviction would break a PodDisruptionBudget
   before the others: each is put back, and the members placed on the nodes it occupies are
   filtered again there (the members before each on that node added, the victims still
   evicted there gone); one that breaks a member's fit is evicted after all.
6. The victims are evicted together (`Evictor.start_group`: DisruptionTarget `<scheduler>:
   preempting to accommodate a higher priority podgroup`, deletion, `Preempted` events), each
   member placed is nominated to its node, and the answer is Success `found a placement for
   podgroup, preempting N victims`; DefaultPreemption's PreEnqueue holds the members while
   the evictions run.

Every message is prefixed `pod group preemption: `; each attempt is counted in
`scheduler_workload_preemption_attempts_total{result}`.

Where this differs from kube-scheduler: the reprieve re-filters a member only on the nodes
the reprieved victim occupies, with the cycle state the dry run left (kube-scheduler updates
every member's state through PreFilter's AddPod and filters every member again), so a
victim whose return would break a member's pod topology spread or inter-pod affinity on
another node is reprieved all the same; and the dry run places members with the node table
(resources, ports, counts, affinities, volumes) but does not reserve their devices, so two
members of one group needing the same free device both count it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ascheduler import metrics
from ascheduler.features import POD_GROUP_PREEMPTION_POLICY
from ascheduler.framework import (
    Assignment,
    Code,
    Handle,
    Status,
    group_uid,
)
from ascheduler.model import PodInfo
from ascheduler.model.objects import DisruptionBudget
from ascheduler.model.pod import PREEMPT_NEVER
from ascheduler.model.podgroups import SCHEDULING_GROUP, SchedulingGroup
from ascheduler.plugins.preemptiontime import start_time

PREFIX: Final = "pod group preemption: "
NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS: Final = "No preemption victims found for incoming preemptor"
ONGOING: Final = "ongoing preemption on nominated nodes"
FOUND: Final = "found a placement for podgroup, preempting {} victims"

#: kube-scheduler's victim kinds, as `MoreImportantVictim` ranks them.
POD_RANK: Final = 1
GROUP_RANK: Final = 2


@dataclass(frozen=True, slots=True)
class Victim:
    """What a workload-aware preemption evicts as one: a pod, or every scheduled pod of a
    PodGroup whose disruption mode is `all`."""

    pods: tuple[PodInfo, ...]
    priority: int
    rank: int
    #: The earliest start among its pods (a pod not started: now).
    started: float

    def sort_key(self) -> tuple[int, int, int, float, str]:
        """More important first (kube-scheduler's `MoreImportantVictim`), then the first
        pod's uid, so equals sort alike every time."""
        return (-self.priority, -self.rank, -len(self.pods), self.started, self.pods[0].uid)


def victim_priority(pod: PodInfo, groups: Mapping[str, SchedulingGroup]) -> int:
    """kube-scheduler's `GetPodPriority`: the priority of the pod's PodGroup, when it has one
    the cache knows; else the pod's own."""
    if pod.scheduling_group is not None:
        group = groups.get(f"{pod.namespace}/{pod.scheduling_group}")
        if group is not None:
            return group.priority
    return pod.priority


def collect_victims(
    pods: Iterable[PodInfo],
    groups: Mapping[str, SchedulingGroup],
    below: int,
    now: float,
    started: Mapping[str, float],
) -> list[Victim]:
    """The victims a group of priority `below` may preempt among `pods` (every pod on the
    node table), in no particular order. `started`: each pod's start time by uid (absent:
    not started, `now`)."""
    singles: list[Victim] = []
    together: dict[str, list[PodInfo]] = {}
    for pod in pods:
        group = (
            groups.get(f"{pod.namespace}/{pod.scheduling_group}")
            if pod.scheduling_group is not None
            else None
        )
        priority = pod.priority if group is None else group.priority
        if priority >= below:
            continue
        if group is not None and group.disruption_all:
            together.setdefault(group.key, []).append(pod)
            continue
        # A pod naming a PodGroup is ranked as a group even alone (`NewPodVictim`).
        rank = GROUP_RANK if pod.scheduling_group is not None else POD_RANK
        singles.append(Victim((pod,), priority, rank, started.get(pod.uid, now)))
    for key, members in together.items():
        group = groups[key]
        first = min(started.get(p.uid, now) for p in members)
        members.sort(key=lambda p: p.uid)
        singles.append(Victim(tuple(members), group.priority, GROUP_RANK, first))
    return singles


def split_victims(
    victims: Sequence[Victim], budgets: Sequence[DisruptionBudget]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """kube-scheduler's `FilterVictimsWithPDBViolation` over victims, in the order given:
    a victim with any pod whose eviction takes a budget covering it below zero violates, with
    the count of such pods; budgets are charged pod after pod, a pod's charge ending at the
    first budget it breaks, and a pod a budget already counts as disrupted costs it nothing."""
    covering = [b for b in budgets if not b.selector.nothing]
    allowed = [b.disruptions_allowed for b in covering]
    violating: list[tuple[Victim, int]] = []
    fine: list[Victim] = []
    for victim in victims:
        count = 0
        for pod in victim.pods:
            if not pod.labels:
                continue
            for i, budget in enumerate(covering):
                if not budget.covers(pod) or pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    count += 1
                    break
        if count:
            violating.append((victim, count))
        else:
            fine.append(victim)
    return violating, fine


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a group preemption decided: its status (unprefixed) and, on Success, the
    victims to evict and where each member placed is nominated."""

    status: Status
    victims: tuple[PodInfo, ...] = ()
    nominations: tuple[tuple[PodInfo, str], ...] = ()
    pdb_violations: int = 0
    group_disruptions: int = 0


class GroupPreemption:
    """DefaultPreemption's PodGroupPostFilter, on the handle it was built with."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        #: Group uid -> what its last preemption answered, while its evictions run (the
        #: group's other members failing in the same attempt are told the same).
        self._answers: dict[str, Status] = {}

    def post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        if POD_GROUP_PREEMPTION_POLICY in self.handle.features:
            never = group is not None and group.preemption_policy == PREEMPT_NEVER
        else:
            never = pod.preemption_policy == PREEMPT_NEVER
        if never:
            return self._counted(Status.unschedulable(PREFIX + NOT_ELIGIBLE_NEVER))
        if group is None:
            return self._counted(Status.unschedulable(PREFIX + NO_VICTIMS, resolvable=False))
        running = self._running(group)
        if running is not None:
            # Its evictions still run: a member failing with the same attempt is told what
            # the first was (the nominations stand).
            return self._counted(running)
        outcome = self.evaluate(group)
        status = outcome.status
        if status.code is Code.SUCCESS and outcome.victims:
            members = [m for m, _ in outcome.nominations]
            self.actuate(group, pod.scheduler_name, outcome, members)
        for member, node in outcome.nominations:
            self.handle.nominator.nominate(member, node)
        if status.message:
            status = Status(status.code, (PREFIX + status.message,), status.plugin)
        if status.code is Code.SUCCESS and outcome.victims:
            self._answers[group_uid(group)] = status
            evictor = self.handle.evictor
            if evictor is not None and len(self._answers) > 64:
                # Groups not asked about since their evictions ended: forgotten.
                for uid in [u for u in self._answers if not evictor.running(u)]:
                    del self._answers[uid]
        return self._counted(status)

    @staticmethod
    def _counted(status: Status) -> Status:
        metrics.WORKLOAD_PREEMPTION_ATTEMPTS.labels(_code_name(status.code)).inc()
        return status

    def evaluate(self, group: SchedulingGroup) -> Outcome:
        """Steps 2 to 5: what to evict and where the members go, or why not; nothing done."""
        planner = self.handle.group_planner
        if planner is None:
            return Outcome(Status.unschedulable(NO_VICTIMS, resolvable=False))
        members = planner.members(group)
        if self._ongoing(group, members):
            return Outcome(Status(Code.SUCCESS, (ONGOING,)), nominations=self._current(members))
        nodes = self.handle.nodes
        now = time.time()
        row_of: dict[str, int] = {}
        started: dict[str, float] = {}
        candidates = self._candidates(group.priority)
        for p in candidates:
            row = nodes.pod_row(p.uid)
            if row is not None:
                row_of[p.uid] = row
                if p.start_time:
                    started[p.uid] = start_time(p, now)
        groups = self.handle.gangs.scheduling_groups
        victims = collect_victims(candidates, groups, group.priority, now, started)
        if not victims:
            return Outcome(Status.unschedulable(NO_VICTIMS, resolvable=False))
        removed = [p for v in victims for p in v.pods]
        placement = planner.place(group, removed)
        if placement.status.code is not Code.SUCCESS:
            return Outcome(placement.status)
        victims.sort(key=Victim.sort_key)
        budgets = self.handle.objects.budgets_for({p.namespace for p in removed})
        violating, fine = split_victims(victims, budgets)
        reprieve = _Reprieve(
            self.handle, group, placement.assignments, planner.reserved(group), row_of
        )
        for v in victims:
            reprieve.take_off(v, row_of)
        evicted: list[Victim] = []
        violations = 0
        for v, count in violating:
            if not reprieve.fits_with(v, row_of):
                evicted.append(v)
                violations += count
        for v in fine:
            if not reprieve.fits_with(v, row_of):
                evicted.append(v)
        evicted.sort(key=Victim.sort_key)
        pods = tuple(p for v in evicted for p in v.pods)
        found = Status(Code.SUCCESS, (FOUND.format(len(pods)),))
        return Outcome(
            found,
            victims=pods,
            nominations=tuple((a.pod, a.node) for a in placement.assignments),
            pdb_violations=violations,
            group_disruptions=sum(1 for v in evicted if v.rank == GROUP_RANK),
        )

    def actuate(
        self,
        group: SchedulingGroup,
        scheduler: str,
        outcome: Outcome,
        members: Sequence[PodInfo],
    ) -> None:
        """Step 6: the victims evicted (unless nothing evicts: a dry run's handle)."""
        metrics.WORKLOAD_PREEMPTION_VICTIMS.observe(len(outcome.victims))
        if outcome.group_disruptions:
            metrics.PREEMPTION_WORKLOAD_DISRUPTIONS.labels("podgroup").observe(
                outcome.group_disruptions
            )
        if outcome.pdb_violations:
            metrics.PREEMPTION_PDB_VIOLATIONS.labels("podgroup").inc(outcome.pdb_violations)
        if self.handle.evictor is not None:
            self.handle.evictor.start_group(
                group, scheduler, outcome.victims, [m.uid for m in members]
            )

    def _candidates(self, below: int) -> list[PodInfo]:
        """The pods on the node table whose victim priority may be below `below`: those whose
        own priority is (the table's index), and the pods of PodGroups whose priority is
        (their own may be higher); `collect_victims` decides. Not a walk over every pod: a
        group failing in a cluster with nothing of lower priority costs next to nothing."""
        nodes = self.handle.nodes
        gangs = self.handle.gangs
        out = {p.uid: p for p in nodes.pods_below(below)}
        for group in gangs.scheduling_groups.values():
            if group.priority >= below:
                continue
            gang = gangs.get(f"{SCHEDULING_GROUP}:{group.key}")
            for uid in () if gang is None else gang.pods:
                row = nodes.pod_row(uid)
                if row is not None and uid not in out:
                    out[uid] = nodes.pods(row)[uid]
        return list(out.values())

    def _running(self, group: SchedulingGroup) -> Status | None:
        """The answer of the group's preemption whose evictions still run (None: none)."""
        uid = group_uid(group)
        evictor = self.handle.evictor
        if evictor is not None and evictor.running(uid):
            return self._answers.get(uid, Status(Code.SUCCESS, (ONGOING,)))
        self._answers.pop(uid, None)
        return None

    def _ongoing(self, group: SchedulingGroup, members: Sequence[PodInfo]) -> bool:
        """kube-scheduler's `isOngoingPreemption`: a member's nominated node holds a pod of
        lower priority terminating by preemption."""
        nodes = self.handle.nodes
        groups = self.handle.gangs.scheduling_groups
        seen: set[str] = set()
        for member in members:
            node = member.nominated_node_name
            if not node or node in seen:
                continue
            seen.add(node)
            row = nodes.index.get(node)
            if row is None:
                continue
            for p in nodes.pods(row).values():
                if p.deleting and p.preempted and victim_priority(p, groups) < group.priority:
                    return True
        return False

    @staticmethod
    def _current(members: Sequence[PodInfo]) -> tuple[tuple[PodInfo, str], ...]:
        """The members' nominations as they stand (`buildCurrentNominatingInfos`)."""
        return tuple((m, m.nominated_node_name) for m in members if m.nominated_node_name)


class _Reprieve:
    """The cluster as the reprieve sees it: the node table as it is, less the victims still
    evicted and the group's own reserved members, plus the members placed."""

    def __init__(
        self,
        handle: Handle,
        group: SchedulingGroup,
        assignments: Sequence[Assignment],
        reserved: Sequence[PodInfo],
        row_of: Mapping[str, int],
    ) -> None:
        self.handle = handle
        self.group = group
        self.assignments = assignments
        nodes = handle.nodes
        self.placed_on: dict[int, list[Assignment]] = {}
        for a in assignments:
            row = nodes.index.get(a.node)
            if row is not None:
                self.placed_on.setdefault(row, []).append(a)
        self.gone: dict[int, dict[str, PodInfo]] = {}
        for p in reserved:
            row = row_of.get(p.uid)
            if row is not None:
                self.gone.setdefault(row, {})[p.uid] = p
        self.members = {a.pod.uid for a in assignments}

    def take_off(self, victim: Victim, row_of: Mapping[str, int]) -> None:
        for p in victim.pods:
            self.gone.setdefault(row_of[p.uid], {})[p.uid] = p

    def fits_with(self, victim: Victim, row_of: Mapping[str, int]) -> bool:
        """Put `victim` back; True (it stays back: reprieved) when every member placed on a
        node it occupies still fits there; else it is taken off again."""
        rows = {row_of[p.uid] for p in victim.pods}
        for p in victim.pods:
            self.gone[row_of[p.uid]].pop(p.uid, None)
        if all(self._fits(row) for row in rows if row in self.placed_on):
            return True
        self.take_off(victim, row_of)
        return False

    def _fits(self, row: int) -> bool:
        filters = self.handle.filters
        assert filters is not None, "a group preemption outside a Framework"
        nodes = self.handle.nodes
        removed = list(self.gone.get(row, {}).values())
        others = [
            p
            for p in self.handle.nominator.on_node(nodes.names[row])
            if p.uid not in self.members and p.priority >= self.group.priority
        ]
        added: list[PodInfo] = []
        for a in self.placed_on[row]:
            for extra in (others, ()) if others else ((),):
                status = filters.filter_what_if(
                    a.state, a.pod, nodes, row, (), removed, [*added, *extra]
                )
                if not status.ok:
                    return False
            added.append(a.pod)
        return True


def _code_name(code: Code) -> str:
    """kube-scheduler's `Code.String()`."""
    return {
        Code.SUCCESS: "Success",
        Code.ERROR: "Error",
        Code.UNSCHEDULABLE: "Unschedulable",
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    }.get(code, code.name.title())
