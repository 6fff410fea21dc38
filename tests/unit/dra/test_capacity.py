"""Consumable capacity arithmetic: what a request consumes of a device's capacity under its
request policy, whether it fits beside other shares, and where v1.36 and v1.37 differ."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from ascheduler.dra.capacity import CapacityError, Rules, consumptions, fits
from ascheduler.model.dra import Quantity
from ascheduler.model.dra_capacity import (
    BINARY_SI,
    DECIMAL_SI,
    Amount,
    RequestPolicy,
    parse_request_policy,
)
from ascheduler.model.quantity import parse_fraction

V137 = Rules(strict=True, fractional=True)
V137_WHOLE = Rules(strict=True, fractional=False)
V136 = Rules(strict=False, fractional=False)


def q(text: str) -> Quantity:
    return Quantity(text, parse_fraction(text))


def a(text: str) -> Amount:
    errors: list[str] = []
    policy = parse_request_policy({"default": text}, "p", errors)
    assert policy is not None
    assert policy.default is not None
    assert not errors
    return policy.default


def policy(**raw: Any) -> RequestPolicy:
    errors: list[str] = []
    parsed = parse_request_policy(raw, "p", errors)
    assert parsed is not None, errors
    assert not errors, errors
    return parsed


MEMORY = {"memory": q("40Gi")}
RANGED = {"memory": policy(default="1Gi", validRange={"min": "1Gi", "max": "20Gi", "step": "2Gi"})}


def consumed(asked: dict[str, str] | None, capacity: Any, policies: Any, rules: Rules) -> Any:
    requests = {k: a(v) for k, v in asked.items()} if asked is not None else None
    return {k: v.text for k, v in consumptions(requests, capacity, policies, rules).items()}


def test_without_request_or_policy_a_request_consumes_the_whole_capacity() -> None:
    assert consumed(None, MEMORY, {}, V137) == {"memory": "40Gi"}
    assert consumed({"memory": "10Gi"}, MEMORY, {}, V137) == {"memory": "10Gi"}


def test_the_default_fills_a_capacity_the_request_does_not_name() -> None:
    assert consumed(None, MEMORY, RANGED, V137) == {"memory": "1Gi"}
    both = {"memory": q("40Gi"), "cores": q("8")}
    assert consumed({"memory": "4Gi"}, both, {}, V137) == {"cores": "8", "memory": "4Gi"}


def test_valid_range_rounds_up_to_min_then_to_the_step() -> None:
    assert consumed({"memory": "512Mi"}, MEMORY, RANGED, V137) == {"memory": "1Gi"}
    assert consumed({"memory": "2Gi"}, MEMORY, RANGED, V137) == {"memory": "3Gi"}
    assert consumed({"memory": "3Gi"}, MEMORY, RANGED, V137) == {"memory": "3Gi"}
    assert consumed({"memory": "4Gi"}, MEMORY, RANGED, V136) == {"memory": "5Gi"}


def test_valid_values_round_up_to_the_first_not_below() -> None:
    policies = {"memory": policy(default="4Gi", validValues=["4Gi", "8Gi", "16Gi"])}
    assert consumed({"memory": "5Gi"}, MEMORY, policies, V137) == {"memory": "8Gi"}
    # Above every valid value: kept, and then refused as violating the policy.
    assert consumed({"memory": "17Gi"}, MEMORY, policies, V137) == {"memory": "17Gi"}
    assert not fits({"memory": a("17Gi")}, MEMORY, policies, V137)
    assert fits({"memory": a("5Gi")}, MEMORY, policies, V137)


def test_fits_beside_other_shares_and_this_search_only_within_the_value() -> None:
    asked = {"memory": a("16Gi")}
    assert fits(asked, MEMORY, {}, V137, {"memory": Fraction(24 * 2**30)})
    assert not fits(asked, MEMORY, {}, V137, {"memory": Fraction(25 * 2**30)})
    gib = 2**30
    assert fits(asked, MEMORY, {}, V137, {"memory": Fraction(20 * gib)}, {"memory": 4 * gib})
    assert not fits(asked, MEMORY, {}, V137, {"memory": Fraction(20 * gib)}, {"memory": 5 * gib})


def test_a_capacity_the_device_lacks_or_a_range_above_max_refuses_it() -> None:
    assert not fits({"cores": a("1")}, MEMORY, {}, V137)
    assert not fits({"memory": a("21Gi")}, MEMORY, RANGED, V137)
    assert fits({"memory": a("19Gi")}, MEMORY, RANGED, V137)


def test_1_37_rounds_fractional_ranges_in_thousandths_and_writes_the_step_format() -> None:
    cores = {"cores": q("4")}
    fractional = {
        "cores": policy(default="500m", validRange={"min": "250m", "max": "4", "step": "250m"})
    }
    assert consumed({"cores": "300m"}, cores, fractional, V137) == {"cores": "500m"}
    assert fits({"cores": a("300m")}, cores, fractional, V137)
    # Whole units where the gate is off (1.37) and always in 1.36: 300m counts as 1, the
    # step 250m as 1, the min as 1.
    assert consumed({"cores": "300m"}, cores, fractional, V137_WHOLE) == {"cores": "1"}
    out = consumptions({"cores": a("300m")}, cores, fractional, V136)
    assert out["cores"].value == 1
    assert out["cores"].format == BINARY_SI


def test_1_36_writes_rounded_values_in_binary_format() -> None:
    grams = {"bandwidth": q("10G")}
    ranged = {"bandwidth": policy(default="1G", validRange={"min": "1G", "step": "1G"})}
    new = consumptions({"bandwidth": a("1500M")}, grams, ranged, V137)["bandwidth"]
    old = consumptions({"bandwidth": a("1500M")}, grams, ranged, V136)["bandwidth"]
    assert new.value == old.value == 2 * 10**9
    assert (new.format, new.text) == (DECIMAL_SI, "2G")
    assert (old.format, old.text) == (BINARY_SI, "1953125Ki")


def test_1_37_aborts_on_requests_it_cannot_represent_and_negative_consumption() -> None:
    cores = {"cores": q("4")}
    fractional = {
        "cores": policy(default="500m", validRange={"min": "250m", "max": "4", "step": "250m"})
    }
    with pytest.raises(CapacityError, match=r'^capacity "cores": capacity request cannot be '):
        fits({"cores": a("300001u")}, cores, fractional, V137)
    assert fits({"cores": a("300001u")}, cores, fractional, V136)
    with pytest.raises(CapacityError, match=r'capacity "memory": capacity value is negative'):
        fits({"memory": a("-1Gi")}, MEMORY, {}, V137)
    assert fits({"memory": a("-1Gi")}, MEMORY, {}, V136)


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (Fraction(40 * 2**30), BINARY_SI, "40Gi"),
        (Fraction(1000), BINARY_SI, "1k"),
        (Fraction(1500), DECIMAL_SI, "1500"),
        (Fraction(15000), DECIMAL_SI, "15k"),
        (Fraction(1, 2), DECIMAL_SI, "500m"),
        (Fraction(0), DECIMAL_SI, "0"),
    ],
)
def test_quantities_are_written_as_kubernetes_spells_them(
    value: Fraction, fmt: str, text: str
) -> None:
    assert Amount(value, fmt).text == text
