"""PrioritySort: higher `spec.priority` first, then the earlier queue timestamp."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ascheduler.framework.handle import Handle
from ascheduler.framework.interface import QueuedPodInfo

NAME: Final = "PrioritySort"


class PrioritySort:
    name = NAME

    def sort_key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        return (-qp.pod.priority, qp.timestamp)


def new(args: Mapping[str, Any], handle: Handle) -> PrioritySort:
    return PrioritySort()
