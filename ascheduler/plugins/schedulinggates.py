"""SchedulingGates: a pod with `spec.schedulingGates` waits outside the active queue until
its gates are removed."""

from __future__ import annotations

from typing import Final

from ascheduler.framework import (
    SUCCESS,
    ClusterEvent,
    Code,
    Handle,
    NoArgs,
    PreEnqueuePlugin,
    Registration,
    Status,
)
from ascheduler.model import PodInfo

NAME: Final = "SchedulingGates"


class SchedulingGates(PreEnqueuePlugin):
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        gates = " ".join(pod.scheduling_gates)
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"waiting for scheduling gates: [{gates}]",), NAME
        )


def new(args: NoArgs, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset({ClusterEvent.UNSCHEDULED_POD_UPDATE}),
    default_weight=1,
)
