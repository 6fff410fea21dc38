"""A scheduler without a network, for tests of the scheduling cycle and the event handlers:
frameworks, queue, cache and status writer wired as `ascheduler run` wires them."""

from __future__ import annotations

import asyncio
from typing import Any

from ascheduler.app import build_frameworks, build_queue
from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.eventhandlers import EventRouter
from ascheduler.events import StatusWriter
from ascheduler.framework import QueuedPodInfo, Registry
from ascheduler.framework.extender import Extenders
from ascheduler.model import Node, PodInfo
from ascheduler.plugins import IN_TREE
from ascheduler.queue import QueueSettings, SchedulingQueue
from ascheduler.scheduler import Scheduler
from tests.kit.clock import FakeClock
from tests.kit.objects import node_info, pod_info

make_node = node_info


def make_pod(
    name: str,
    *,
    cpu: str = "1",
    node: str = "",
    scheduler: str = DEFAULT_SCHEDULER_NAME,
    **spec: Any,
) -> PodInfo:
    return pod_info(name, namespace="ns", cpu=cpu, node_name=node, scheduler_name=scheduler, **spec)


async def pop(queue: SchedulingQueue) -> QueuedPodInfo | None:
    """`queue.pop()` with a deadline, so a bug fails the test instead of hanging it."""
    async with asyncio.timeout(10):
        return await queue.pop()


class Env:
    def __init__(
        self,
        *nodes: Node,
        options: SchedulerConfig | None = None,
        registry: Registry = IN_TREE,
        store: dict[str, PodInfo] | None = None,
    ) -> None:
        """`store` plays the pod informer's store (by uid) when a test needs one."""
        self.clock = FakeClock()
        self.cache = Cache()
        for node in nodes:
            self.cache.add_node(node)
        config = options or SchedulerConfig()
        self.frameworks = build_frameworks(
            config, registry, self.cache, None, Extenders(config.extenders)
        )
        self.queue: SchedulingQueue = build_queue(self.frameworks, QueueSettings())
        self.queue.clock = self.clock
        self.writer = StatusWriter(None, hostname="test")
        self.store = store
        self.scheduler = Scheduler(
            frameworks=self.frameworks,
            cache=self.cache,
            queue=self.queue,
            writer=self.writer,
            pods=None if store is None else store.get,
        )
        self.router = EventRouter(self.scheduler)

    async def attempt(self, pod: PodInfo) -> tuple[Any, QueuedPodInfo]:
        """Queue `pod` (unless queued), pop it and run one scheduling cycle on it."""
        if pod.uid not in self.queue:
            self.queue.add(pod)
        qp = await pop(self.queue)
        assert qp is not None
        assert qp.pod.uid == pod.uid
        return await self.scheduler.schedule_pod(qp), qp

    def written(self) -> list[Any]:
        items = []
        while not self.writer.queue.empty():
            items.append(self.writer.queue.get_nowait())
        return items

    def failed_events(self) -> list[Any]:
        return [i for i in self.written() if getattr(i, "reason", "") == "FailedScheduling"]
