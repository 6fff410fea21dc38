"""Waiting on the real API server, with generous deadlines (a deadline, never a timing check)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ascheduler.kube import KubeClient

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], *, what: str, timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Call `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: T
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"
            )
        await asyncio.sleep(interval)


async def get_pod(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def pause_pod(
    name: str, *, scheduler_name: str, cpu: str = "100m", memory: str = "500Mi", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            **spec,
        },
    }
