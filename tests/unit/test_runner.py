"""The process runner both commands share: the stopping signals reach the service, the
service's own signals reach it, and whatever way serving ends the service lets go of its
locks and closes, with the signal handlers gone. (Leader election and the health server are
exercised against a real plane by tests/integration/test_leader_election.py and
test_secure_serving.py, through both commands.)"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping

import pytest

from ascheduler import runner
from ascheduler.config import SchedulerConfig
from ascheduler.config.types import LeaderElection
from ascheduler.http import HealthServer, SecureServing

#: No leader election and neither listener: the runner's own sequence alone.
BARE = SchedulerConfig(
    leader_election=LeaderElection(leader_elect=False), secure_serving=SecureServing(port=0)
)


class FakeService:
    def __init__(self, serving: Callable[[asyncio.Event], Awaitable[None]]) -> None:
        self.serving = serving
        self.calls: list[str] = []
        self.usr2 = 0

    def signals(self) -> Mapping[signal.Signals, Callable[[], None]]:
        return {signal.SIGUSR2: self._usr2}

    def _usr2(self) -> None:
        self.usr2 += 1

    def ready(self) -> str:
        return ""

    def attach(self, health: HealthServer) -> None:
        self.calls.append("attach")

    async def standby(self, waiting: Awaitable[bool]) -> bool:
        self.calls.append("standby")
        return await waiting

    async def serve(self, stop: asyncio.Event, health: HealthServer | None) -> None:
        self.calls.append("serve")
        await self.serving(stop)

    async def release(self) -> None:
        self.calls.append("release")

    async def close(self) -> None:
        self.calls.append("close")


@pytest.fixture(autouse=True)
def keep_gc_threshold() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)


def handled(sig: signal.Signals) -> bool:
    """Whether the loop still has a handler for `sig` (removing it says so)."""
    return asyncio.get_running_loop().remove_signal_handler(sig)


async def test_sigterm_stops_serving_then_locks_go_and_the_service_closes() -> None:
    async def until_sigterm(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), timeout=10)

    service = FakeService(until_sigterm)

    async def build() -> FakeService:
        return service

    assert await runner.run(BARE, build, agent="test") == 0
    assert service.calls == ["serve", "release", "close"]
    assert service.usr2 == 1
    assert not handled(signal.SIGTERM)
    assert not handled(signal.SIGUSR2)


async def test_a_crash_of_serving_still_releases_and_closes() -> None:
    async def crash(stop: asyncio.Event) -> None:
        raise RuntimeError("boom")

    service = FakeService(crash)

    async def build() -> FakeService:
        return service

    with pytest.raises(RuntimeError, match="boom"):
        await runner.run(BARE, build, agent="test")
    assert service.calls == ["serve", "release", "close"]
    assert not handled(signal.SIGINT)
