"""The allocator's messages per release: a selector's run-time error and the claim limit say
what kube-scheduler 1.35/1.36 say, and 1.37's new words (the device, the optional-chaining
hint, the limit checked request by request)."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.dra.allocator import AllocationError, Allocator
from ascheduler.dra.messages import OPTIONAL_HINT, cel_runtime_error
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import Features, Release
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from tests.unit.dra.helpers import DRIVER, claim, device, device_class, exactly, slice_

R35, R36, R37 = (Features.defaults(Release(1, m)) for m in (35, 36, 37))
GPUS = slice_("n1-gpus", [device("g0", model="a100"), device("g1", model="t4")], node="n1")


def failure(features: Features, *claims: dict[str, Any], selector: str = "") -> str:
    store = ResourceObjects(features)
    store.handlers["ResourceSlice"].on_add(parse_resource_slice(GPUS))
    klass = device_class("gpu", selector or f'device.driver == "{DRIVER}"')
    store.handlers["DeviceClass"].on_add(parse_device_class(klass))
    allocator = Allocator(
        [parse_resource_claim(c) for c in claims],
        store.device_class,
        store.selectors,
        store.allocated,
        store.table().pools_for("n1", {}),
        "n1",
        features=features,
    )
    with pytest.raises(AllocationError) as caught:
        allocator.allocate()
    return str(caught.value)


MISSING_KEY = 'device.attributes["gpu.example.com"].nosuch == 1'


@pytest.mark.parametrize("features", [R35, R36])
def test_a_missing_key_before_137_names_no_device_and_gives_no_hint(features: Features) -> None:
    text = failure(features, claim("c", exactly("r")), selector=MISSING_KEY)
    assert text == "class gpu: selector #0: CEL runtime error: no such key: nosuch"


def test_a_missing_key_at_137_names_the_device_and_hints_at_optional_chaining() -> None:
    text = failure(R37, claim("c", exactly("r")), selector=MISSING_KEY)
    assert text == (
        f"class gpu: selector #0 on device {DRIVER}/n1/g0: CEL runtime error: "
        f"no such key: nosuch{OPTIONAL_HINT}"
    )


def test_other_runtime_errors_at_137_name_the_device_without_the_hint() -> None:
    text = failure(R37, claim("c", exactly("r", "gpu", 1, "device.driver")))
    assert text.startswith(f"claim ns/c: selector #0 on device {DRIVER}/n1/g0: CEL runtime error:")
    assert OPTIONAL_HINT not in text
    assert "CEL result of type string" in cel_runtime_error(
        R37, "claim ns/c", 0, (DRIVER, "n1", "g0"), "CEL result of type string"
    )


@pytest.mark.parametrize("features", [R35, R36])
def test_the_claim_limit_before_137_is_the_claims_total(features: Features) -> None:
    text = failure(features, claim("c", exactly("a", count=20), exactly("b", count=20)))
    assert text == "claim ns/c: number of requested devices 40 exceeds the claim limit of 32"


def test_the_claim_limit_at_137_names_the_request_that_passes_it() -> None:
    text = failure(R37, claim("c", exactly("a", count=20), exactly("b", count=20)))
    assert text == (
        "claim ns/c, request b: adding 20 devices exceeds the claim limit of 32, "
        "with 20 already accounted for"
    )
    text = failure(R37, claim("c", exactly("a", count=33)))
    assert text == (
        "claim ns/c, request a: adding 33 devices exceeds the claim limit of 32, "
        "with 0 already accounted for"
    )


def test_at_137_a_request_past_the_limit_fails_before_a_later_request_is_read() -> None:
    """1.37 checks as it goes: the later request's missing class is never reached."""
    over = claim("c", exactly("a", count=33), exactly("b", "missing"))
    assert "exceeds the claim limit" in failure(R37, over)
    assert "could not retrieve device class missing" in failure(R35, over)
