"""What plugins may reach besides their arguments: the write client, the cache, waiting pods."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ascheduler.cache import Cache

if TYPE_CHECKING:
    from ascheduler.framework.waiting import WaitingPods
    from ascheduler.kube import KubeClient


@dataclass
class Handle:
    cache: Cache
    waiting_pods: WaitingPods
    #: The client for writes; None where a framework only computes (tests, benchmarks).
    kube: KubeClient | None = None
    profile: str = ""
