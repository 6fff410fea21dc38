"""The informer against the real API server: list, watch, and relist after 410 Gone."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from ascheduler.kube.informer import Informer
from ascheduler.model import PodInfo, parse_pod
from tests.integration.helpers import create_pods, eventually, pause_pod


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, pod: PodInfo) -> None:
        self.events.append(("add", pod.name))

    def on_update(self, old: PodInfo, new: PodInfo) -> None:
        self.events.append(("update", new.name))

    def on_delete(self, pod: PodInfo) -> None:
        self.events.append(("delete", pod.name))


def pod_informer(
    client: KubeClient, namespace: str, recorder: Recorder, **options: Any
) -> Informer[PodInfo]:
    """An informer on the namespace's pods, keyed by name, reporting to `recorder`."""
    return Informer(
        client,
        f"/api/v1/namespaces/{namespace}/pods",
        parse=parse_pod,
        key=lambda p: p.name,
        version=lambda p: p.resource_version,
        handler=recorder,
        **options,
    )


async def test_relist_after_410_reports_what_happened_while_away(
    plane: ControlPlane, plane_state: PlaneState, kube: KubeClient, namespace: str
) -> None:
    await create_pods(kube, namespace, [pause_pod("a"), pause_pod("b")])
    recorder = Recorder()
    async with await KubeClient.connect(str(plane_state.admin_kubeconfig)) as watch_client:
        informer = pod_informer(watch_client, namespace, recorder, page_size=1)  # pages
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert sorted(recorder.events) == [("add", "a"), ("add", "b")]

        # Away: the informer is stopped while a pod goes and another comes.
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/a", params={"gracePeriodSeconds": 0}
        )
        await create_pods(kube, namespace, [pause_pod("c")])
        recorder.events.clear()

        # The apiserver restarts: its new watch cache no longer holds the version the
        # informer resumes from, so the watch is answered 410 Gone and the informer relists.
        plane.restart_apiserver()
        task = asyncio.create_task(informer.run())
        try:

            async def reconciled() -> bool:
                return {("delete", "a"), ("add", "c")} <= set(recorder.events)

            await eventually(reconciled, what="delete of a and add of c after relist")
            assert informer.relists == 2
            assert set(informer.store) == {"b", "c"}

            # And it watches again from the relisted version.
            await create_pods(kube, namespace, [pause_pod("d")])

            async def watched() -> bool:
                return ("add", "d") in recorder.events

            await eventually(watched, what="add of d through the new watch")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_silent_watch_is_dropped_and_resumed_without_losing_events(
    plane_state: PlaneState, kube: KubeClient, namespace: str
) -> None:
    recorder = Recorder()
    async with await KubeClient.connect(str(plane_state.admin_kubeconfig)) as watch_client:
        # Nothing happens in the namespace, and bookmarks come about once a minute: with a
        # short inactivity limit every watch goes silent and must be replaced.
        informer = pod_informer(watch_client, namespace, recorder, inactivity=0.3)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)

            health: list[bool] = []

            async def replaced() -> bool:
                health.append(informer.healthy)
                return informer.watches >= 3

            await eventually(
                replaced, what="three watches, each dropped when silent", interval=0.05
            )
            # A silent watch is replaced at once, not counted as failing (readiness).
            assert all(health), health
            await create_pods(kube, namespace, [pause_pod("late")])

            async def seen() -> bool:
                return ("add", "late") in recorder.events

            await eventually(seen, what="the pod created after the silent watches")
            assert informer.relists == 1  # resumed from its version each time, never relisted
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_an_event_past_the_line_limit_is_picked_up_by_a_relist(
    plane_state: PlaneState, kube: KubeClient, namespace: str
) -> None:
    """A watch event longer than the informer takes is dropped and the informer relists (a
    list has no line limit): the object arrives all the same, and the informer goes on."""
    recorder = Recorder()
    async with await KubeClient.connect(str(plane_state.admin_kubeconfig)) as watch_client:
        informer = pod_informer(watch_client, namespace, recorder, max_event_bytes=32 * 1024)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)
            big = pause_pod("big")
            big["metadata"]["annotations"] = {"example.com/blob": "x" * 100_000}
            await create_pods(kube, namespace, [big])

            async def relisted() -> bool:
                return informer.relists == 2 and ("add", "big") in recorder.events

            await eventually(relisted, what="the oversized pod added through a relist")
            await create_pods(kube, namespace, [pause_pod("small")])

            async def watched() -> bool:
                return ("add", "small") in recorder.events

            await eventually(watched, what="the next pod through the watch")
            assert informer.relists == 2
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
