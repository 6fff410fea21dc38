"""SchedulingGates: a pod with `spec.schedulingGates` waits outside the active queue until
its gates are removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import SUCCESS, ClusterEvent, Code, Status
from ascheduler.model import PodInfo

NAME: Final = "SchedulingGates"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        gates = " ".join(pod.scheduling_gates)
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"waiting for scheduling gates: [{gates}]",), NAME
        )

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.UNSCHEDULED_POD_UPDATE})


def new(args: Mapping[str, Any], handle: Handle) -> SchedulingGates:
    return SchedulingGates()
