"""The status writer never dies: every failure of a write is logged and the next item sent."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from ascheduler.events import StatusWriter
from ascheduler.kube import ApiError, ConnectionFailed
from ascheduler.model import parse_pod


class FlakyKube:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.sent: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(path)


async def test_the_writer_outlives_every_kind_of_failure() -> None:
    kube = FlakyKube(
        [
            ConnectionFailed("POST", "/x", aiohttp.ServerDisconnectedError()),
            ConnectionFailed("POST", "/x", aiohttp.ClientPayloadError("cut")),
            ApiError(500, "InternalError", "etcd", method="POST", path="/x"),
            ApiError(404, "NotFound", "gone", method="POST", path="/x"),
            RuntimeError("a bug in building the event"),
        ]
    )
    writer = StatusWriter(kube, workers=1, hostname="test")  # type: ignore[arg-type]
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    for i in range(6):
        writer.scheduled(pod, f"n{i}", "ascheduler")
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            await writer.queue.join()
        assert not task.done()
        assert len(kube.sent) == 1  # the sixth event, after five failures
        assert writer.sent == 1
    finally:
        task.cancel()
