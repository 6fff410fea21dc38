"""LockedBinder's coordination of one node's binds, with an in-memory stand-in for the API
server's Node and pod writes (the same paths run against the real plane in
tests/integration/binding/test_binder.py); here the failures that plane will not produce on
demand: a connection dropped mid-Binding, a lock owner whose own bind fails, a cancellation
while the lock patch is in flight."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import aiohttp

from ascheduler.binding.binder import BindSettings, LockedBinder
from ascheduler.binding.nodelock import DEFAULT_KEY, NodeLocks
from ascheduler.framework import CycleState, Status
from ascheduler.model import PodInfo, parse_pod


class FakeNodeApi:
    """One node `n`: resourceVersion-checked merge patches of its annotations, an empty
    list of pods, and pod patches that always succeed."""

    def __init__(self, patch_delay: float = 0.0) -> None:
        self.rv = 1
        self.annotations: dict[str, str] = {}
        self.log: list[str] = []
        self.patch_delay = patch_delay

    def node(self) -> dict[str, Any]:
        return {
            "metadata": {
                "name": "n",
                "resourceVersion": str(self.rv),
                "annotations": dict(self.annotations),
            },
            "status": {"allocatable": {"pods": "10", "cpu": "10"}},
        }

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.node() if path.startswith("/api/v1/nodes/") else {"items": []}

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        await asyncio.sleep(self.patch_delay)
        if not path.startswith("/api/v1/nodes/"):
            return {"metadata": {"resourceVersion": "7"}}
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                self.annotations.pop(key, None)
                self.log.append("unlock")
            else:
                self.annotations[key] = value
                self.log.append(f"lock {value.rsplit(',', 1)[-1]}")
        self.rv += 1
        return self.node()


class FakeFramework:
    handle = SimpleNamespace(cache=SimpleNamespace(node=lambda name: None))

    def __init__(self, api: FakeNodeApi, fail: dict[str, BaseException | Status]) -> None:
        self.api = api
        self.fail = fail

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        await asyncio.sleep(0.01 if pod.name in self.fail else 0.03)
        outcome = self.fail.get(pod.name)
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is not None:
            return outcome
        self.api.log.append(f"bound {pod.name}")
        return Status()


def pod(name: str) -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    )


async def bind_all(binder: LockedBinder, fw: FakeFramework, names: list[str]) -> list[Status]:
    tasks = [
        asyncio.create_task(binder.bind(fw, CycleState(), pod(n), "n"))  # type: ignore[arg-type]
        for n in names
    ]
    return list(await asyncio.gather(*tasks))


async def test_a_dropped_binding_fails_alone_and_the_hold_outlasts_the_others() -> None:
    api = FakeNodeApi()
    binder = LockedBinder(api, BindSettings(policy="all"))  # type: ignore[arg-type]
    fw = FakeFramework(api, {"p1": aiohttp.ClientConnectionError("reset")})
    statuses = await bind_all(binder, fw, ["p0", "p1", "p2"])
    assert [s.ok for s in statuses] == [True, False, True]
    assert "reset" in statuses[1].message
    # Both other binds landed while the node was still locked.
    assert api.log == ["lock p0", "bound p0", "bound p2", "unlock"]
    assert api.annotations == {}


async def test_the_hold_ends_when_the_lock_owners_own_bind_fails() -> None:
    api = FakeNodeApi()
    binder = LockedBinder(api, BindSettings(policy="all"))  # type: ignore[arg-type]
    fw = FakeFramework(api, {"p0": Status.error("rejected", "DefaultBinder")})
    # p0 leads; p1 and p2 queue while its Binding is in flight. Once p0 is known not bound,
    # the lock bearing its name is released and the rest are served under p1's name.
    lead = asyncio.create_task(
        binder.bind(fw, CycleState(), pod("p0"), "n")  # type: ignore[arg-type]
    )
    await asyncio.sleep(0.005)
    assert api.log == ["lock p0"]
    rest = await bind_all(binder, fw, ["p1", "p2"])
    assert not (await lead).ok
    assert [s.ok for s in rest] == [True, True]
    assert api.log == ["lock p0", "unlock", "lock p1", "bound p1", "bound p2", "unlock"]
    assert binder.locks.stats.binds_per_hold == [1, 2]


async def test_cancelled_while_the_lock_patch_is_in_flight_still_releases() -> None:
    api = FakeNodeApi(patch_delay=0.05)
    locks = NodeLocks(api)  # type: ignore[arg-type]

    async def hold() -> None:
        async with locks.hold("n", pod("p0")):
            await asyncio.sleep(10)

    task = asyncio.create_task(hold())
    await asyncio.sleep(0.02)  # the lock patch has been sent, not answered
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert api.log == ["lock p0", "unlock"]
    assert DEFAULT_KEY not in api.annotations
    assert locks.held == {}
