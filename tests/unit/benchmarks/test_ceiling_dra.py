"""The DRA ceiling's bookkeeping: which claims a pod has, how many devices each asks for, and
devices handed out round-robin over the nodes, never one twice."""

from __future__ import annotations

from typing import Any

from benchmarks.ceiling_dra import (
    Devices,
    allocated_devices,
    allocated_node,
    allocation,
    claim_names,
    place,
    requests_of,
    reservation,
)
from benchmarks.workloads import DRA_DRIVER, claiming_pod, device_claim, dra_slice


def pod(claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None) -> Any:
    body: dict[str, Any] = {"metadata": {"name": "p", "uid": "u"}, "spec": {}}
    body["spec"]["resourceClaims"] = claims
    if statuses is not None:
        body["status"] = {"resourceClaimStatuses": statuses}
    return body


def allocated(node: str, *devices: str) -> dict[str, Any]:
    claim = device_claim("x")
    results = [(DRA_DRIVER, node, d) for d in devices]
    claim["status"] = {"allocation": allocation(["req-0"] * len(devices), results, node)}
    return claim


def test_a_pod_names_its_claims_or_its_status_does() -> None:
    assert claim_names(claiming_pod("p", "s", 0)) == ["claim-p"]
    assert claim_names({"metadata": {}, "spec": {}}) == []
    template = {"name": "gpu", "resourceClaimTemplateName": "t"}
    assert claim_names(pod([template])) is None  # the controller has not made it yet
    assert claim_names(pod([template], [{"name": "gpu", "resourceClaimName": "p-gpu"}])) == [
        "p-gpu"
    ]
    assert claim_names(pod([template], [{"name": "gpu"}])) == []  # it needed none


def test_each_device_asked_for_is_one_request_name() -> None:
    claim = device_claim("p")
    assert requests_of(claim) == ["req-0"]
    claim["spec"]["devices"]["requests"] = [
        {"name": "a", "exactly": {"deviceClassName": "c", "count": 3}},
        {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "All"}},
        {"name": "c", "firstAvailable": [{"name": "big", "count": 2}, {"name": "small"}]},
    ]
    assert requests_of(claim) == ["a", "a", "a", "b", "c/big", "c/big"]


def test_devices_go_round_robin_and_never_twice() -> None:
    nodes = ["n0", "n1", "n2"]
    devices = Devices(nodes, [dra_slice(n, 2) for n in nodes], set())
    given = [devices.take(1) for _ in range(6)]
    assert [g[0] for g in given if g] == ["n0", "n1", "n2", "n0", "n1", "n2"]
    held = [d for g in given if g for d in g[1]]
    assert len(set(held)) == 6
    assert devices.take(1) is None  # every device given


def test_a_node_without_enough_free_devices_is_skipped() -> None:
    devices = Devices(["n0", "n1"], [dra_slice("n0", 1), dra_slice("n1", 4)], set())
    assert devices.take(2) == (
        "n1",
        [(DRA_DRIVER, "n1", "instance-0"), (DRA_DRIVER, "n1", "instance-1")],
    )
    assert devices.take(2) == (
        "n1",
        [(DRA_DRIVER, "n1", "instance-2"), (DRA_DRIVER, "n1", "instance-3")],
    )
    assert devices.take(2) is None


def test_devices_held_when_it_starts_and_slices_of_other_nodes_are_not_given() -> None:
    held = allocated_devices([allocated("n0", "instance-0"), device_claim("y")])
    assert held == {(DRA_DRIVER, "n0", "instance-0")}
    devices = Devices(["n0"], [dra_slice("n0", 2), dra_slice("elsewhere", 2)], held)
    assert devices.take(1) == ("n0", [(DRA_DRIVER, "n0", "instance-1")])
    assert devices.take(1) is None


def test_the_allocation_names_its_devices_and_node() -> None:
    claim = allocated("n1", "instance-3")
    assert allocated_node(claim) == "n1"
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "req-0", "driver": DRA_DRIVER, "pool": "n1", "device": "instance-3"}
    ]
    assert allocated_node(device_claim("p")) is None
    assert reservation(pod([])) == {"resource": "pods", "name": "p", "uid": "u"}


def test_a_pod_of_several_claims_gets_one_node_for_all() -> None:
    devices = Devices(["n0", "n1"], [dra_slice("n0", 1), dra_slice("n1", 3)], set())
    placement = place(devices, [device_claim("a"), device_claim("b")])
    assert placement is not None
    assert placement.node == "n1"
    assert [d for _, d in placement.claims] == [
        [(DRA_DRIVER, "n1", "instance-0")],
        [(DRA_DRIVER, "n1", "instance-1")],
    ]


def test_an_allocated_claim_fixes_the_node_and_takes_no_device() -> None:
    held = allocated("n1", "instance-0")
    slices = [dra_slice("n0", 2), dra_slice("n1", 2)]
    devices = Devices(["n0", "n1"], slices, allocated_devices([held]))
    placement = place(devices, [device_claim("a"), held])
    assert placement is not None
    assert placement.node == "n1"
    assert [d for _, d in placement.claims] == [[(DRA_DRIVER, "n1", "instance-1")], []]
    full = Devices(["n0"], [dra_slice("n0", 1)], set())
    assert place(full, [device_claim("a"), device_claim("b")]) is None
