"""The plugin interfaces, one per extension point, with kube-scheduler's names and meaning.

A plugin **subclasses** the interfaces it implements (kube-scheduler's
`var _ framework.FilterPlugin = &Fit{}`), so `mypy --strict` proves its methods have the right
signatures, and a method left out or misspelt is an abstract method the framework names when
it builds the profile. The framework also checks out-of-tree plugins at run time: an override
with the wrong parameters, or `async` where the interface is not (or the other way round), is
refused, naming the plugin and the method.

Filter and Score work on all nodes at once: a Filter returns which nodes it rejects (boolean
masks over the `NodeTable` rows, one per reason), a Score returns an integer array over the
feasible rows. That is what lets a Python scheduler keep pace with a Go one (the figures:
docs/performance.md): the per-node loop happens inside numpy. `RowFilterPlugin` and
`RowScorePlugin` (in `framework.rows`) adapt per-node code, kube-scheduler's
`Filter(nodeInfo)` / `Score(nodeName)`, for authors who would rather not write numpy; they pay
a Python call per node.

Everything up to Permit runs inside the serial scheduling cycle and must not await. PreBind,
Bind and PostBind run in the pod's binding cycle, concurrently with other pods, and may await.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

import numpy as np

from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SchedulingGroup

MAX_NODE_SCORE: Final = 100
#: CycleState key: annotations a Bind plugin puts on the Binding (the API server copies a
#: Binding's annotations onto the pod as it binds it, in the same write).
BINDING_ANNOTATIONS = "BindingAnnotations"
NO_NODES_MESSAGE: Final = "no nodes available to schedule pods"


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    #: kube-scheduler's Pending: the placement stands, but the pod must wait for something
    #: outside the scheduler before it can be bound (another instance's node lock, here).
    #: A rejection (`Unschedulable`, not an error); from PreBind or Bind the pod goes back
    #: with backoff, as kube-scheduler puts back a pod no plugin rejected in a FitError.
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return Status(self.code, self.reasons, plugin)

    @classmethod
    def error(cls, message: str, plugin: str = "") -> Status:
        return cls(Code.ERROR, (message,), plugin)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "", resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return cls(code, reasons, plugin)

    @classmethod
    def pending(cls, message: str, plugin: str = "") -> Status:
        return cls(Code.PENDING, (message,), plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


class CycleState:
    """Per-attempt scratch space that plugins share between their extension points.

    A dry run (`ascheduler explain`, the `/debug/pods` endpoint) sets `dry_run`: a plugin then
    changes nothing outside the state (no event, no status write, no eviction, no group
    bookkeeping), it only says what it would do."""

    __slots__ = ("_data", "dry_run", "skip_filter", "skip_score", "timings")

    def __init__(self, *, dry_run: bool = False) -> None:
        self.dry_run = dry_run
        self._data: dict[Hashable, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        #: Seconds spent per extension point in this cycle, for the sampled metrics.
        self.timings: dict[str, float] = {}

    def write(self, key: Hashable, value: Any) -> None:
        self._data[key] = value

    def read(self, key: Hashable) -> Any:
        return self._data.get(key)


class BindingSlot:
    """One of the scheduler's binding-cycle slots (`bindingConcurrency`), held by a binding
    cycle from its start to its end. A plugin that waits on something outside the scheduler
    (a controller finishing a volume's bind, a gang's other members) gives it up meanwhile
    with `released(state)`, so waits never stop the scheduling of other pods."""

    __slots__ = ("_gate", "held")

    def __init__(self, gate: asyncio.Semaphore) -> None:
        self._gate = gate
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._gate.release()

    async def acquire(self) -> None:
        if not self.held:
            await self._gate.acquire()
            self.held = True


BINDING_SLOT: Final = "ascheduler/binding-slot"


@contextlib.asynccontextmanager
async def slot_released(state: CycleState) -> AsyncIterator[None]:
    """The binding cycle's slot given up for the block (nothing when it has none), and
    taken back after it."""
    slot: BindingSlot | None = state.read(BINDING_SLOT)
    if slot is None or not slot.held:
        yield
        return
    slot.release()
    try:
        yield
    finally:
        await slot.acquire()


@dataclass(frozen=True, slots=True)
class Rejection:
    """Nodes a filter rejects for one reason."""

    reason: str
    nodes: BoolArray
    code: Code = Code.UNSCHEDULABLE


@dataclass(frozen=True, slots=True)
class FilterResult:
    """What one Filter rejects: the union of its rejections' masks is `rejected`.

    A node rejected for several reasons by one plugin (NodeResourcesFit: `Insufficient cpu` and
    `Insufficient memory`) counts under each of them in the failure message, as in
    kube-scheduler.
    """

    rejected: BoolArray
    rejections: Sequence[Rejection]

    @classmethod
    def single(cls, reason: str, nodes: BoolArray, code: Code = Code.UNSCHEDULABLE) -> FilterResult:
        return cls(nodes, (Rejection(reason, nodes, code),))

    @classmethod
    def of(cls, rejected: BoolArray, *rejections: Rejection) -> FilterResult | None:
        """The rejections that reject any node (None if none does); `rejected` is their
        union."""
        kept = tuple(r for r in rejections if r.nodes.any())
        return cls(rejected, kept) if kept else None


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Node names a PreFilter narrows the candidates to (None: all nodes)."""

    node_names: frozenset[str] | None = None


@dataclass
class Diagnosis:
    """Why a pod fits no node (kube-scheduler's `Diagnosis` and `FitError`).

    The reasons are kept the columnar way: each filter's result in order (`filtered`), and
    per row the code of the first plugin that rejected it (`codes`, Code.SUCCESS where none
    did). `statuses()` rebuilds kube-scheduler's per-node status map from them, for PostFilter
    plugins that think per node.
    """

    num_nodes: int
    reason_counts: dict[str, int] = field(default_factory=dict)
    #: The PreFilter rejection that failed the whole pod, if that is what happened.
    prefilter_status: Status | None = None
    rejecting_plugins: set[str] = field(default_factory=set)
    unresolvable: bool = False
    #: Per row: the Code of the node's first rejection (Code.SUCCESS where it passed).
    codes: IntArray | None = None
    #: (plugin, result) of each filter that rejected any node, in the order they ran.
    filtered: Sequence[tuple[str, FilterResult]] = ()
    #: (reason, rows) of the nodes PreFilter results left out, if any.
    excluded: tuple[str, BoolArray] | None = None
    postfilter_message: str = ""
    #: Statuses given outside the plugins (HTTP extenders), by node name.
    external: dict[str, Status] = field(default_factory=dict)
    #: The node names the rows refer to, when the table may have moved on since (a profile
    #: with extenders awaits their answers, so a PostFilter after them reads `codes` and
    #: `filtered` by these names, not by the live table's rows).
    node_names: Sequence[str] | None = None

    def add_external(self, statuses: Mapping[str, Status]) -> None:
        """Rejections from outside the plugins (an extender's), counted in the message."""
        for name, status in statuses.items():
            self.external[name] = status
            for reason in status.reasons:
                self.reason_counts[reason] = self.reason_counts.get(reason, 0) + 1
            if status.plugin:
                self.rejecting_plugins.add(status.plugin)
            if status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                self.unresolvable = False

    @property
    def prefilter_message(self) -> str:
        return self.prefilter_status.message if self.prefilter_status is not None else ""

    def message(self) -> str:
        """`0/N nodes are available: <PreFilter or Filter reasons>. <PostFilter message>`."""
        if self.num_nodes == 0:
            return NO_NODES_MESSAGE
        text = f"0/{self.num_nodes} nodes are available:"
        if self.prefilter_message:
            text += f" {self.prefilter_message}."
        else:
            parts = sorted(f"{count} {reason}" for reason, count in self.reason_counts.items())
            if parts:
                text += f" {', '.join(parts)}."
        if self.postfilter_message:
            text += f" {self.postfilter_message}"
        return text

    def statuses(self, names: Sequence[str]) -> dict[str, Status]:
        """kube-scheduler's NodeToStatus map: each rejected node's status (its first rejecting
        plugin, with all of that plugin's reasons for it)."""
        names = self.node_names if self.node_names is not None else names
        if self.prefilter_status is not None:
            return {name: self.prefilter_status for name in names}
        out: dict[str, Status] = dict(self.external)
        if self.excluded is not None:
            reason, rows = self.excluded
            for row in np.flatnonzero(rows):
                out[names[int(row)]] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,))
        for plugin, result in self.filtered:
            for rejection in result.rejections:
                for row in np.flatnonzero(rejection.nodes):
                    name = names[int(row)]
                    seen = out.get(name)
                    if seen is not None and seen.plugin != plugin:
                        continue  # an earlier plugin rejected it first
                    reasons = (*seen.reasons, rejection.reason) if seen else (rejection.reason,)
                    code = Code(int(self.codes[row])) if self.codes is not None else rejection.code
                    out[name] = Status(code, reasons, plugin)
        return out


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """A PostFilter's outcome: SUCCESS with a node to nominate (preemption made room there),
    or a rejection whose message joins the failure message."""

    status: Status
    nominated_node: str = ""
    #: The pod's earlier nomination no longer makes sense (kube-scheduler's
    #: NominatingInfo with an empty node, override mode): clear it.
    clear_nomination: bool = False


@dataclass(frozen=True, slots=True)
class QueuedPodInfo:
    pod: PodInfo
    timestamp: float
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: frozenset[str] = field(default_factory=frozenset)
    #: Last moved out of the unschedulable pool by the periodic flush, not by an event
    #: (kube-scheduler's `WasFlushedFromUnschedulable`, 1.36): a pod scheduled then may point
    #: to a hint or an event missed. Cleared when an attempt puts it back.
    flushed: bool = False


class ClusterEvent(enum.Enum):
    """What changed in the cluster; the queue moves pods whose rejecting plugins care."""

    NODE_ADD = "NodeAdd"
    NODE_ALLOCATABLE = "NodeAllocatableChange"
    NODE_LABEL = "NodeLabelChange"
    NODE_ANNOTATION = "NodeAnnotationChange"
    NODE_TAINT = "NodeTaintChange"
    NODE_SCHEDULABLE = "NodeSchedulableChange"
    #: `status.declaredFeatures` changed (kube-scheduler's UpdateNodeDeclaredFeature, which
    #: it extracts only while the NodeDeclaredFeatures gate is on).
    NODE_DECLARED_FEATURES = "NodeDeclaredFeatureChange"
    #: `spec.podPreemptionPolicy` changed (kube-scheduler's UpdateNodePreemptionPolicy).
    NODE_PREEMPTION_POLICY = "NodePreemptionPolicyChange"
    NODE_DELETE = "NodeDelete"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    #: A bound pod's requests grew (kube-scheduler's AssignedPod/UpdatePodScaleUp), emitted
    #: while InPlacePodVerticalScalingSchedulerPreemption is on: it may take the room a
    #: deferred resize on that node waits for, so that pod must preempt again.
    ASSIGNED_POD_SCALE_UP = "AssignedPodScaleUp"
    UNSCHEDULED_POD_UPDATE = "UnscheduledPodUpdate"
    #: A namespace added, relabelled or deleted (pod affinity's namespaceSelector).
    NAMESPACE_CHANGE = "NamespaceChange"
    #: Storage objects (the volume plugins).
    CLAIM_ADD = "PersistentVolumeClaimAdd"
    CLAIM_UPDATE = "PersistentVolumeClaimUpdate"
    VOLUME_ADD = "PersistentVolumeAdd"
    VOLUME_UPDATE = "PersistentVolumeUpdate"
    STORAGE_CLASS_ADD = "StorageClassAdd"
    STORAGE_CLASS_UPDATE = "StorageClassUpdate"
    CSI_NODE_ADD = "CSINodeAdd"
    CSI_NODE_UPDATE = "CSINodeUpdate"
    CSI_DRIVER_UPDATE = "CSIDriverUpdate"
    CAPACITY_ADD = "CSIStorageCapacityAdd"
    CAPACITY_UPDATE = "CSIStorageCapacityUpdate"
    VOLUME_ATTACHMENT_DELETE = "VolumeAttachmentDelete"
    #: Dynamic Resource Allocation objects (DynamicResources).
    RESOURCE_CLAIM_ADD = "ResourceClaimAdd"
    RESOURCE_CLAIM_UPDATE = "ResourceClaimUpdate"
    DEVICE_CLASS_ADD = "DeviceClassAdd"
    DEVICE_CLASS_UPDATE = "DeviceClassUpdate"
    RESOURCE_SLICE_ADD = "ResourceSliceAdd"
    RESOURCE_SLICE_UPDATE = "ResourceSliceUpdate"
    #: Pod groups (Coscheduling, GangScheduling): a member that may be scheduled appeared (a
    #: pod added, or its scheduling gates removed); the event's object is the group's `Gang`.
    GANG_MEMBER_ADD = "GangMemberAdd"
    POD_GROUP_ADD = "PodGroupAdd"
    POD_GROUP_UPDATE = "PodGroupUpdate"
    WORKLOAD_ADD = "WorkloadAdd"
    #: `scheduling.k8s.io` PodGroups (v1.36 on; kube-scheduler's `PodGroup` resource).
    SCHEDULING_GROUP_ADD = "SchedulingGroupAdd"
    SCHEDULING_GROUP_UPDATE = "SchedulingGroupUpdate"
    FORCE = "Force"


# -- the interfaces ------------------------------------------------------------------------


class Plugin(abc.ABC):  # noqa: B024 (a base with no method of its own, on purpose)
    """Every plugin: a `name`, kube-scheduler's for the plugins it has. Subclass the
    interfaces below, not this."""

    name: ClassVar[str] = ""


class PreEnqueuePlugin(Plugin):
    @abc.abstractmethod
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """SUCCESS lets the pod into the active queue; anything else holds it (gated)."""


class QueueSortPlugin(Plugin):
    @abc.abstractmethod
    def sort_key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        """Smaller keys pop first (kube-scheduler's `Less`, made a key for the heap)."""


class PreFilterPlugin(Plugin):
    @abc.abstractmethod
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        """Prepare the Filter (through `state`), narrow the nodes, or reject the pod; SKIP
        also skips this plugin's Filter."""


class FilterPlugin(Plugin):
    @abc.abstractmethod
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        """Rejections over all rows of `nodes`; None when every node passes."""


class WhatIfFilterPlugin(FilterPlugin):
    """A Filter that also answers for one row as if some pods were gone from that node and
    others were on it: preemption's dry runs (victims removed, then reprieved one by one)
    and the pods nominated to a node (added). kube-scheduler's per-node Filter with its
    PreFilter extensions (AddPod / RemovePod) applied to the cycle's state.

    A Filter whose verdict depends on the pods on nodes implements this; one that reads
    only the node (taints, labels, the node's own fields) need not: its verdict from the
    columnar pass stands for the row."""

    @abc.abstractmethod
    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        """The row's verdict with `removed` (pods on this row) gone and `added` on it; the
        state is the one this plugin's PreFilter wrote for the unchanged table."""


class ExplainFilterPlugin(FilterPlugin):
    """A Filter that can say, for one node it rejected, the facts behind the verdict: the
    numbers (`cpu: requested 3, free 1.2 of 4`), the taint, the pod in the way. What
    `ascheduler explain` and `/debug/pods` show beside the reason; a Filter without it is
    explained by its reasons alone. Called off the hot path, one row at a time, with the
    state its PreFilter wrote."""

    @abc.abstractmethod
    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """Short lines on why `row` is rejected; [] when there is nothing to add."""


class PostFilterPlugin(Plugin):
    @abc.abstractmethod
    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        """Runs when no node fits (preemption makes room here)."""


class PodGroupPostFilterPlugin(Plugin):
    """kube-scheduler's PodGroupPostFilter (1.37, with GenericWorkload): runs when a pod
    group's attempt fails as a whole, in the profile's order (`Framework.pod_group_post_filter`):
    Success ends the run, UnschedulableAndUnresolvable is the whole answer, an Unschedulable
    answer's reasons are kept and the next plugin asked, an Error ends it as an error."""

    @abc.abstractmethod
    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        """What this plugin can do for `group` (None: the PodGroup object is not in the
        cache), whose attempt failed with `pod` the member that came up first."""


class PreScorePlugin(Plugin):
    @abc.abstractmethod
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        """Prepare the Score; SKIP skips this plugin's Score."""


class ScorePlugin(Plugin):
    @abc.abstractmethod
    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        """Raw scores for the rows in `feasible` (same order)."""

    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """kube-scheduler's ScoreExtensions: the raw scores mapped to 0..MAX_NODE_SCORE.
        By default they are taken as they are."""
        return scores


class RowLocalScorePlugin(ScorePlugin):
    """A Score whose value for a node depends only on that node's row: the framework keeps
    every row's score for a pod shape and recomputes only rows that changed since."""

    @abc.abstractmethod
    def score_key(self, pod: PodInfo) -> Hashable:
        """A key such that a node's raw score depends only on it and on that node's own row
        (its usage and allocatable)."""

    @abc.abstractmethod
    def score_row(self, pod: PodInfo, nodes: NodeTable, row: int) -> int:
        """The raw score of one row, equal to `score` for that row, in plain Python (numpy's
        per-call overhead dominates for the handful of rows that change per cycle)."""


class ReservePlugin(Plugin):
    @abc.abstractmethod
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo `reserve`; idempotent, and called even when this plugin's `reserve` did not
        run (a later Reserve failed)."""


class PermitPlugin(Plugin):
    @abc.abstractmethod
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """(SUCCESS | WAIT | rejection, timeout seconds for WAIT)."""


class PreBindPlugin(Plugin):
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """kube-scheduler's `PreBindPreFlight`: SUCCESS when `pre_bind` has work to do for
        the pod, SKIP when it has none. A pod some plugin has work for is registered as in
        PreBind, where preemption may cancel it (1.36 on). The default says there is work:
        a plugin that does not tell is cancellable."""
        return SUCCESS

    @abc.abstractmethod
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


class BindPlugin(Plugin):
    @abc.abstractmethod
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SKIP passes the pod to the next Bind plugin."""


class PostBindPlugin(Plugin):
    @abc.abstractmethod
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


class EnqueueExtensions(Plugin):
    @abc.abstractmethod
    def events_to_register(self) -> frozenset[ClusterEvent]:
        """Cluster events that may make a pod this plugin rejected schedulable."""


class QueueingHintPlugin(Plugin):
    """kube-scheduler's QueueingHintFn: for an event this plugin registered, whether it may
    make a pod it rejected schedulable, judged from the object before and after (`old` is
    None for an addition, `new` for a deletion; PodInfo, Node or Namespace). False keeps the
    pod where it waits, so churn that cannot help does not wake it."""

    @abc.abstractmethod
    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool: ...


class GateKeysPlugin(Plugin):
    """A PreEnqueue plugin that can say which objects a pod it holds back waits for: for an
    event kind it registered, the `namespace/name` of each object (a ResourceClaim, say)
    whose event may let the pod in, or None for any. The queue then looks at the pod only on
    events about those objects, so that a burst of events about others costs it nothing."""

    @abc.abstractmethod
    def gate_keys(self, pod: PodInfo, event: ClusterEvent) -> frozenset[str] | None: ...


#: An extension point, as `KubeSchedulerConfiguration` names it.
ExtensionPoint = Literal[
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "podGroupPostFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
]
#: A profile's plugin lists: the extension points, and multiPoint (every point a plugin has).
PluginSet = ExtensionPoint | Literal["multiPoint"]

#: Extension point -> its interface.
EXTENSION_POINTS: Final[Mapping[ExtensionPoint, type[Plugin]]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "podGroupPostFilter": PodGroupPostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
#: Extension points a release added, with that release (major, minor): a profile of an
#: earlier release has no such field, and its framework runs no plugin there.
POINT_SINCE: Final[Mapping[ExtensionPoint, tuple[int, int]]] = {"podGroupPostFilter": (1, 37)}
#: Every interface a plugin may subclass (the extension points, and their extensions).
INTERFACES: Final[tuple[type[Plugin], ...]] = (
    *EXTENSION_POINTS.values(),
    RowLocalScorePlugin,
    EnqueueExtensions,
    QueueingHintPlugin,
)


def default_normalize(scores: IntArray, *, reverse: bool = False) -> IntArray:
    """kube-scheduler's `DefaultNormalizeScore`: scale to 0..100 by the highest raw score
    (integer arithmetic); `reverse` makes the highest raw score the lowest. All zero raw scores
    give 0 everywhere (100 when reversed)."""
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full_like(scores, MAX_NODE_SCORE if reverse else 0)
    scaled: IntArray = (MAX_NODE_SCORE * scores) // top
    return MAX_NODE_SCORE - scaled if reverse else scaled
