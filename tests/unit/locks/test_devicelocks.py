"""The device locks' check against the API server's claims: a device another claim holds
fails the bind; a share of a device that allows multiple allocations fails only past the
device's capacity beside the other claims' shares, or where another claim holds it alone."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from ascheduler.locks.devicelocks import (
    CapacityTaken,
    DeviceLocks,
    DeviceTaken,
    lease_name,
    pool_label,
)
from ascheduler.locks.settings import LockSettings
from tests.unit.dra.helpers import DRIVER

GIB = 2**30
DEVICE = (DRIVER, "pool", "g0")


class Claims:
    """Answers the LIST of claims by pool label with the claims given."""

    def __init__(self, *claims: dict[str, Any]) -> None:
        self.claims = list(claims)
        self.asked: list[str] = []

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.asked.append(params["labelSelector"])
        return {"items": self.claims}


def holder(name: str, *, share: str | None, memory: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "r", "driver": DRIVER, "pool": "pool", "device": "g0"}
    if share is not None:
        result["shareID"] = share
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def locks(api: Claims) -> DeviceLocks:
    return DeviceLocks(api, None, "kube-system", LockSettings())  # type: ignore[arg-type]


def ours(memory: int) -> dict[Any, Any]:
    return {DEVICE: ({"memory": Fraction(memory * GIB)}, {"memory": Fraction(40 * GIB)})}


async def test_a_share_fits_beside_the_other_shares() -> None:
    api = Claims(holder("a", share="s-a", memory="30Gi"))
    await locks(api).check([], ["uid-mine"], shared=ours(10))
    assert api.asked == [pool_label(DRIVER, "pool")]


async def test_a_share_past_the_capacity_is_taken() -> None:
    api = Claims(holder("a", share="s-a", memory="30Gi"), holder("b", share="s-b", memory="5Gi"))
    with pytest.raises(
        CapacityTaken, match=r"has not enough memory left beside the shares of claims ns/a, ns/b"
    ):
        await locks(api).check([], ["uid-mine"], shared=ours(6))


async def test_a_device_held_alone_refuses_shares_and_a_shared_one_refuses_holding() -> None:
    with pytest.raises(DeviceTaken, match="is allocated to claim ns/a"):
        await locks(Claims(holder("a", share=None))).check([], ["uid-mine"], shared=ours(1))
    with pytest.raises(DeviceTaken, match="is allocated to claim ns/a"):
        await locks(Claims(holder("a", share="s-a", memory="1Gi"))).check([DEVICE], ["uid-mine"])


async def test_our_own_claims_are_not_counted() -> None:
    api = Claims(holder("mine", share="s", memory="40Gi"))
    api.claims[0]["metadata"]["uid"] = "uid-mine"
    await locks(api).check([], ["uid-mine"], shared=ours(40))


class View:
    """A member view: whether this instance is alone."""

    def __init__(self, alone: bool) -> None:
        self.alone = alone


class Seen:
    """Lock objects as last seen: those held by another instance."""

    def __init__(self, *foreign: str) -> None:
        self.held = set(foreign)

    def foreign(self, key: str) -> bool:
        return key in self.held


def test_alone_the_writes_go_without_locks_unless_another_holds_one() -> None:
    api = Claims()
    device_locks = DeviceLocks(api, Seen(), "kube-system", LockSettings())  # type: ignore[arg-type]
    pools = [(DRIVER, "pool")]
    # Locks on the Node (no member Leases): always held.
    assert device_locks.alone("n1", pools) is None
    view = View(alone=True)
    device_locks.members = view  # type: ignore[assignment]
    assert device_locks.alone("n1", pools) is view
    view.alone = False
    assert device_locks.alone("n1", pools) is None
    view.alone = True
    # A lock another instance left on the node, or on a pool the writes would take.
    device_locks.node_locks = Seen("n1")  # type: ignore[assignment]
    assert device_locks.alone("n1", []) is None
    assert device_locks.alone(None, pools) is view
    device_locks.pool_locks = Seen(lease_name(DRIVER, "pool"))  # type: ignore[assignment]
    assert device_locks.alone(None, pools) is None
    assert device_locks.alone(None, []) is view
    assert api.asked == []  # deciding reads nothing
