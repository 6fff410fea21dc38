"""What plugins read of the scheduler's stores, through the `Handle`: kube-scheduler's listers
(`k8s.io/kube-scheduler/framework/listers.go`, and the informers' listers its plugins hold).

The cache keeps the stores (`ascheduler.cache`: cluster objects, storage objects, pod
groups, CSI attachments) and alone writes them from informer events; a plugin is written
against these views, which say what it may read and the few things it may write
(VolumeBinding's assumptions, the gang plugins' bookkeeping of a group's round). Every view
has an empty implementation here (`no_objects()`...), the default of a `Handle` built without a
cache: one that only computes, such as a profile's validation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol, TypeVar, runtime_checkable

from ascheduler.framework.podindex import IntArray
from ascheduler.model import PodInfo
from ascheduler.model.objects import DisruptionBudget
from ascheduler.model.podgroups import PodGroupSpec, SchedulingGroup, Workload
from ascheduler.model.storage import (
    CSIDriver,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeAttachment,
    VolumeClaim,
)
from ascheduler.model.topology import LabelSelector, selector_from_set

T = TypeVar("T")


class AssumeError(RuntimeError):
    """The object is gone or changed since the version being assumed over."""


class ClaimError(Exception):
    """A new pod's claim is missing or not its own (kube-scheduler's message)."""


class ClusterObjectsView(Protocol):
    """Namespaces, the Services and controllers selecting pods, PodDisruptionBudgets."""

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """The labels of namespace `name` (none if it is not known)."""
        ...

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]: ...

    def budgets_for(self, namespaces: Iterable[str]) -> list[DisruptionBudget]:
        """The PodDisruptionBudgets of these namespaces."""
        ...

    def default_selector(self, pod: PodInfo) -> LabelSelector:
        """kube-scheduler's `helper.DefaultSelector` (PodTopologySpread's defaults)."""
        ...


class AssumeCacheView(Protocol[T]):
    """Objects by key as the informer has them (`informed`), overlaid by the versions
    VolumeBinding assumed (`get`): kube-scheduler's `AssumeCache`."""

    @property
    def informed(self) -> Mapping[str, T]: ...

    def get(self, key: str) -> T | None: ...

    def values(self) -> Iterable[T]: ...

    def assume(self, obj: T) -> None:
        """`obj` as it will be once written; `AssumeError` unless it comes from the version
        the cache has."""
        ...

    def restore(self, key: str) -> None:
        """The informer's version again (an assumption undone)."""
        ...


class StorageView(Protocol):
    """PersistentVolumes, claims, storage classes and CSI objects, with VolumeBinding's
    assumptions."""

    @property
    def claims(self) -> AssumeCacheView[VolumeClaim]: ...

    @property
    def volumes(self) -> AssumeCacheView[Volume]: ...

    #: Bumped whenever a CSINode changes.
    @property
    def csi_node_generation(self) -> int: ...

    def claim(self, namespace: str, name: str) -> VolumeClaim | None: ...

    def volume(self, name: str) -> Volume | None: ...

    def storage_class(self, name: str) -> StorageClass | None: ...

    def csi_node(self, name: str) -> CSINode | None: ...

    def csi_driver(self, name: str) -> CSIDriver | None: ...

    def attachments_of_volume(self, name: str) -> list[VolumeAttachment]: ...

    def volumes_of_class(self, name: str) -> Iterator[Volume]:
        """The volumes of a storage class (assumed ones included)."""
        ...

    def capacities_of_class(self, name: str) -> Iterator[StorageCapacity]: ...


class AttachmentsView(Protocol):
    """CSI volumes attached per node and driver (NodeVolumeLimits)."""

    def resolve(self, pod: PodInfo, *, new: bool) -> dict[str, str]:
        """A pod's countable volumes: unique volume -> driver (`ClaimError` for a new pod
        whose claim is missing or not its own)."""
        ...

    def attached(self, driver: str) -> IntArray:
        """Per row, the unique volumes of `driver` attached."""
        ...

    def on_node(self, node: str) -> dict[str, tuple[str, int, int]]: ...

    def volumes_of(self, uid: str) -> dict[str, str]: ...

    def rows_with(self, unique: str) -> list[int]:
        """The rows where a pod uses the volume `unique`."""
        ...


@runtime_checkable
class GangView(Protocol):
    """One pod group's pods as the scheduler knows them; the gang plugins keep the round's
    state on it (`admitted`, `failed`, `deadline`...). Queue events of a group's new members
    carry it (`isinstance` tells it from other objects)."""

    key: str
    pods: dict[str, PodInfo]
    #: How many of `pods` scheduling gates hold.
    gated: int
    quorum: int | None
    assigned: set[str]
    assumed: set[str]
    waiting: set[str]
    deadline: float | None
    admitted: bool
    failed: tuple[str, str, str] | None
    out_of_reach: str
    failed_until: float
    backoff_why: str
    dooms: int
    sort_time: float | None

    @property
    def gate_key(self) -> str: ...

    def ready(self) -> int:
        """Members not held by scheduling gates."""
        ...

    def placed(self) -> int:
        """Members bound or assumed."""
        ...

    def unscheduled(self) -> list[str]: ...


#: Told of a change of a group's pods.
GangWatcher = Callable[[GangView], None]
#: Told of a group member whose scheduling attempt failed (no node, or an error), and of the
#: plugin that rejected it ("" when none did).
FailureWatcher = Callable[[PodInfo, str], None]


class GangsView(Protocol):
    """Pod groups: the PodGroup and Workload objects, and each group's pods."""

    @property
    def pod_groups(self) -> Mapping[str, PodGroupSpec]: ...

    @property
    def workloads(self) -> Mapping[str, Workload]: ...

    @property
    def scheduling_groups(self) -> Mapping[str, SchedulingGroup]: ...

    #: Called after any change of a group's pods the informer shows.
    @property
    def watchers(self) -> list[GangWatcher]: ...

    #: Called when a pod's scheduling attempt failed (the pod group cycle of v1.36 on fails
    #: the whole group's attempt with it).
    @property
    def failure_watchers(self) -> list[FailureWatcher]: ...

    def member_failed(self, pod: PodInfo, plugin: str) -> None:
        """A pod's scheduling attempt failed (rejected by `plugin`, "" when by none): the
        failure watchers are told."""
        ...

    def __len__(self) -> int:
        """How many groups have pods (or assumed members)."""
        ...

    def get(self, key: str) -> GangView | None: ...

    def of(self, pod: PodInfo) -> GangView | None: ...

    def assume(self, pod: PodInfo) -> GangView | None:
        """A member reserved (not bound yet)."""
        ...

    def forget(self, pod: PodInfo) -> GangView | None:
        """A reserved member let go (unreserved, or bound and seen)."""
        ...

    def sort_position(self, pod: PodInfo, timestamp: float) -> tuple[float, str]:
        """Where a pod sorts among pods of its priority (members of a group together)."""
        ...


# -- the empty stores of a Handle without a cache ------------------------------------------


class _NoObjects:
    def namespace_labels(self, name: str) -> Mapping[str, str]:
        return {}

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset()

    def budgets_for(self, namespaces: Iterable[str]) -> list[DisruptionBudget]:
        return []

    def default_selector(self, pod: PodInfo) -> LabelSelector:
        return selector_from_set({})


class _NoneAssumed(AssumeCacheView[T]):
    @property
    def informed(self) -> Mapping[str, T]:
        return {}

    def get(self, key: str) -> T | None:
        return None

    def values(self) -> Iterable[T]:
        return ()

    def assume(self, obj: T) -> None:
        raise AssumeError("no storage objects: nothing to assume over")

    def restore(self, key: str) -> None:
        return None


class _NoStorage:
    claims: AssumeCacheView[VolumeClaim] = _NoneAssumed()
    volumes: AssumeCacheView[Volume] = _NoneAssumed()
    csi_node_generation = 0

    def claim(self, namespace: str, name: str) -> VolumeClaim | None:
        return None

    def volume(self, name: str) -> Volume | None:
        return None

    def storage_class(self, name: str) -> StorageClass | None:
        return None

    def csi_node(self, name: str) -> CSINode | None:
        return None

    def csi_driver(self, name: str) -> CSIDriver | None:
        return None

    def attachments_of_volume(self, name: str) -> list[VolumeAttachment]:
        return []

    def volumes_of_class(self, name: str) -> Iterator[Volume]:
        return iter(())

    def capacities_of_class(self, name: str) -> Iterator[StorageCapacity]:
        return iter(())


class _NoGangs:
    pod_groups: Mapping[str, PodGroupSpec] = {}
    workloads: Mapping[str, Workload] = {}
    scheduling_groups: Mapping[str, SchedulingGroup] = {}

    def __init__(self) -> None:
        self.watchers: list[GangWatcher] = []
        self.failure_watchers: list[FailureWatcher] = []

    def __len__(self) -> int:
        return 0

    def member_failed(self, pod: PodInfo, plugin: str) -> None:
        return None

    def get(self, key: str) -> GangView | None:
        return None

    def of(self, pod: PodInfo) -> GangView | None:
        return None

    def assume(self, pod: PodInfo) -> GangView | None:
        return None

    def forget(self, pod: PodInfo) -> GangView | None:
        return None

    def sort_position(self, pod: PodInfo, timestamp: float) -> tuple[float, str]:
        return timestamp, ""


def no_objects() -> ClusterObjectsView:
    """No namespaces, Services, controllers or budgets."""
    return _NoObjects()


def no_storage() -> StorageView:
    """No storage objects (assuming one fails: it is not found)."""
    return _NoStorage()


def no_gangs() -> GangsView:
    """No pod groups."""
    return _NoGangs()
