"""The plugin interfaces, one per extension point, with kube-scheduler's names and meaning.

Filter and Score work on all nodes at once: a Filter returns which nodes it rejects (boolean
masks over the `NodeTable` rows, one per reason), a Score returns an integer array over the
feasible rows. That is what makes a Python scheduler as fast as a Go one: the per-node loop
happens inside numpy. A plugin whose logic is naturally per node can still loop; it simply pays
for it.

Everything up to Permit runs inside the serial scheduling cycle and must not await. PreBind,
Bind and PostBind run in the pod's binding cycle, concurrently with other pods, and may await.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ascheduler.cache.table import BoolArray, IntArray, NodeTable
from ascheduler.model import PodInfo

if TYPE_CHECKING:
    from ascheduler.framework.handle import Handle

MAX_NODE_SCORE = 100
#: CycleState key: annotations a Bind plugin puts on the Binding (the API server copies a
#: Binding's annotations onto the pod as it binds it, in the same write).
BINDING_ANNOTATIONS = "BindingAnnotations"


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


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
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

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


SUCCESS = Status()
SKIP = Status(Code.SKIP)


class CycleState:
    """Per-attempt scratch space that plugins share between their extension points."""

    __slots__ = ("_data", "skip_filter", "skip_score", "timings")

    def __init__(self) -> None:
        self._data: dict[Hashable, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        #: Seconds spent per extension point in this cycle, for the sampled metrics.
        self.timings: dict[str, float] = {}

    def write(self, key: Hashable, value: Any) -> None:
        self._data[key] = value

    def read(self, key: Hashable) -> Any:
        return self._data.get(key)


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


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Node names a PreFilter narrows the candidates to (None: all nodes)."""

    node_names: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class QueuedPodInfo:
    pod: PodInfo
    timestamp: float
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: frozenset[str] = field(default_factory=frozenset)


class ClusterEvent(enum.Enum):
    """What changed in the cluster; the queue moves pods whose rejecting plugins care."""

    NODE_ADD = "NodeAdd"
    NODE_ALLOCATABLE = "NodeAllocatableChange"
    NODE_LABEL = "NodeLabelChange"
    NODE_TAINT = "NodeTaintChange"
    NODE_SCHEDULABLE = "NodeSchedulableChange"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    UNSCHEDULED_POD_UPDATE = "UnscheduledPodUpdate"
    FORCE = "Force"


class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        """Smaller keys pop first (kube-scheduler's `Less`, made a key for the heap)."""
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        """Rejections over all rows of `nodes`; None when every node passes."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, failures: Mapping[str, Status]
    ) -> tuple[str | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        """Raw scores for the rows in `feasible` (same order)."""
        ...


@runtime_checkable
class RowLocalScorePlugin(ScorePlugin, Protocol):
    def score_key(self, pod: PodInfo) -> Hashable:
        """A key such that a node's raw score depends only on it and on that node's own row
        (its usage and allocatable). The framework then keeps the scores of every row for the
        key and recomputes only rows that changed since: one row per cycle, typically."""
        ...

    def score_row(self, pod: PodInfo, nodes: NodeTable, row: int) -> int:
        """The raw score of one row, equal to `score` for that row, in plain Python (numpy's
        per-call overhead dominates for the handful of rows that change per cycle)."""
        ...


@runtime_checkable
class NormalizeScorePlugin(ScorePlugin, Protocol):
    def normalize(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...
    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """(SUCCESS | WAIT | rejection, timeout seconds for WAIT)."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SKIP passes the pod to the next Bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> frozenset[ClusterEvent]:
        """Cluster events that may make a pod this plugin rejected schedulable."""
        ...


class PluginFactory(Protocol):
    def __call__(self, args: Mapping[str, Any], handle: Handle) -> Plugin: ...


def default_normalize(scores: IntArray, *, reverse: bool = False) -> IntArray:
    """kube-scheduler's `DefaultNormalizeScore`: scale to 0..100 by the highest raw score
    (integer arithmetic); `reverse` makes the highest raw score the lowest. All zero raw scores
    give 0 everywhere (100 when reversed)."""
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full_like(scores, MAX_NODE_SCORE if reverse else 0)
    scaled: IntArray = (MAX_NODE_SCORE * scores) // top
    return MAX_NODE_SCORE - scaled if reverse else scaled
