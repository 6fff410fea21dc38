"""Parsing the consumable-capacity fields of DRA objects: request policies, capacity requests,
distinctAttribute, shares in allocation results; bad input recorded with its field path."""

from __future__ import annotations

from fractions import Fraction

from ascheduler.model.dra import (
    AllocatedDevice,
    parse_resource_claim,
    parse_resource_slice,
)
from ascheduler.model.dra_capacity import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, Amount
from tests.unit.dra.helpers import DRIVER, claim, exactly, slice_


def shared_device(**capacity: object) -> dict[str, object]:
    return {"name": "g0", "allowMultipleAllocations": True, "capacity": capacity}


def test_request_policies_are_read_per_capacity() -> None:
    raw = slice_(
        "s",
        [
            shared_device(
                memory={
                    "value": "40Gi",
                    "requestPolicy": {
                        "default": "1Gi",
                        "validRange": {"min": "1Gi", "max": "20Gi", "step": "2Gi"},
                    },
                },
                cores={"value": "8", "requestPolicy": {"default": "1", "validValues": ["1", "2"]}},
                links={"value": "4"},
            )
        ],
        node="n1",
    )
    parsed = parse_resource_slice(raw)
    assert parsed.errors == ()
    device = parsed.devices[0]
    assert device.allow_multiple_allocations
    assert set(device.request_policies) == {"memory", "cores"}
    memory = device.request_policies["memory"]
    assert memory.valid_range is not None
    assert memory.valid_range.step is not None
    assert memory.valid_range.step.value == 2 * 2**30
    assert memory.valid_range.step.format == BINARY_SI
    cores = device.request_policies["cores"]
    assert cores.valid_values is not None
    assert [v.value for v in cores.valid_values] == [1, 2]


def test_bad_policies_are_errors_naming_the_field() -> None:
    raw = slice_(
        "s",
        [
            shared_device(
                memory={"value": "40Gi", "requestPolicy": {"validRange": {"step": "x"}}},
                cores={"value": "8", "requestPolicy": {"validValues": "1"}},
            )
        ],
        node="n1",
    )
    errors = parse_resource_slice(raw).errors
    assert any(
        e.startswith("spec.devices[0].capacity[memory].requestPolicy.validRange.step:")
        for e in errors
    ), errors
    assert "spec.devices[0].capacity[memory].requestPolicy.validRange.min: required" in errors
    assert "spec.devices[0].capacity[cores].requestPolicy.validValues: expected a list" in errors


def test_capacity_requests_and_distinct_attribute_are_read() -> None:
    request = exactly("r")
    request["exactly"]["capacity"] = {"requests": {"memory": "10Gi", "cores": "2e3"}}
    raw = claim(
        "c",
        request,
        exactly("plain"),
        constraints=[{"requests": ["r"], "distinctAttribute": f"{DRIVER}/uuid"}],
    )
    parsed = parse_resource_claim(raw)
    assert parsed.errors == ()
    asked = parsed.requests[0].exactly
    assert asked is not None
    assert asked.capacity is not None
    assert asked.capacity["memory"] == Amount(Fraction(10 * 2**30), BINARY_SI)
    assert asked.capacity["cores"] == Amount(Fraction(2000), DECIMAL_EXPONENT)
    plain = parsed.requests[1].exactly
    assert plain is not None
    assert plain.capacity is None
    assert parsed.constraints[0].distinct_attribute == f"{DRIVER}/uuid"
    assert parsed.constraints[0].match_attribute is None


def test_bad_capacity_requests_are_errors() -> None:
    request = exactly("r")
    request["exactly"]["capacity"] = {"requests": {"memory": "lots"}}
    parsed = parse_resource_claim(claim("c", request))
    assert any(
        e.startswith("spec.devices.requests[0].exactly.capacity.requests[memory]:")
        for e in parsed.errors
    ), parsed.errors


def test_shares_in_allocation_results_round_trip() -> None:
    result = {
        "request": "r",
        "driver": DRIVER,
        "pool": "n1",
        "device": "g0",
        "shareID": "6f0d5c8e-1b7a-4c55-9f5e-0a3c2b1d4e5f",
        "consumedCapacity": {"memory": "10Gi", "cores": "500m"},
    }
    parsed = parse_resource_claim(
        claim("c", exactly("r"), allocation={"devices": {"results": [result]}})
    )
    assert parsed.errors == ()
    assert parsed.allocation is not None
    d = parsed.allocation.devices[0]
    assert d.share_id == result["shareID"]
    assert d.consumed_capacity == {
        "memory": Amount(Fraction(10 * 2**30), BINARY_SI),
        "cores": Amount(Fraction(1, 2), DECIMAL_SI),
    }
    assert d.to_api() == result
    assert "shareID" not in AllocatedDevice("r", DRIVER, "n1", "g0").to_api()


def test_bad_share_fields_are_errors() -> None:
    result = {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0", "shareID": 7}
    parsed = parse_resource_claim(
        claim("c", exactly("r"), allocation={"devices": {"results": [result]}})
    )
    assert "status.allocation.devices.results[0].shareID: expected a string" in parsed.errors
