"""A pod whose binding waits on PreBind work (here its claim's allocation) is nominated to
its node first, as kube-scheduler's binding cycle does with NominatedNodeNameForExpectation
(on from 1.35): watched on the real plane, a status update with `nominatedNodeName` set and
no `nodeName` comes before the binding."""

from __future__ import annotations

import asyncio
import contextlib

from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from ascheduler.kube.informer import Informer
from ascheduler.model import PodInfo, parse_pod
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import claiming_pod, eventually, pause_pod, wait_bound
from tests.integration.test_dra import RESOURCE, device_class, gpus, template


class Seen:
    """Every version of the namespace's pods the watch delivered: (name, nominated, node)."""

    def __init__(self) -> None:
        self.versions: list[tuple[str, str, str]] = []

    def _saw(self, pod: PodInfo) -> None:
        self.versions.append((pod.name, pod.nominated_node_name, pod.node_name))

    def on_add(self, pod: PodInfo) -> None:
        self._saw(pod)

    def on_update(self, old: PodInfo, new: PodInfo) -> None:
        self._saw(new)

    def on_delete(self, pod: PodInfo) -> None:
        pass


async def test_a_pod_with_a_claim_is_nominated_to_its_node_before_it_is_bound(
    ascheduler: ProcessRecord,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    cluster_objects: list[str],
) -> None:
    names = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n"))
    klass = f"{namespace}-gpu"
    await device_class(kube, cluster_objects, klass, "a100")
    await gpus(kube, cluster_objects, names[0], ["a100"])
    await kube.post(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", template("one", klass, 1)
    )
    seen = Seen()
    async with await KubeClient.connect(str(plane_state.admin_kubeconfig)) as watch_client:
        informer: Informer[PodInfo] = Informer(
            watch_client,
            f"/api/v1/namespaces/{namespace}/pods",
            parse=parse_pod,
            key=lambda p: p.name,
            version=lambda p: p.resource_version,
            handler=seen,
        )
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 30)
            pods = f"/api/v1/namespaces/{namespace}/pods"
            await kube.post(pods, claiming_pod("gpu", template="one"))
            await kube.post(pods, pause_pod("plain"))
            where = await wait_bound(kube, namespace, ["gpu", "plain"], timeout=90)

            async def watched_bound() -> bool:
                # The API answered first: the watch may not have delivered the binding yet.
                return {n for n, _, node in seen.versions if node} >= {"gpu", "plain"}

            await eventually(watched_bound, what="the watch delivering both bindings")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert where["gpu"] == names[0]
    gpu = [(nominated, node) for name, nominated, node in seen.versions if name == "gpu"]
    assert (names[0], "") in gpu, gpu
    # Nominated before the binding, not after it.
    assert gpu.index((names[0], "")) < next(i for i, (_, node) in enumerate(gpu) if node)
    # A pod with nothing to wait for in its binding cycle is bound straight away.
    assert all(not nominated for name, nominated, _ in seen.versions if name == "plain")
