"""What a plugin may reach besides its arguments: the node table it reads (the same one the
scheduling cycle passes it), pods waiting on Permit, the client for writes, and the other
objects plugins read (namespaces, Services, pod controllers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ascheduler.framework.nodes import NodeTable
from ascheduler.framework.objects import ClusterObjects
from ascheduler.framework.waiting import WaitingPods

if TYPE_CHECKING:
    from ascheduler.kube import KubeClient


@dataclass
class Handle:
    nodes: NodeTable = field(default_factory=NodeTable)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    #: The client for writes; None where a framework only computes (tests, benchmarks).
    kube: KubeClient | None = None
    profile: str = ""
    #: Namespaces, Services and pod controllers, as the informers have them.
    objects: ClusterObjects = field(default_factory=ClusterObjects)
