"""The Python ceiling on the real API server: it binds a backlog with its watch already open,
as a scheduler's informer does, so the events its own binds make are read while it binds."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from benchmarks.ceiling import Ceiling
from tests.integration.conftest import NodeFactory

PODS = 24


def pending(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


class Opened:
    """A session that notes when each streaming GET (the watch) is opened."""

    def __init__(self, session: Any, opened: list[float]) -> None:
        self._session = session
        self._opened = opened

    def get(self, *args: Any, **kw: Any) -> Any:
        self._opened.append(time.monotonic())
        return self._session.get(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


async def test_the_ceiling_watches_while_it_binds_a_backlog(
    plane_state: PlaneState, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    label = f"ceiling-{namespace}"[:63]
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", labels={"bench": label}))
    scheduler = f"{namespace}-ceiling"
    for i in range(PODS):
        await kube.post(f"/api/v1/namespaces/{namespace}/pods", pending(f"p-{i}", scheduler))

    kubeconfig = str(plane_state.admin_kubeconfig)
    async with (
        await KubeClient.connect(kubeconfig) as watch,
        await KubeClient.connect(kubeconfig) as writes,
    ):
        ceiling = Ceiling(watch, writes, scheduler, concurrency=2, node_selector=f"bench={label}")
        bindings: list[float] = []
        watched: list[float] = []
        send = writes.request

        async def counted(method: str, path: str, **kw: Any) -> Any:
            if path.endswith("/binding"):
                bindings.append(time.monotonic())
            return await send(method, path, **kw)

        writes.request = counted  # type: ignore[method-assign]
        watch.session = Opened(watch.session, watched)  # type: ignore[assignment]
        runner = asyncio.create_task(ceiling.run())
        try:
            async with asyncio.timeout(60):
                while True:
                    left = await kube.get(
                        f"/api/v1/namespaces/{namespace}/pods",
                        params={"fieldSelector": "spec.nodeName="},
                    )
                    if not left["items"]:
                        break
                    await asyncio.sleep(0.1)
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await asyncio.gather(*ceiling.tasks, return_exceptions=True)

    assert len(bindings) == PODS
    # Two binds at a time: a ceiling that bound the listed pods before watching would have
    # sent all but the last two before its watch opened.
    (opened_at,) = watched
    assert sum(1 for t in bindings if t < opened_at) <= 2
