"""NodeDeclaredFeatures: a pod that uses a feature a node must support runs only on nodes
declaring it in `status.declaredFeatures` (kube-scheduler's plugin of that name, gate
NodeDeclaredFeatures: 1.35 alpha and off, 1.36 beta and on, 1.37 GA).

PreFilter reads the pod's requirements (`PodInfo.node_features`, from its spec by
`ascheduler.model.nodefeatures`) through the release's feature registry: a release requires
only the features its component-helpers library knows (1.35: restart rules; 1.36: and user
namespaces with the host network; 1.37: and bind mount options). A pod requiring none skips
the Filter, so nearly every pod costs one set intersection. The Filter compares the required
bits with the node table's column of declared bits, every node at once; a node missing one
is `UnschedulableAndUnresolvable` (preemption cannot add a feature to a node).

With the gate off the plugin, configured anyway, does nothing and registers no events, as
kube-scheduler's (`enabled: false`).

Queueing: a node added, or one whose declared features changed (kube-scheduler compares the
lists with `slices.Equal`, and so does the hint), and an update of the pod itself that
changed what it requires (1.35, 1.36 `Pod/Update`; 1.37 `TargetPod/Update`: the same test).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import structlog

from ascheduler.features import NODE_DECLARED_FEATURES, Features, Release
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Rejection,
    Status,
)
from ascheduler.model import Node, PodInfo
from ascheduler.model.nodefeatures import (
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
    mask,
    names_of,
)

log = structlog.get_logger(__name__)

NAME: Final = "NodeDeclaredFeatures"
#: `errReasonUnsatisfiedRequirements` (1.36 on).
REASON: Final = "node(s) didn't match Pod's required features"
#: 1.35's message, followed by the node's unsatisfied requirements joined by ", ".
REASON_1_35: Final = "node declared features check failed - unsatisfied requirements: "
_STATE_KEY: Final = "PreFilter" + NAME

#: The features each release's library can require at scheduling time, from the release on.
_SCHEDULABLE: Final = (
    (Release(1, 35), frozenset({RESTART_ALL_CONTAINERS})),
    (Release(1, 36), frozenset({RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK})),
    (
        Release(1, 37),
        frozenset(
            {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS}
        ),
    ),
)


def schedulable_features(release: Release) -> frozenset[str]:
    """The features `release`'s component-helpers can infer a pod requires for scheduling."""
    found: frozenset[str] = frozenset()
    for since, names in _SCHEDULABLE:
        if since <= release:
            found = names
    return found


class NodeDeclaredFeatures(
    PreFilterPlugin, ExplainFilterPlugin, EnqueueExtensions, QueueingHintPlugin
):
    name = NAME

    def __init__(self, features: Features) -> None:
        self.enabled = NODE_DECLARED_FEATURES in features
        self.known = schedulable_features(features.release)
        #: 1.35 names the unsatisfied features in its message; 1.36 on, one fixed reason.
        self.names_missing = not features.since(1, 36)

    def required(self, pod: PodInfo) -> frozenset[str]:
        """The features `pod` requires of its node at this release."""
        return pod.node_features & self.known

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not self.enabled or not pod.node_features:
            return None, SKIP
        required = mask(self.required(pod))
        if not required:
            return None, SKIP
        state.write(_STATE_KEY, required)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        required: int | None = state.read(_STATE_KEY)
        if not self.enabled or required is None:
            return None
        missing = required & ~nodes.declared_features
        rejected = missing != 0
        if not rejected.any():
            return None
        if not self.names_missing:
            return FilterResult.single(REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        # 1.35: one reason per distinct set of missing features.
        rejections = [
            Rejection(
                REASON_1_35 + ", ".join(names_of(int(bits))),
                missing == bits,
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            )
            for bits in np.unique(missing[rejected])
        ]
        return FilterResult(rejected, tuple(rejections))

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        required: int | None = state.read(_STATE_KEY)
        if required is None:
            return []
        missing = names_of(required & ~int(nodes.declared_features[row]))
        return [f"node does not declare {', '.join(missing)}"] if missing else []

    def events_to_register(self) -> frozenset[ClusterEvent]:
        if not self.enabled:
            return frozenset()
        return frozenset(
            {
                ClusterEvent.NODE_ADD,
                ClusterEvent.NODE_DECLARED_FEATURES,
                ClusterEvent.UNSCHEDULED_POD_UPDATE,
            }
        )

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if event is ClusterEvent.UNSCHEDULED_POD_UPDATE:
            if not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
                return True
            if new.uid != pod.uid:
                return False
            changed = self.required(old) != self.required(new)
            log.debug("pod_feature_requirements", pod=pod.key, changed=changed)
            return changed
        if isinstance(old, Node) and isinstance(new, Node):
            changed = old.declared_features != new.declared_features
            log.debug("node_declared_features", pod=pod.key, node=new.name, changed=changed)
            return changed
        return True


def new(args: NoArgs, handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures(handle.features)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    default_weight=1,
    default_gate=NODE_DECLARED_FEATURES,
)
