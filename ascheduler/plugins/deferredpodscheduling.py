"""DeferredPodScheduling: a bound pod whose in-place resize the kubelet deferred is scheduled
again, on its own node only, so that preemption can make room for the resize
(kube-scheduler 1.37's plugin of that name, gate InPlacePodVerticalScalingSchedulerPreemption,
alpha and off; in the default profile right before NodeResourcesFit while the gate is on).

A pod is deferred when its first `PodResizePending` condition has reason `Deferred`
(`PodInfo.resize_deferred`). PreFilter skips every other pod. The Filter rejects, as
unresolvable (preemption cannot change them), every node but the pod's and its node when the
node's `spec.podPreemptionPolicy.disableResizePreemption` names an owner. Permit rejects a
deferred pod that fits: the kubelet, not the scheduler, actuates the resize (in practice
kube-scheduler's cycle never gets there: assuming a pod its cache holds is an error, see
`ascheduler.scheduler`).

Queueing: the pod's node added with resize preemption enabled, or its policy going from
disabled to enabled.

With the gate off the plugin, configured anyway, skips and passes everything and its hints
say QueueSkip, as kube-scheduler's does.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import structlog

from ascheduler.features import SCHEDULER_PREEMPTION_FOR_RESIZE, Features
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    PermitPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Rejection,
    Status,
)
from ascheduler.model import Node, PodInfo

log = structlog.get_logger(__name__)

NAME: Final = "DeferredPodScheduling"
REASON_OTHER_NODE: Final = "pod assigned to different node"
#: `ErrReasonNodeDisablesResizePreemption`.
REASON_DISABLED: Final = "node had resize preemption disabled"
PERMIT_REASON: Final = "pod resize fits, waiting for Kubelet actuation"


class DeferredPodScheduling(
    PreFilterPlugin, FilterPlugin, PermitPlugin, EnqueueExtensions, QueueingHintPlugin
):
    name = NAME

    def __init__(self, features: Features) -> None:
        self.enabled = SCHEDULER_PREEMPTION_FOR_RESIZE in features

    def deferred(self, pod: PodInfo) -> bool:
        return self.enabled and pod.resize_deferred

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not self.deferred(pod):
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        if not self.deferred(pod):
            return None
        other = np.ones(nodes.n, dtype=np.bool_)
        disabled = np.zeros(nodes.n, dtype=np.bool_)
        row = nodes.index.get(pod.node_name) if pod.node_name else None
        if not pod.node_name:
            other[:] = False
        elif row is not None:
            other[row] = False
        # Only the pod's node can pass the first test, so only its policy is read.
        if row is not None and nodes.infos[row].resize_preemption_disabled:
            disabled[row] = True
        elif not pod.node_name:
            disabled = np.fromiter(
                (info.resize_preemption_disabled for info in nodes.infos[: nodes.n]),
                dtype=np.bool_,
                count=nodes.n,
            )
        unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return FilterResult.of(
            other | disabled,
            Rejection(REASON_OTHER_NODE, other, unresolvable),
            Rejection(REASON_DISABLED, disabled, unresolvable),
        )

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        if not self.deferred(pod):
            return SUCCESS, 0.0
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (PERMIT_REASON,), NAME), 0.0

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_PREEMPTION_POLICY, ClusterEvent.NODE_ADD})

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if not self.deferred(pod):
            return False
        if not isinstance(new, Node) or (
            event is not ClusterEvent.NODE_ADD and not isinstance(old, Node)
        ):
            return True  # kube-scheduler queues on an object it cannot read
        if pod.node_name != new.name:
            return False
        if event is ClusterEvent.NODE_ADD:
            queue = not new.resize_preemption_disabled
        else:
            queue = old.resize_preemption_disabled and not new.resize_preemption_disabled
        log.debug("deferred_resize_node_policy", pod=pod.key, node=new.name, queue=queue)
        return queue


def new(args: NoArgs, handle: Handle) -> DeferredPodScheduling:
    return DeferredPodScheduling(handle.features)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    default_weight=1,
    default_gate=SCHEDULER_PREEMPTION_FOR_RESIZE,
)
