"""What a plugin may reach besides its arguments: the node table it reads (the same one the
scheduling cycle passes it), pods waiting on Permit, the client for writes, and the other
objects plugins read (namespaces, Services, pod controllers)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ascheduler.dra.store import ResourceObjects
from ascheduler.features import Features
from ascheduler.framework.interface import CycleState, FilterResult, Status
from ascheduler.framework.listers import (
    AttachmentsView,
    ClusterObjectsView,
    GangsView,
    StorageView,
    no_gangs,
    no_objects,
    no_storage,
)
from ascheduler.framework.nodes import NodeTable
from ascheduler.framework.nominated import Nominator
from ascheduler.framework.prebind import PodsInPreBind
from ascheduler.framework.waiting import WaitingPods
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SchedulingGroup

if TYPE_CHECKING:
    from ascheduler.kube import KubeClient
    from ascheduler.locks import DeviceLocks


class FilterRunner(Protocol):
    """The profile's Filters, asked about one node as it would be, and its PodGroupPostFilters
    about a group that failed (`Framework`)."""

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        recorded: Sequence[tuple[str, FilterResult]],
        removed: Sequence[PodInfo] = (),
        added: Sequence[PodInfo] = (),
    ) -> Status: ...

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status: ...


@dataclass(frozen=True, slots=True)
class Assignment:
    """A member of a pod group placed by a group dry run: its node, and the cycle state its
    PreFilter left (with the members before it assumed)."""

    pod: PodInfo
    node: str
    state: CycleState


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    """What the pod group algorithm made of a group on the cluster as it would be: Success
    with where its members go, or why it cannot be placed."""

    status: Status
    assignments: tuple[Assignment, ...] = ()


class GroupPlanner(Protocol):
    """The pod group algorithm run on the cluster as it would be, changing nothing
    (kube-scheduler's `PodGroupSchedulingFunc`): what a workload-aware preemption asks."""

    def members(self, group: SchedulingGroup) -> Sequence[PodInfo]:
        """The group's members the pod group cycle tries (not scheduled, not gated, this
        scheduler's), in its order."""
        ...

    def reserved(self, group: SchedulingGroup) -> Sequence[PodInfo]:
        """The group's members reserved in this scheduler (assumed, waiting on Permit, not
        bound): on the node table now, placed afresh by `place`."""
        ...

    def place(self, group: SchedulingGroup, removed: Sequence[PodInfo]) -> GroupPlacement:
        """The group's members placed one after another, as its cycle would, with `removed`
        (pods on the table) and its reserved members taken off first; the table as it was
        after."""
        ...


def group_uid(group: SchedulingGroup) -> str:
    """The key a group's preemption runs under (the PodGroup's uid, as kube-scheduler's
    executor keys it; its name when the uid is not known)."""
    return group.uid or f"PodGroup:{group.key}"


#: Wakes the pods with these uids wherever they wait.
Activator = Callable[[Iterable[str]], None]


class Evictor(Protocol):
    """Carries out a preemption a PostFilter chose, off the scheduling cycle (the
    scheduler's `preemption.Evictions`): the victims' DisruptionTarget conditions and
    deletions, the preemptor nominated meanwhile."""

    def start(self, preemptor: PodInfo, node: str, victims: Sequence[PodInfo]) -> None: ...

    def start_group(
        self,
        group: SchedulingGroup,
        scheduler: str,
        victims: Sequence[PodInfo],
        members: Sequence[str] = (),
    ) -> None:
        """A workload-aware preemption's victims evicted for `group` (its members, by uid,
        nominated by the plugin, woken as a pod preemptor is when it ends);
        `running(group_uid(group))` holds while it runs."""
        ...

    def running(self, uid: str) -> bool:
        """Whether `uid`'s evictions are still under way (its PreEnqueue holds it)."""
        ...


@dataclass
class Handle:
    nodes: NodeTable = field(default_factory=NodeTable)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    #: Pods whose binding cycle is in PreBind, cancellable by preemption (1.36 on; shared
    #: by every profile, as the pods waiting on Permit are).
    pods_in_pre_bind: PodsInPreBind = field(default_factory=PodsInPreBind)
    #: The client for writes; None where a framework only computes (tests, benchmarks).
    kube: KubeClient | None = None
    profile: str = ""
    #: Namespaces, Services, pod controllers and PodDisruptionBudgets, as the informers
    #: have them (the cache's; none by default).
    objects: ClusterObjectsView = field(default_factory=no_objects)
    #: PersistentVolumes, claims, storage classes and CSI objects, as the informers have
    #: them (with VolumeBinding's assumptions; the cache's, none by default).
    storage: StorageView = field(default_factory=no_storage)
    #: DeviceClasses, ResourceSlices, ResourceClaims and their templates, as the informers
    #: have them (with DynamicResources' allocations in flight).
    resources: ResourceObjects = field(default_factory=ResourceObjects)
    #: The locks new device allocations are written under (None: node locks are off, this
    #: instance is the only allocator).
    device_locks: DeviceLocks | None = None
    #: CSI volumes attached per node (the cache keeps them; None: nothing counts them).
    attachments: AttachmentsView | None = None
    #: Pods nominated to nodes (shared by every profile).
    nominator: Nominator = field(default_factory=Nominator)
    #: The release ascheduler behaves as and the feature gates on there
    #: (`name in handle.features`, `handle.features.since(1, 36)`).
    features: Features = field(default_factory=Features.defaults)
    #: Pod groups and their members (Coscheduling, GangScheduling; the cache's, none by
    #: default).
    gangs: GangsView = field(default_factory=no_gangs)
    #: Set once the profile is wired (`set_activator`, `set_filters`, `set_evictor`), as
    #: kube-scheduler's `SetPodActivator` and `SetPodNominator` are: the queue that wakes
    #: pods, and the scheduler that evicts, are built from the frameworks, so they cannot be
    #: passed in when the Handle is made.
    _activator: Activator | None = field(default=None, init=False, repr=False)
    _filters: FilterRunner | None = field(default=None, init=False, repr=False)
    _evictor: Evictor | None = field(default=None, init=False, repr=False)
    _planner: GroupPlanner | None = field(default=None, init=False, repr=False)

    def set_activator(self, activator: Activator) -> None:
        """Where `wake` sends pods (the scheduling queue's `wake`, keeping each pod's
        backoff); set by the scheduler that owns the queue."""
        self._activator = activator

    def set_filters(self, filters: FilterRunner) -> None:
        """The profile's Filters (set by the Framework this handle is built into)."""
        self._filters = filters

    def set_evictor(self, evictor: Evictor) -> None:
        """Who carries out chosen preemptions; set by the scheduler that runs the
        profile."""
        self._evictor = evictor

    def set_group_planner(self, planner: GroupPlanner) -> None:
        """The pod group algorithm's dry run (set by the scheduler that owns the cache)."""
        self._planner = planner

    def wake(self, uids: Iterable[str]) -> None:
        """Wakes pods (by uid) wherever they wait, as kube-scheduler's `Activate` does but
        keeping each pod's backoff. Before a scheduler owns the queue (`explain`, benchmarks,
        a framework that only computes) there is nothing to wake, and nothing happens."""
        if self._activator is not None:
            self._activator(uids)

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        """What the profile's PodGroupPostFilter plugins say of a group whose attempt failed
        (1.37 with GenericWorkload; before a Framework is built on this handle, or at another
        release, an Unschedulable status without reasons)."""
        if self._filters is None:
            return Status.unschedulable()
        return self._filters.pod_group_post_filter(group, pod)

    @property
    def filters(self) -> FilterRunner | None:
        """The profile's Filters; None until a Framework is built on this handle."""
        return self._filters

    @property
    def evictor(self) -> Evictor | None:
        """Carries out chosen preemptions. None: dry runs only (`explain`, benchmarks),
        nothing is evicted."""
        return self._evictor

    @property
    def group_planner(self) -> GroupPlanner | None:
        """The pod group algorithm's dry run; None where no scheduler owns a cache (a group
        preemption then finds no placement)."""
        return self._planner
