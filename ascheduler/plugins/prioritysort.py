"""PrioritySort: higher `spec.priority` first, then the earlier queue timestamp."""

from __future__ import annotations

from typing import Any, Final

from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import QueuedPodInfo, QueueSortPlugin
from ascheduler.framework.registry import NoArgs, Registration

NAME: Final = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    name = NAME

    def sort_key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        return (-qp.pod.priority, qp.timestamp)


def new(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort()


REGISTRATION: Final = Registration(NAME, new, NoArgs, events=frozenset(), default_weight=1)
