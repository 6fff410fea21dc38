"""Shared devices: the cache's shares and dedicated holds, the gate per release, and the
allocator splitting a device's capacity between claims as kube-scheduler's does."""

from __future__ import annotations

import uuid
from fractions import Fraction
from typing import Any

import pytest

from ascheduler.dra.allocator import AllocationError, Allocator
from ascheduler.dra.sharing import capacity_view, multi_rows, shared_only_rows, shared_use
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import DRA_FRACTIONAL_CAPACITY_RANGE, Features, Release, parse_gates
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from tests.unit.dra.helpers import DRIVER, claim, device_class, exactly, slice_

V135 = Features.defaults(Release(1, 35))
V136 = Features.defaults(Release(1, 36))
V137 = Features.defaults(Release(1, 37))
V137_FRACTIONAL = parse_gates(f"{DRA_FRACTIONAL_CAPACITY_RANGE}=true", Release(1, 37))


def shared(
    name: str, memory: str = "40Gi", policy: dict[str, Any] | None = None, **attrs: Any
) -> dict[str, Any]:
    capacity: dict[str, Any] = {"value": memory}
    if policy is not None:
        capacity["requestPolicy"] = policy
    return {
        "name": name,
        "allowMultipleAllocations": True,
        "capacity": {"memory": capacity},
        "attributes": {k: {"string": v} for k, v in attrs.items()},
    }


def store_with(*devices: dict[str, Any]) -> ResourceObjects:
    store = ResourceObjects()
    store.handlers["ResourceSlice"].on_add(
        parse_resource_slice(slice_("s", list(devices), node="n1"))
    )
    store.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    return store


def asking(
    name: str, memory: str | None, *, count: int = 1, uid: str | None = None, **kw: Any
) -> dict[str, Any]:
    request = exactly("r", count=count)
    if memory is not None:
        request["exactly"]["capacity"] = {"requests": {"memory": memory}}
    return claim(name, request, uid=uid, **kw)


def allocate(store: ResourceObjects, features: Features, *claims: dict[str, Any]) -> Any:
    parsed = [parse_resource_claim(c) for c in claims]
    return Allocator(
        parsed,
        store.device_class,
        store.selectors,
        store.allocated,
        store.table().pools_for("n1", {}),
        "n1",
        capacity=capacity_view(features, store.shares),
    ).allocate()


def record(store: ResourceObjects, raw: dict[str, Any], allocation: Any) -> None:
    """`raw` as the informer brings it once allocated."""
    raw = dict(raw, status={"allocation": allocation.to_api()})
    store.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def test_the_gate_and_the_arithmetic_follow_the_release() -> None:
    store = store_with(shared("g0"))
    assert capacity_view(V135, store.shares) is None
    v136 = capacity_view(V136, store.shares)
    v137 = capacity_view(V137, store.shares)
    assert v136 is not None
    assert not v136.rules.strict
    assert not v136.rules.fractional
    assert v137 is not None
    assert v137.rules.strict
    assert not v137.rules.fractional  # off by default (see features)
    on = parse_gates(f"{DRA_FRACTIONAL_CAPACITY_RANGE}=true", Release(1, 37))
    v137_on = capacity_view(on, store.shares)
    assert v137_on is not None
    assert v137_on.rules.fractional


@pytest.mark.parametrize("features", [V136, V137])
def test_two_claims_split_a_device_and_a_third_is_refused(features: Features) -> None:
    store = store_with(shared("g0"))
    first = allocate(store, features, asking("a", "30Gi"))
    assert first is not None
    d = first[0].devices[0]
    assert d.device == "g0"
    assert uuid.UUID(d.share_id)
    assert {k: v.text for k, v in d.consumed_capacity.items()} == {"memory": "30Gi"}
    record(store, asking("a", "30Gi"), first[0])
    # A share holds no device alone (the v1.35 column still marks it taken).
    assert not store.shares.dedicated
    assert store.allocated((DRIVER, "n1", "g0"))
    second = allocate(store, features, asking("b", "10Gi"))
    assert second is not None
    assert second[0].devices[0].share_id != d.share_id
    record(store, asking("b", "10Gi"), second[0])
    assert store.shares.aggregated((DRIVER, "n1", "g0")) == {"memory": Fraction(40 * 2**30)}
    assert allocate(store, features, asking("c", "1Gi")) is None


def test_without_the_gate_a_shared_device_is_held_alone() -> None:
    store = store_with(shared("g0"))
    first = allocate(store, V135, asking("a", None))
    assert first is not None
    assert first[0].devices[0].share_id is None
    record(store, asking("a", None), first[0])
    assert allocate(store, V135, asking("b", None)) is None
    # With the gate on, that result (no shareID) holds the device alone too.
    assert allocate(store, V137, asking("b", "1Gi")) is None


def test_one_pod_s_claims_share_a_device_within_the_search() -> None:
    store = store_with(shared("g0"))
    both = allocate(store, V137, asking("a", "20Gi"), asking("b", "20Gi"))
    assert both is not None
    assert [a.devices[0].device for a in both] == ["g0", "g0"]
    assert allocate(store, V137, asking("a", "20Gi"), asking("b", "21Gi")) is None


def test_a_request_without_capacity_asks_takes_the_whole_or_the_default() -> None:
    store = store_with(shared("g0"), shared("g1", policy={"default": "8Gi"}))
    found = allocate(store, V137, asking("a", None), asking("b", None), asking("c", None))
    assert found is not None
    assert [
        (a.devices[0].device, a.devices[0].consumed_capacity["memory"].text) for a in found
    ] == [
        ("g0", "40Gi"),
        ("g1", "8Gi"),
        ("g1", "8Gi"),
    ]


def test_policy_rounding_is_what_the_share_consumes() -> None:
    policy = {"default": "4Gi", "validRange": {"min": "4Gi", "max": "32Gi", "step": "4Gi"}}
    store = store_with(shared("g0", policy=policy))
    found = allocate(store, V137, asking("a", "5Gi"))
    assert found is not None
    assert found[0].devices[0].consumed_capacity["memory"].text == "8Gi"
    assert allocate(store, V137, asking("a", "33Gi")) is None


def test_all_lists_only_devices_the_capacity_asks_fit_unshared() -> None:
    store = store_with(shared("g0", "40Gi"), shared("g1", "8Gi"))
    request = exactly("r", mode="All")
    request["exactly"]["capacity"] = {"requests": {"memory": "16Gi"}}
    found = allocate(store, V137, claim("a", request))
    assert found is not None
    assert [d.device for d in found[0].devices] == ["g0"]


def test_1_37_aborts_where_a_request_cannot_be_represented() -> None:
    policy = {"default": "1", "validRange": {"min": "250m", "step": "250m"}}
    store = store_with(shared("g0", "4", policy=policy))
    with pytest.raises(
        AllocationError,
        match=r"^claim ns/a, request r: checking capacity for device gpu.example.com/n1/g0: "
        r"capacity \"memory\": capacity request cannot be represented",
    ):
        allocate(store, V137_FRACTIONAL, asking("a", "300001u"))
    assert allocate(store, V137, asking("a", "300001u")) is not None
    assert allocate(store, V136, asking("a", "300001u")) is not None
    with pytest.raises(
        AllocationError, match=r"capacity request cannot be .*: request 10E exceeds"
    ):
        allocate(store, V137, asking("a", "10E"))
    assert allocate(store, V136, asking("a", "10E")) is None


def small(name: str) -> dict[str, Any]:
    request = exactly(name)
    request["exactly"]["capacity"] = {"requests": {"memory": "1Gi"}}
    return request


def test_distinct_attribute_keeps_two_requests_off_one_shared_device() -> None:
    store = store_with(shared("g0", uuid="u0"), shared("g1", uuid="u1"))
    constraint = [{"requests": [], "distinctAttribute": f"{DRIVER}/uuid"}]
    for features in (V136, V137):
        found = allocate(
            store, features, claim("a", small("x"), small("y"), constraints=constraint)
        )
        assert found is not None
        assert [d.device for d in found[0].devices] == ["g0", "g1"]
        plain = allocate(store, features, claim("a", small("x"), small("y")))
        assert plain is not None
        assert [d.device for d in plain[0].devices] == ["g0", "g0"]
    three = claim("a", small("x"), small("y"), small("z"), constraints=constraint)
    assert allocate(store, V137, three) is None


def test_1_36_distinct_attribute_compares_one_value_per_request() -> None:
    # One request of three devices: v1.36 keeps only the request's latest value, so its third
    # device may repeat the first one's; v1.37 compares with every device taken.
    store = store_with(shared("g0", uuid="u0"), shared("g1", uuid="u1"), shared("g2", uuid="u0"))
    constraint = [{"requests": ["r"], "distinctAttribute": f"{DRIVER}/uuid"}]
    raw = claim("a", exactly("r", count=3), constraints=constraint)
    found = allocate(store, V136, raw)
    assert found is not None
    assert [d.device for d in found[0].devices] == ["g0", "g1", "g2"]
    assert allocate(store, V137, raw) is None


def test_distinct_attribute_without_the_gate_is_an_empty_constraint() -> None:
    store = store_with(shared("g0", uuid="u0"))
    raw = claim("a", exactly("x"), constraints=[{"distinctAttribute": f"{DRIVER}/uuid"}])
    with pytest.raises(AllocationError, match="empty constraint"):
        allocate(store, V135, raw)


def test_columns_for_the_filter_and_the_lock_check() -> None:
    store = store_with(shared("g0"), {"name": "plain", "capacity": {"memory": {"value": "1Gi"}}})
    table = store.table()
    assert multi_rows(table).tolist() == [True, False]
    found = allocate(store, V137, asking("a", "10Gi"))
    assert found is not None
    record(store, asking("a", "10Gi"), found[0])
    assert table.allocated.tolist() == [True, False]
    assert shared_only_rows(table, store.shares).tolist() == [True, False]
    use = shared_use(table, found)
    assert use == {
        (DRIVER, "n1", "g0"): ({"memory": Fraction(10 * 2**30)}, {"memory": Fraction(40 * 2**30)})
    }


def test_removing_a_claim_gives_its_share_back() -> None:
    store = store_with(shared("g0"))
    found = allocate(store, V137, asking("a", "40Gi"))
    assert found is not None
    raw = dict(asking("a", "40Gi"), status={"allocation": found[0].to_api()})
    store.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))
    assert allocate(store, V137, asking("b", "1Gi")) is None
    store.handlers["ResourceClaim"].on_delete(parse_resource_claim(raw))
    assert store.shares.shared == {}
    assert allocate(store, V137, asking("b", "1Gi")) is not None
