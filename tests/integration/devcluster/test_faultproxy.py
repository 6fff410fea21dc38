"""The fault proxy in front of the real API server: it forwards, and each fault it injects is
the fault it claims (so the fault-injection tests prove what they say)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.faultproxy import Delay, WriteFaults
from ascheduler.kube import ApiError, ConnectionFailed, KubeClient, KubeError
from ascheduler.kube.informer import Informer
from ascheduler.model import PodInfo, parse_pod
from tests.integration.helpers import create_pods, eventually, pause_pod


async def exists(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        await kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    except KubeError as exc:
        if exc.not_found:
            return False
        raise
    return True


def configmap(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


async def test_writes_fail_as_told(
    plane: ControlPlane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with plane.fault_proxy(seed=1) as proxy:
        async with await KubeClient.connect(str(proxy.kubeconfig(tmp_path / "kc"))) as client:
            await client.post(path, configmap("plain"))
            assert await exists(kube, namespace, "plain")
            assert (await client.get(f"{path}/plain"))["data"] == {"k": "v"}

            with proxy.faults(WriteFaults(share=1.0, kinds=("503",))):
                with pytest.raises(ApiError) as err:
                    await client.post(path, configmap("refused"))
                assert err.value.status == 503
            assert not await exists(kube, namespace, "refused")

            with (
                proxy.faults(WriteFaults(share=1.0, kinds=("drop",))),
                pytest.raises(ConnectionFailed),
            ):
                await client.post(path, configmap("dropped"))
            assert not await exists(kube, namespace, "dropped")

            with (
                proxy.faults(WriteFaults(share=1.0, kinds=("lost",))),
                pytest.raises(ConnectionFailed),
            ):
                await client.post(path, configmap("lost"))
            assert await exists(kube, namespace, "lost")  # it landed; only the answer is lost

            with proxy.faults(WriteFaults(share=1.0, kinds=("409",), path="/other/")):
                await client.post(path, configmap("unmatched"))  # the path does not match
        assert proxy.stats.injected["503"] == 1
        assert proxy.stats.injected["drop"] >= 1
        assert proxy.stats.injected["lost"] >= 1


async def test_a_delayed_request_is_not_forwarded_once_its_client_gave_up(
    plane: ControlPlane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    with plane.fault_proxy() as proxy:
        proxy.delays = [Delay(1.0, frozenset({"POST"}), "/configmaps")]
        async with await KubeClient.connect(str(proxy.kubeconfig(tmp_path / "kc"))) as client:
            with pytest.raises(ConnectionFailed):
                await client.request("POST", path, body=configmap("late"), timeout=0.2)

            async def abandoned() -> bool:
                return proxy.stats.abandoned == 1

            await eventually(abandoned, what="the proxy dropping the abandoned request")
        assert proxy.stats.delayed == 1
    assert not await exists(kube, namespace, "late")


async def test_watches_are_cut_and_answered_gone(
    plane: ControlPlane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await create_pods(kube, namespace, [pause_pod("a", scheduler_name="nobody")])
    with plane.fault_proxy() as proxy:
        async with await KubeClient.connect(str(proxy.kubeconfig(tmp_path / "kc"))) as client:
            informer: Informer[PodInfo] = Informer(
                client,
                f"/api/v1/namespaces/{namespace}/pods",
                parse=parse_pod,
                key=lambda p: p.name,
                version=lambda p: p.resource_version,
                handler=_Ignore(),
            )
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.synced.wait(), 30)
                assert informer.relists == 1

                async def watching() -> bool:
                    return proxy.open_watches == 1

                await eventually(watching, what="the informer's watch open at the proxy")
                proxy.gone_once(f"/api/v1/namespaces/{namespace}/pods")
                proxy.cut_watches()

                async def relisted() -> bool:
                    return informer.relists == 2

                await eventually(relisted, what="a relist after the cut watch met 410")
                assert proxy.stats.watches_cut >= 1
                assert proxy.stats.watches_gone == 1
                assert set(informer.store) == {"a"}
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class _Ignore:
    def on_add(self, obj: PodInfo) -> None: ...
    def on_update(self, old: PodInfo, new: PodInfo) -> None: ...
    def on_delete(self, obj: PodInfo) -> None: ...
