"""The allocator on one node: exact counts, All, firstAvailable, matchAttribute, admin access,
devices in use, pool generations and invalid pools, its errors, and what it writes back."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.dra.allocator import AllocationError, Allocator, InvalidPools
from ascheduler.dra.store import ResourceObjects
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from tests.unit.dra.helpers import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    slice_,
)


def objects(*slices: dict[str, Any], classes: tuple[dict[str, Any], ...] = ()) -> ResourceObjects:
    store = ResourceObjects()
    for raw in slices:
        store.handlers["ResourceSlice"].on_add(parse_resource_slice(raw))
    for raw in classes or (device_class("gpu", f'device.driver == "{DRIVER}"'),):
        store.handlers["DeviceClass"].on_add(parse_device_class(raw))
    return store


def allocate(store: ResourceObjects, node: str, *claims: dict[str, Any], labels: Any = None):  # type: ignore[no-untyped-def]
    parsed = [parse_resource_claim(c) for c in claims]
    table = store.table()
    return Allocator(
        parsed,
        store.device_class,
        store.selectors,
        store.allocated,
        table.pools_for(node, labels or {}),
        node,
    ).allocate()


def names(result: Any) -> list[list[str]]:
    return [[f"{d.request}={d.device}" for d in a.devices] for a in result]


GPUS = slice_(
    "n1-gpus",
    [
        device("g0", model="a100", mem=40),
        device("g1", model="a100", mem=80),
        device("g2", model="t4", mem=16),
    ],
    node="n1",
)


def test_exact_count_takes_devices_in_slice_order() -> None:
    store = objects(GPUS)
    assert names(allocate(store, "n1", claim("c", exactly("r", count=2)))) == [["r=g0", "r=g1"]]


def test_too_few_devices_is_no_solution() -> None:
    store = objects(GPUS)
    assert allocate(store, "n1", claim("c", exactly("r", count=4))) is None
    assert allocate(store, "n2", claim("c", exactly("r"))) is None


def test_request_selectors_and_class_selectors_both_apply() -> None:
    store = objects(
        GPUS,
        classes=(
            device_class(
                "gpu",
                f'device.driver == "{DRIVER}"',
                'device.attributes["gpu.example.com"].mem > 20',
            ),
        ),
    )
    c = claim(
        "c",
        exactly(
            "r",
            "gpu",
            1,
            'device.attributes["gpu.example.com"].model == "a100" && '
            'device.attributes["gpu.example.com"].mem > 50',
        ),
    )
    assert names(allocate(store, "n1", c)) == [["r=g1"]]


def test_devices_allocated_to_other_claims_are_skipped() -> None:
    store = objects(GPUS)
    other = claim(
        "other",
        exactly("r"),
        allocation={
            "devices": {
                "results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}]
            }
        },
    )
    store.handlers["ResourceClaim"].on_add(parse_resource_claim(other))
    assert names(allocate(store, "n1", claim("c", exactly("r", count=2)))) == [["r=g1", "r=g2"]]
    assert allocate(store, "n1", claim("c", exactly("r", count=3))) is None


def test_admin_access_may_share_an_allocated_device() -> None:
    store = objects(GPUS)
    busy = {
        "devices": {
            "results": [
                {"request": "r", "driver": DRIVER, "pool": "n1", "device": d}
                for d in ("g0", "g1", "g2")
            ]
        }
    }
    store.handlers["ResourceClaim"].on_add(
        parse_resource_claim(claim("other", exactly("r"), allocation=busy))
    )
    assert allocate(store, "n1", claim("c", exactly("r"))) is None
    result = allocate(store, "n1", claim("c", exactly("r", admin=True)))
    assert names(result) == [["r=g0"]]
    assert result[0].devices[0].admin_access is True


def test_two_claims_never_share_a_device() -> None:
    store = objects(GPUS)
    result = allocate(store, "n1", claim("a", exactly("r", count=2)), claim("b", exactly("r")))
    assert names(result) == [["r=g0", "r=g1"], ["r=g2"]]
    assert (
        allocate(store, "n1", claim("a", exactly("r", count=2)), claim("b", exactly("r", count=2)))
        is None
    )


def test_all_takes_every_selected_device_and_needs_them_free() -> None:
    store = objects(GPUS)
    all_a100 = claim(
        "c",
        exactly("r", "gpu", 0, 'device.attributes["gpu.example.com"].model == "a100"', mode="All"),
    )
    assert names(allocate(store, "n1", all_a100)) == [["r=g0", "r=g1"]]
    busy = {
        "devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "g1"}]}
    }
    store.handlers["ResourceClaim"].on_add(
        parse_resource_claim(claim("other", exactly("r"), allocation=busy))
    )
    assert allocate(store, "n1", all_a100) is None
    nothing = claim(
        "c",
        exactly("r", "gpu", 0, 'device.attributes["gpu.example.com"].model == "h100"', mode="All"),
    )
    assert allocate(store, "n1", nothing) is None


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    store = objects(
        GPUS,
        classes=(
            device_class("big", 'device.attributes["gpu.example.com"].mem >= 80'),
            device_class("small", 'device.attributes["gpu.example.com"].mem < 80'),
        ),
    )
    c = claim(
        "c", first_available("r", ("big2", "big", 2), ("small2", "small", 2), ("big1", "big", 1))
    )
    assert names(allocate(store, "n1", c)) == [["r/small2=g0", "r/small2=g2"]]


def test_match_attribute_keeps_requests_on_one_value() -> None:
    store = objects(
        slice_(
            "n1",
            [
                device("g0", numa=0),
                device("g1", numa=1),
                device("nic0", numa=1, kind="nic"),
            ],
            node="n1",
        ),
        classes=(
            device_class("gpu", '!("kind" in device.attributes["gpu.example.com"])'),
            device_class("nic", '"kind" in device.attributes["gpu.example.com"]'),
        ),
    )
    c = claim(
        "c",
        exactly("gpu", "gpu"),
        exactly("nic", "nic"),
        constraints=[{"requests": ["gpu", "nic"], "matchAttribute": f"{DRIVER}/numa"}],
    )
    # g0 comes first but no nic shares its numa: the search backtracks to g1.
    assert names(allocate(store, "n1", c)) == [["gpu=g1", "nic=nic0"]]


def test_pools_of_an_older_generation_are_ignored_and_incomplete_pools_unused() -> None:
    old = slice_("a", [device("old")], node="n1", pool="p", generation=1)
    new = slice_("b", [device("new")], node="n1", pool="p", generation=2)
    store = objects(old, new)
    assert names(allocate(store, "n1", claim("c", exactly("r")))) == [["r=new"]]
    half = slice_("c", [device("x")], node="n1", pool="q", count=2)
    store = objects(half)
    assert allocate(store, "n1", claim("c", exactly("r"))) is None
    with pytest.raises(
        AllocationError,
        match=r"asks for all devices, but resource pool gpu\.example\.com/q is currently being",
    ):
        allocate(store, "n1", claim("c", exactly("r", mode="All")))


def test_duplicate_device_names_make_the_pool_invalid() -> None:
    store = objects(
        slice_("a", [device("d")], node="n1", pool="p", count=2),
        slice_("b", [device("d")], node="n1", pool="p", count=2),
    )
    with pytest.raises(InvalidPools):
        allocate(store, "n1", claim("c", exactly("r")))


def test_errors_name_the_claim_or_class() -> None:
    store = objects(
        GPUS, classes=(device_class("gpu", 'device.attributes["gpu.example.com"].nosuch == 1'),)
    )
    with pytest.raises(
        AllocationError,
        match=r"class gpu: selector #0 on device gpu.example.com/n1/g0: CEL runtime error: "
        r"no such key: nosuch\. consider using CEL optional chaining",
    ):
        allocate(store, "n1", claim("c", exactly("r")))
    store = objects(GPUS)
    with pytest.raises(
        AllocationError,
        match=r"claim ns/c: selector #0 on device [^:]*: CEL runtime error: "
        r"CEL result of type string",
    ):
        allocate(store, "n1", claim("c", exactly("r", "gpu", 1, "device.driver")))
    with pytest.raises(AllocationError, match="exceeds the claim limit of 32"):
        allocate(store, "n1", claim("c", exactly("r", count=33)))
    with pytest.raises(AllocationError, match="could not retrieve device class missing"):
        allocate(store, "n1", claim("c", exactly("r", "missing")))


def test_network_attached_devices_reach_the_nodes_their_selector_admits() -> None:
    shared = slice_(
        "fabric",
        [device("f0")],
        pool="fabric",
        node_selector={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
            ]
        },
    )
    store = objects(shared)
    result = allocate(store, "n1", claim("c", exactly("r")), labels={"rack": "r1"})
    assert names(result) == [["r=f0"]]
    assert result[0].node_selector == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
        ]
    }
    assert allocate(store, "n2", claim("c", exactly("r")), labels={"rack": "r2"}) is None
    everywhere = objects(slice_("all", [device("a0")], pool="all", all_nodes=True))
    result = allocate(everywhere, "n9", claim("c", exactly("r")))
    assert names(result) == [["r=a0"]]
    assert result[0].node_selector is None


def test_local_devices_pin_the_allocation_to_their_node_and_carry_class_config() -> None:
    config = [{"opaque": {"driver": DRIVER, "parameters": {"mode": "fast"}}}]
    store = objects(GPUS, classes=(device_class("gpu", "true", config=config),))
    (result,) = allocate(store, "n1", claim("c", exactly("r")))
    assert result.node_selector == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    assert result.to_api()["devices"]["config"] == [
        {
            "source": "FromClass",
            "requests": ["r"],
            "opaque": {"driver": DRIVER, "parameters": {"mode": "fast"}},
        }
    ]
