"""The scheduling framework, and everything a plugin is written against.

A plugin imports from here only: the interface of each extension point it implements (and
subclasses), `CycleState`, `Status` and its codes, the `Handle`, the `NodeTable` it reads,
`MAX_NODE_SCORE` and the normalizing helper, and `Registration` to declare itself. The records
it is given (`PodInfo`, `Node`) are re-exported from `ascheduler.model`. `RowFilterPlugin` and
`RowScorePlugin` take a plugin written one node at a time (`NodeInfo`), as kube-scheduler's are.
"""

from ascheduler.framework.errors import ConfigError, PluginArgsError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    EXTENSION_POINTS,
    INTERFACES,
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    Rejection,
    ReservePlugin,
    RowLocalScorePlugin,
    ScorePlugin,
    Status,
    default_normalize,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.registry import NoArgs, Registration, Registry
from ascheduler.framework.rows import NodeInfo, RowFilterPlugin, RowScorePlugin
from ascheduler.framework.runtime import (
    Framework,
    PluginRef,
    ProfileSpec,
    ScheduleResult,
    default_plugins,
    multipoint,
)
from ascheduler.framework.waiting import WaitingPod, WaitingPods
from ascheduler.model import Node, PodInfo

__all__ = [
    "EXTENSION_POINTS",
    "INTERFACES",
    "MAX_NODE_SCORE",
    "SKIP",
    "SUCCESS",
    "BindPlugin",
    "BoolArray",
    "ClusterEvent",
    "Code",
    "ConfigError",
    "CycleState",
    "Diagnosis",
    "EnqueueExtensions",
    "FilterPlugin",
    "FilterResult",
    "Framework",
    "Handle",
    "IntArray",
    "NoArgs",
    "Node",
    "NodeInfo",
    "NodeTable",
    "PermitPlugin",
    "Plugin",
    "PluginArgsError",
    "PluginRef",
    "PodInfo",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "ProfileSpec",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "Registration",
    "Registry",
    "Rejection",
    "ReservePlugin",
    "RowFilterPlugin",
    "RowLocalScorePlugin",
    "RowScorePlugin",
    "ScheduleResult",
    "ScorePlugin",
    "Status",
    "WaitingPod",
    "WaitingPods",
    "default_normalize",
    "default_plugins",
    "multipoint",
]
