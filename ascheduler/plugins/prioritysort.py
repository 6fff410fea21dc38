"""PrioritySort: higher `spec.priority` first, then the earlier queue timestamp.

Members of a pod group (Coscheduling, GangScheduling) sort together, at the time the group's
first member was queued, so that a group is taken from the queue in one run rather than
interleaved with other pods of its priority; other pods sort exactly as kube-scheduler's."""

from __future__ import annotations

from typing import Any, Final

from ascheduler.framework import (
    GangsView,
    Handle,
    NoArgs,
    QueuedPodInfo,
    QueueSortPlugin,
    Registration,
)

NAME: Final = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    name = NAME

    def __init__(self, gangs: GangsView | None = None) -> None:
        self.gangs = gangs

    def sort_key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        if self.gangs is None:
            return (-qp.pod.priority, qp.timestamp, "", qp.timestamp)
        at, group = self.gangs.sort_position(qp.pod, qp.timestamp)
        return (-qp.pod.priority, at, group, qp.timestamp)


def new(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort(handle.gangs)


REGISTRATION: Final = Registration(NAME, new, NoArgs, events=frozenset(), default_weight=1)
