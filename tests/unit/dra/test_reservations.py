"""Which claim writes PreBind may reuse and which a failed binding cycle undoes, when several
instances schedule one pod: the allocation's node selector decides."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.dra.reservations import Placed, Release, Reuse, placed, release, reuse
from ascheduler.model.dra import Allocation, parse_resource_claim
from tests.unit.dra.helpers import allocated, claim, exactly

POD = "pod-uid"


def me(uid: str = POD) -> dict[str, Any]:
    return {"resource": "pods", "name": "p", "uid": uid}


def by_label(key: str, value: str) -> dict[str, Any]:
    """A network-attached pool's allocation: reachable from the nodes with that label."""
    out = allocated(None, ("fabric", "d0"))
    out["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
        ]
    }
    return out


@pytest.mark.parametrize(
    ("allocation", "reserved", "node", "labels", "expected"),
    [
        (None, None, "n1", {}, Reuse.WRITE),
        (allocated("n2", ("n2", "g0")), None, "n1", {}, Reuse.WRITE),
        (allocated("n1", ("n1", "g0")), [me("other")], "n1", {}, Reuse.WRITE),
        (allocated("n1", ("n1", "g0")), [me()], "n1", {}, Reuse.DONE),
        (allocated("n2", ("n2", "g0")), [me()], "n1", {}, Reuse.ELSEWHERE),
        (None, [me()], "n1", {}, Reuse.ELSEWHERE),
        (allocated(None, ("fabric", "d0")), [me()], "n1", {}, Reuse.DONE),
        (by_label("zone", "a"), [me()], "n1", {"zone": "a"}, Reuse.DONE),
        (by_label("zone", "a"), [me()], "n1", {"zone": "b"}, Reuse.ELSEWHERE),
        (
            by_label("kubernetes.io/hostname", "n1"),
            [me()],
            "n1",
            {"kubernetes.io/hostname": "n1"},
            Reuse.DONE,
        ),
        (
            by_label("kubernetes.io/hostname", "n2"),
            [me()],
            "n1",
            {"kubernetes.io/hostname": "n1"},
            Reuse.ELSEWHERE,
        ),
    ],
    ids=[
        "unallocated",
        "allocated-elsewhere-not-reserved",
        "reserved-for-another-pod",
        "reserved-here",
        "reserved-for-another-node",
        "reserved-without-allocation",
        "available-everywhere",
        "pool-reaches-the-node",
        "pool-does-not-reach-the-node",
        "hostname-label",
        "hostname-label-of-another-node",
    ],
)
def test_prebind_reuses_a_reservation_only_where_its_allocation_admits_the_node(
    allocation: Any, reserved: Any, node: str, labels: dict[str, str], expected: Reuse
) -> None:
    c = parse_resource_claim(claim("c", exactly("r"), allocation=allocation, reserved_for=reserved))
    assert reuse(c, POD, node, labels) is expected


def test_an_allocation_made_here_is_read_by_its_selector_as_written() -> None:
    written = parse_resource_claim(
        claim("c", exactly("r"), allocation=allocated("n1", ("n1", "g0")))
    )
    assert written.allocation is not None
    fresh = Allocation(
        devices=written.allocation.devices, node_selector=written.allocation.node_selector
    )
    assert fresh.admits("n1", {})
    assert not fresh.admits("n2", {})
    assert Allocation(devices=written.allocation.devices).admits("n2", {})


def pod(node: str = "", uid: str = POD) -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "spec": {"nodeName": node} if node else {}}


@pytest.mark.parametrize(
    ("raw_pod", "expected"),
    [
        (None, Placed.ELSEWHERE),
        (pod("n1", uid="recreated"), Placed.ELSEWHERE),
        (pod(), Placed.PENDING),
        (pod("n1"), Placed.USING),
        (pod("n2"), Placed.ELSEWHERE),
    ],
    ids=["deleted", "replaced", "pending", "bound-where-allocated", "bound-elsewhere"],
)
def test_where_the_pod_of_a_failed_cycle_stands(raw_pod: Any, expected: Placed) -> None:
    c = parse_resource_claim(claim("c", exactly("r"), allocation=allocated("n1", ("n1", "g0"))))
    assert placed(raw_pod, POD, c, lambda _node: {}) is expected


def test_a_pod_bound_to_a_claim_that_is_not_allocated_does_not_use_it() -> None:
    c = parse_resource_claim(claim("c", exactly("r")))
    assert placed(pod("n1"), POD, c, lambda _node: {}) is Placed.ELSEWHERE


OURS = allocated("n1", ("n1", "g0"))


def ours() -> Allocation:
    parsed = parse_resource_claim(claim("c", exactly("r"), allocation=OURS)).allocation
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("allocation", "reserved", "wrote", "where", "expected"),
    [
        (OURS, [me()], True, Placed.USING, Release(unreserve=False, deallocate=False)),
        (OURS, [me()], False, Placed.USING, Release(unreserve=False, deallocate=False)),
        (OURS, [me()], True, Placed.PENDING, Release(unreserve=True, deallocate=False)),
        (OURS, [me()], True, Placed.ELSEWHERE, Release(unreserve=True, deallocate=True)),
        (OURS, [], True, Placed.ELSEWHERE, Release(unreserve=False, deallocate=True)),
        (OURS, [me()], False, Placed.ELSEWHERE, Release(unreserve=True, deallocate=False)),
        (
            OURS,
            [me(), me("other")],
            True,
            Placed.ELSEWHERE,
            Release(unreserve=True, deallocate=False),
        ),
        (
            allocated("n2", ("n2", "g0")),
            [me("other")],
            True,
            Placed.ELSEWHERE,
            Release(unreserve=False, deallocate=False),
        ),
        (None, [], True, Placed.ELSEWHERE, Release(unreserve=False, deallocate=False)),
    ],
    ids=[
        "winner-uses-our-writes",
        "winner-uses-the-reservation",
        "still-pending",
        "bound-elsewhere",
        "bound-elsewhere-reservation-gone",
        "bound-elsewhere-allocation-not-ours",
        "shared-claim",
        "reallocated-since",
        "deallocated-since",
    ],
)
def test_a_failed_cycle_undoes_only_what_the_pod_will_not_use(
    allocation: Any, reserved: Any, wrote: bool, where: Placed, expected: Release
) -> None:
    c = parse_resource_claim(claim("c", exactly("r"), allocation=allocation, reserved_for=reserved))
    assert release(c, POD, ours() if wrote else None, where) == expected
