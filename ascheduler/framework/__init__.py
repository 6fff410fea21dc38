"""The scheduling framework, and everything a plugin is written against.

A plugin imports from here only: the interface of each extension point it implements (and
subclasses), `CycleState`, `Status` and its codes, the `Handle`, the `NodeTable` it reads,
`MAX_NODE_SCORE` and the normalizing helper, and `Registration` to declare itself. The records
it is given (`PodInfo`, `Node`) are re-exported from `ascheduler.model`. `RowFilterPlugin` and
`RowScorePlugin` take a plugin written one node at a time (`NodeInfo`), as kube-scheduler's are.
A plugin that writes to the API server does it through the Handle's client (`KubeClient`,
failing with `KubeError`); one that allocates devices several instances share takes them
under the Handle's `DeviceLocks` (`DeviceTaken`, `LockContended`, the pool labels).
"""

from ascheduler.framework.errors import ConfigError, PluginArgsError
from ascheduler.framework.extender import ExtenderPostFilterPlugin
from ascheduler.framework.handle import Evictor, Handle
from ascheduler.framework.interface import (
    BINDING_SLOT,
    EXTENSION_POINTS,
    INTERFACES,
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    BindingSlot,
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    ExplainFilterPlugin,
    ExtensionPoint,
    FilterPlugin,
    FilterResult,
    GateKeysPlugin,
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
    QueueingHintPlugin,
    QueueSortPlugin,
    Rejection,
    ReservePlugin,
    RowLocalScorePlugin,
    ScorePlugin,
    Status,
    WhatIfFilterPlugin,
    default_normalize,
    slot_released,
)
from ascheduler.framework.nodes import BoolArray, IntArray, NodeTable
from ascheduler.framework.profile import PluginRef, ProfileSpec, default_plugins, multipoint
from ascheduler.framework.registry import NoArgs, Registration, Registry
from ascheduler.framework.rows import NodeInfo, RowFilterPlugin, RowScorePlugin
from ascheduler.framework.waiting import WaitingPod, WaitingPods
from ascheduler.kube import KubeClient, KubeError
from ascheduler.locks import DeviceLocks, DeviceTaken, Known, LockContended, lock_wait_message
from ascheduler.locks.devicelocks import LABEL_PREFIX as DEVICE_POOL_LABEL_PREFIX
from ascheduler.locks.devicelocks import pool_label
from ascheduler.model import Node, PodInfo

__all__ = [
    "BINDING_SLOT",
    "DEVICE_POOL_LABEL_PREFIX",
    "EXTENSION_POINTS",
    "INTERFACES",
    "MAX_NODE_SCORE",
    "SKIP",
    "SUCCESS",
    "BindPlugin",
    "BindingSlot",
    "BoolArray",
    "ClusterEvent",
    "Code",
    "ConfigError",
    "CycleState",
    "DeviceLocks",
    "DeviceTaken",
    "Diagnosis",
    "EnqueueExtensions",
    "Evictor",
    "ExplainFilterPlugin",
    "ExtenderPostFilterPlugin",
    "ExtensionPoint",
    "FilterPlugin",
    "FilterResult",
    "GateKeysPlugin",
    "Handle",
    "IntArray",
    "Known",
    "KubeClient",
    "KubeError",
    "LockContended",
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
    "QueueingHintPlugin",
    "Registration",
    "Registry",
    "Rejection",
    "ReservePlugin",
    "RowFilterPlugin",
    "RowLocalScorePlugin",
    "RowScorePlugin",
    "ScorePlugin",
    "Status",
    "WaitingPod",
    "WaitingPods",
    "WhatIfFilterPlugin",
    "default_normalize",
    "default_plugins",
    "lock_wait_message",
    "multipoint",
    "pool_label",
    "slot_released",
]
