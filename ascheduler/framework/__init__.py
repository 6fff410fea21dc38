"""The scheduling framework: plugin interfaces, profiles, and running extension points."""

from ascheduler.framework.errors import ConfigError, PluginArgsError
from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    FilterResult,
    PreFilterResult,
    QueuedPodInfo,
    Rejection,
    Status,
)
from ascheduler.framework.runtime import (
    DEFAULT_PLUGINS,
    Diagnosis,
    Framework,
    PluginRef,
    ProfileSpec,
    ScheduleResult,
    multipoint,
)
from ascheduler.framework.waiting import WaitingPod, WaitingPods

__all__ = [
    "DEFAULT_PLUGINS",
    "SKIP",
    "SUCCESS",
    "ClusterEvent",
    "Code",
    "ConfigError",
    "CycleState",
    "Diagnosis",
    "FilterResult",
    "Framework",
    "Handle",
    "PluginArgsError",
    "PluginRef",
    "PreFilterResult",
    "ProfileSpec",
    "QueuedPodInfo",
    "Rejection",
    "ScheduleResult",
    "Status",
    "WaitingPod",
    "WaitingPods",
    "multipoint",
]
