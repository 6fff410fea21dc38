"""What the scheduler knows of each pod group's pods (the groups themselves:
`ascheduler.model.podgroups`).

`Gangs` is the store both gang plugins read (through `ascheduler.framework.listers.GangsView`):
the group objects as the informers have them, and per group its pods (every pod the informer
has, bound or not, as kube-scheduler's workload manager keeps them), which of them are assumed
(reserved, not yet bound) and which wait on Permit. Everything runs on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ascheduler.framework.listers import FailureWatcher, GangWatcher
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import (
    POD_GROUP,
    POD_GROUP_LABEL,
    SCHEDULING_GROUP,
    WORKLOAD,
    PodGroupSpec,
    SchedulingGroup,
    Workload,
    group_key,
    object_of,
)


class Gang:
    """What the scheduler knows of one group's pods. `key` is also what queue events about
    the group carry (`gate_key`), so that only its own held members look at them."""

    __slots__ = (
        "_placed",
        "admitted",
        "assigned",
        "assumed",
        "backoff_why",
        "deadline",
        "dooms",
        "failed",
        "failed_until",
        "gated",
        "key",
        "out_of_reach",
        "pods",
        "quorum",
        "sort_time",
        "waiting",
    )

    def __init__(self, key: str) -> None:
        self.key = key
        #: Every pod of the group the informer has, by uid.
        self.pods: dict[str, PodInfo] = {}
        #: How many of them scheduling gates hold.
        self.gated = 0
        #: The group's quorum as its plugin last read it (None: not read yet): members added
        #: before there are that many pods wake nobody.
        self.quorum: int | None = None
        self.assigned: set[str] = set()
        #: Reserved by this scheduler and not bound yet (waiting on Permit, or binding).
        self.assumed: set[str] = set()
        #: Assumed members waiting on Permit for the rest.
        self.waiting: set[str] = set()
        #: When the members waiting now time out (monotonic; None: nobody waits).
        self.deadline: float | None = None
        #: The group reached its quorum this round: later members bind at once.
        self.admitted = False
        #: (member uid, member name, why) of the member whose failure doomed the group's round.
        self.failed: tuple[str, str, str] | None = None
        #: 1.37: GangScheduling's PlacementFeasible verdict in `failed`'s line, as the members
        #: the pod group cycle has not tried yet are told it (without the group preemption's).
        self.out_of_reach = ""
        #: A failed group is not tried again before this time (monotonic).
        self.failed_until = 0.0
        #: What failed the round the group backs off from (said while it backs off).
        self.backoff_why = ""
        #: Rounds doomed in a row (since the group was last admitted): they space the retries.
        self.dooms = 0
        #: Where the group's members sort in the queue (the first member's queue time).
        self.sort_time: float | None = None
        #: Members (still in `pods`) bound or assumed: kept as they change, so counting them
        #: costs nothing however large the group.
        self._placed: set[str] = set()

    @property
    def gate_key(self) -> str:
        return self.key

    def ready(self) -> int:
        """Members that can be scheduled now: not held by scheduling gates."""
        return len(self.pods) - self.gated

    def placed(self) -> int:
        """Members bound or assumed (a member deleted meanwhile no longer counts)."""
        return len(self._placed)

    def _recount(self, uid: str) -> None:
        if uid in self.pods and (uid in self.assigned or uid in self.assumed):
            self._placed.add(uid)
        else:
            self._placed.discard(uid)

    def unscheduled(self) -> list[str]:
        return [uid for uid in self.pods if uid not in self.assigned and uid not in self.assumed]


#: A change that may let held members in: a pod added to the group, or one ungated.
MemberListener = Callable[[Gang], None]


class Gangs:
    """Pod groups: the PodGroup, Workload and `scheduling.k8s.io` PodGroup objects, and each
    group's pods."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pod_groups: dict[str, PodGroupSpec] = {}
        self.workloads: dict[str, Workload] = {}
        self.scheduling_groups: dict[str, SchedulingGroup] = {}
        self._gangs: dict[str, Gang] = {}
        #: `namespace/name` of a PodGroup or Workload -> the keys of its groups
        self._by_object: dict[str, set[str]] = {}
        self._of: dict[str, str] = {}
        #: Called when a group gains a member that may be scheduled (set by the event router:
        #: the queue's move for held siblings).
        self.on_member: MemberListener = lambda _gang: None
        #: Called after any change of a group's pods the informer shows (added, bound,
        #: deleted): the gang plugins' status reports.
        self.watchers: list[GangWatcher] = []
        #: Told of a member whose scheduling attempt failed (the scheduler tells the store).
        self.failure_watchers: list[FailureWatcher] = []
        self.pod_group_handler = _Store(self.pod_groups, lambda key: self._object(POD_GROUP, key))
        self.workload_handler = _Store(self.workloads, lambda key: self._object(WORKLOAD, key))
        self.scheduling_group_handler = _Store(
            self.scheduling_groups, lambda key: self._object(SCHEDULING_GROUP, key)
        )

    def __len__(self) -> int:
        return len(self._gangs)

    def get(self, key: str) -> Gang | None:
        return self._gangs.get(key)

    def of(self, pod: PodInfo) -> Gang | None:
        key = group_key(pod)
        return None if key is None else self._gangs.get(key)

    def all(self) -> Iterable[Gang]:
        return self._gangs.values()

    # -- pods, from the informer -----------------------------------------------------------

    def add_pod(self, pod: PodInfo) -> None:
        key = group_key(pod)
        if key is None:
            return
        old_key = self._of.get(pod.uid)
        if old_key is not None and old_key != key:
            self.remove_pod(pod)
        gang = self._gangs.get(key)
        if gang is None:
            gang = self._gangs[key] = Gang(key)
            self._by_object.setdefault(object_of(key), set()).add(key)
        before = gang.pods.get(pod.uid)
        gang.pods[pod.uid] = pod
        gang.gated += bool(pod.scheduling_gates) - bool(before and before.scheduling_gates)
        self._of[pod.uid] = key
        if pod.assigned:
            gang.assigned.add(pod.uid)
            gang.assumed.discard(pod.uid)
            gang.waiting.discard(pod.uid)
        gang._recount(pod.uid)
        joined = before is None or (before.scheduling_gates and not pod.scheduling_gates)
        # kube-scheduler's quorum counts every pod (gated or not), a PodGroup's the ungated.
        count = len(gang.pods) if not key.startswith(POD_GROUP) else gang.ready()
        if joined and (gang.quorum is None or count >= gang.quorum):
            self.on_member(gang)
        for watcher in self.watchers:
            watcher(gang)

    def remove_pod(self, pod: PodInfo) -> None:
        key = self._of.pop(pod.uid, None)
        if key is None:
            return
        gang = self._gangs.get(key)
        if gang is None:
            return
        gone = gang.pods.pop(pod.uid, None)
        if gone is not None and gone.scheduling_gates:
            gang.gated -= 1
        gang.assigned.discard(pod.uid)
        gang._recount(pod.uid)
        # A member deleted while it waits on Permit or binds stays assumed until its binding
        # cycle unreserves it (`forget`): that is where its waiting siblings are let go.
        if gang.failed is not None and gang.failed[0] == pod.uid:
            # The member that doomed the round is gone: the siblings it turned away may fit.
            gang.failed = None
            if gang.pods:
                self.on_member(gang)
        self._drop_if_empty(gang)
        for watcher in self.watchers:
            watcher(gang)

    def _object(self, kind: str, key: str) -> None:
        """A PodGroup or Workload added or changed: its groups' watchers are told."""
        if not self.watchers:
            return
        for gang_key in sorted(self._by_object.get(key, ())):
            gang = self._gangs.get(gang_key)
            if gang is not None and gang_key.startswith(kind):
                for watcher in self.watchers:
                    watcher(gang)

    def _drop_if_empty(self, gang: Gang) -> None:
        if not gang.pods and not gang.assumed and self._gangs.get(gang.key) is gang:
            del self._gangs[gang.key]
            keys = self._by_object.get(object_of(gang.key))
            if keys is not None:
                keys.discard(gang.key)
                if not keys:
                    del self._by_object[object_of(gang.key)]

    # -- the scheduler's own bookkeeping ---------------------------------------------------

    def member_failed(self, pod: PodInfo, plugin: str) -> None:
        if self.failure_watchers and group_key(pod) is not None:
            for watcher in self.failure_watchers:
                watcher(pod, plugin)

    def assume(self, pod: PodInfo) -> Gang | None:
        gang = self.of(pod)
        if gang is not None and pod.uid in gang.pods:
            gang.assumed.add(pod.uid)
            gang._recount(pod.uid)
        return gang

    def forget(self, pod: PodInfo) -> Gang | None:
        gang = self.of(pod)
        if gang is not None:
            gang.assumed.discard(pod.uid)
            gang.waiting.discard(pod.uid)
            gang._recount(pod.uid)
            if not gang.waiting and not gang.assumed:
                gang.deadline = None
            self._drop_if_empty(gang)
        return gang

    def sort_position(self, pod: PodInfo, timestamp: float) -> tuple[float, str]:
        """Where a pod sorts among pods of its priority: members of a group together, at the
        time the group's first member was queued; any other pod at its own time."""
        if (
            pod.workload_ref is None
            and pod.scheduling_group is None
            and POD_GROUP_LABEL not in pod.labels
        ):
            return timestamp, ""
        key = group_key(pod)
        gang = self._gangs.get(key) if key is not None else None
        if gang is None or key is None:
            return timestamp, ""
        if gang.sort_time is None:
            gang.sort_time = timestamp
        return gang.sort_time, key


class _Store:
    """An informer handler keeping one kind by `namespace/name`; `changed` is told the key of
    each object added or updated."""

    def __init__(self, store: dict[str, Any], changed: Callable[[str], None]) -> None:
        self.store = store
        self.changed = changed

    def on_add(self, obj: Any) -> None:
        self.store[obj.key] = obj
        self.changed(obj.key)

    def on_update(self, old: Any, new: Any) -> None:
        self.store[new.key] = new
        self.changed(new.key)

    def on_delete(self, obj: Any) -> None:
        self.store.pop(obj.key, None)
