"""Leader election's renew deadline holds even when the API server does not answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascheduler.config import LeaderElection
from ascheduler.leader import LeaderElector, LostLeadership


class Lease:
    """A Lease the elector can take, whose API then stops answering (renewals hang)."""

    def __init__(self) -> None:
        self.hang = False
        self.spec: dict[str, Any] = {}
        self.calls = 0

    async def get(self, path: str) -> dict[str, Any]:
        self.calls += 1
        if self.hang:
            await asyncio.sleep(3600)
        return {"metadata": {"name": "l"}, "spec": dict(self.spec)}

    async def request(self, method: str, path: str, *, body: Any = None) -> None:
        self.spec = dict(body["spec"])


async def test_a_hanging_renewal_loses_leadership_at_the_deadline() -> None:
    lease = Lease()
    settings = LeaderElection(lease_duration=0.6, renew_deadline=0.4, retry_period=0.05)
    elector = LeaderElector(lease, settings, identity="me")  # type: ignore[arg-type]
    assert await elector.acquire(asyncio.Event())
    assert elector.leading
    lease.hang = True
    # The guard only keeps a broken elector from hanging the test; it is no timing check.
    async with asyncio.timeout(30):
        with pytest.raises(LostLeadership):
            await elector.hold()
    assert not elector.leading


async def test_renewals_keep_leading_while_they_land() -> None:
    lease = Lease()
    settings = LeaderElection(lease_duration=0.6, renew_deadline=0.4, retry_period=0.02)
    elector = LeaderElector(lease, settings, identity="me")  # type: ignore[arg-type]
    assert await elector.acquire(asyncio.Event())
    holding = asyncio.create_task(elector.hold())
    before = lease.calls
    while lease.calls < before + 5:
        await asyncio.sleep(0.01)
        assert not holding.done()
    holding.cancel()
    assert elector.leading
