"""Device binding conditions: bindingTimeout's validation and default per release, the
allocator allocating devices with conditions only with the gate on (their pools last, the
conditions recorded, bindsToNode pinning the node), PreBind's readiness check (all True, a
failure condition, the timeout from allocationTimestamp) and its wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ascheduler.dra.allocator import Allocator
from ascheduler.dra.store import ResourceObjects
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ConfigError, CycleState, Diagnosis
from ascheduler.model import parse_pod
from ascheduler.model.dra import (
    ResourceClaim,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from ascheduler.plugins.dynamicresources import REGISTRATION, bindingconditions
from ascheduler.plugins.dynamicresources.bindingconditions import (
    BindingFailed,
    claim_ready,
    timed_out,
    unusable,
    unusable_claims,
    wait_ready,
)
from ascheduler.plugins.dynamicresources.state import DEALLOCATED, NOT_AVAILABLE
from tests.kit import make_cache, make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import DRIVER, claim, device, device_class, exactly, slice_

R35, R36, R37 = (Features.defaults(Release(1, m)) for m in (35, 36, 37))


# -- bindingTimeout ---------------------------------------------------------------------------


def test_binding_timeout_is_refused_while_the_gates_are_off() -> None:
    with pytest.raises(ConfigError) as caught:
        REGISTRATION.decode_args({"bindingTimeout": "60s"}, "args", R35)
    assert caught.value.problems == [
        "args.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
        "DRAResourceClaimDeviceStatus feature gate is disabled"
    ]
    off = parse_gates("DRADeviceBindingConditions=false", Release(1, 37))
    with pytest.raises(ConfigError):
        REGISTRATION.decode_args({"bindingTimeout": "60s"}, "args", off)
    assert REGISTRATION.decode_args(None, "args", R35).binding_timeout is None


@pytest.mark.parametrize("features", [R36, R37])
def test_binding_timeout_defaults_to_ten_minutes_and_is_at_least_a_second(
    features: Features,
) -> None:
    assert REGISTRATION.decode_args(None, "args", features).binding_timeout == 600
    assert REGISTRATION.decode_args({"bindingTimeout": "90s"}, "a", features).binding_timeout == 90
    with pytest.raises(ConfigError) as caught:
        REGISTRATION.decode_args({"bindingTimeout": "500ms"}, "args", features)
    assert caught.value.problems == [
        'args.bindingTimeout: Invalid value: "500ms": must be at least 1 second'
    ]


# -- allocation -------------------------------------------------------------------------------


def attached(name: str, *, binds_to_node: bool = False) -> dict[str, Any]:
    out = device(name, model="a100")
    out["bindingConditions"] = ["Attached"]
    out["bindingFailureConditions"] = ["AttachFailed"]
    if binds_to_node:
        out["bindsToNode"] = True
    return out


def allocate(features: Features, *slices: dict[str, Any]) -> Any:
    store = ResourceObjects(features)
    for raw in slices:
        store.handlers["ResourceSlice"].on_add(parse_resource_slice(raw))
    store.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    return Allocator(
        [parse_resource_claim(claim("c", exactly("r")))],
        store.device_class,
        store.selectors,
        store.allocated,
        store.table().pools_for("n1", {}),
        "n1",
        features=features,
    ).allocate()


def test_devices_with_binding_conditions_are_never_allocated_at_135() -> None:
    assert allocate(R35, slice_("s", [attached("g0")], node="n1")) is None


@pytest.mark.parametrize("features", [R36, R37])
def test_from_136_they_are_allocated_and_the_result_records_their_conditions(
    features: Features,
) -> None:
    (result,) = allocate(features, slice_("s", [attached("g0")], node="n1"))
    (d,) = result.devices
    assert (d.device, d.binding_conditions, d.binding_failure_conditions) == (
        "g0",
        ("Attached",),
        ("AttachFailed",),
    )
    assert d.to_api()["bindingConditions"] == ["Attached"]
    assert d.to_api()["bindingFailureConditions"] == ["AttachFailed"]


def test_pools_with_binding_conditions_are_tried_last() -> None:
    """The pool `a` sorts first, but has a device with conditions: `b`'s device is taken."""
    slices = (
        slice_("a", [attached("a0"), device("a1", model="a100")], node="n1", pool="a"),
        slice_("b", [device("b0", model="a100")], node="n1", pool="b"),
    )
    (result,) = allocate(R37, *slices)
    assert [d.device for d in result.devices] == ["b0"]
    (result,) = allocate(R35, *slices)
    assert [d.device for d in result.devices] == ["a1"]


def test_binds_to_node_pins_a_network_device_to_the_node_allocated_for() -> None:
    shared = slice_("fabric", [attached("f0", binds_to_node=True)], pool="fabric", all_nodes=True)
    (result,) = allocate(R37, shared)
    assert result.node_selector == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    plain = slice_("fabric", [attached("f0")], pool="fabric", all_nodes=True)
    (result,) = allocate(R37, plain)
    assert result.node_selector is None


# -- readiness --------------------------------------------------------------------------------


def stamp(ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def bound_claim(conditions: list[dict[str, Any]] | None, *, ago: float | None = 0) -> ResourceClaim:
    raw = claim("c")
    raw["status"]["allocation"] = {
        "devices": {
            "results": [
                {
                    "request": "r",
                    "driver": DRIVER,
                    "pool": "n1",
                    "device": "g0",
                    "bindingConditions": ["Attached", "Healthy"],
                    "bindingFailureConditions": ["AttachFailed"],
                },
                {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g1"},
            ]
        },
    }
    if ago is not None:
        raw["status"]["allocation"]["allocationTimestamp"] = stamp(ago)
    if conditions is not None:
        raw["status"]["devices"] = [
            {"driver": DRIVER, "pool": "n1", "device": "g0", "conditions": conditions}
        ]
    parsed = parse_resource_claim(raw)
    assert not parsed.errors
    return parsed


def condition(kind: str, status: str = "True", reason: str = "R", message: str = "") -> Any:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_a_claim_is_ready_once_every_binding_condition_is_true() -> None:
    assert not claim_ready(bound_claim(None))
    assert not claim_ready(bound_claim([condition("Attached")]))
    assert not claim_ready(bound_claim([condition("Attached"), condition("Healthy", "False")]))
    assert claim_ready(bound_claim([condition("Attached"), condition("Healthy")]))


def test_a_true_failure_condition_fails_the_binding_in_kubes_words() -> None:
    failed = bound_claim(
        [condition("Attached"), condition("AttachFailed", reason="NoPath", message='port "3"')]
    )
    with pytest.raises(BindingFailed) as caught:
        claim_ready(failed)
    assert str(caught.value) == (
        'device binding failed: claim=c, reason=NoPath, message="port \\"3\\""'
    )
    assert claim_ready(
        bound_claim(
            [condition("Attached"), condition("Healthy"), condition("AttachFailed", "False")]
        )
    )


def test_the_timeout_runs_from_the_allocation_timestamp() -> None:
    now = datetime.now(UTC)
    assert timed_out(bound_claim(None, ago=120), 60, now)
    assert not timed_out(bound_claim(None, ago=10), 60, now)
    assert unusable(bound_claim(None, ago=120), 60, now) == "device binding timeout: claim=c"
    ready = bound_claim([condition("Attached"), condition("Healthy")], ago=120)
    assert unusable(ready, 60, now) is None


def test_filter_finds_the_failed_and_timed_out_claims_only_with_the_gates_on() -> None:
    claims = [
        bound_claim([condition("Attached"), condition("Healthy")]),
        bound_claim([condition("AttachFailed")]),
        bound_claim(None, ago=1000),
        parse_resource_claim(claim("fresh", exactly("r"))),
    ]
    assert unusable_claims(claims, R37, 600) == [1, 2]
    assert unusable_claims(claims, R35, 600) == []
    assert unusable_claims(claims, R37, None) == []


# -- PreBind's wait ---------------------------------------------------------------------------


async def test_prebind_waits_until_the_conditions_are_true(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bindingconditions, "POLL_INTERVAL", 0.01)
    versions = iter(
        [bound_claim(None), bound_claim([condition("Attached")])]
        + [bound_claim([condition("Attached"), condition("Healthy")])] * 10
    )
    seen: list[ResourceClaim] = []

    def latest(c: ResourceClaim) -> ResourceClaim:
        seen.append(next(versions))
        return seen[-1]

    status = await wait_ready([bound_claim(None)], latest, 60, "ns/p", "n1")
    assert status.ok
    assert len(seen) == 3


async def test_prebind_fails_on_a_failure_condition_and_on_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bindingconditions, "POLL_INTERVAL", 0.01)
    failed = bound_claim([condition("AttachFailed", reason="Gone")])
    status = await wait_ready([bound_claim(None)], lambda c: failed, 60, "ns/p", "n1")
    assert not status.ok
    assert status.message == 'device binding failed: claim=c, reason=Gone, message=""'
    # PreBind's own deadline (the claim has no allocationTimestamp to time out from).
    pending = bound_claim(None, ago=None)
    status = await wait_ready([pending], lambda c: pending, 0.05, "ns/p", "n1")
    assert status.message == "device binding timeout: context deadline exceeded"
    # The claim's allocationTimestamp is past the timeout.
    late = bound_claim(None, ago=5)
    status = await wait_ready([late], lambda c: late, 2, "ns/p", "n1")
    assert status.message == "device binding timeout: claim=c"
    status = await wait_ready([pending], lambda c: None, 60, "ns/p", "n1")
    assert "not found" in status.message


async def test_claims_without_binding_conditions_do_not_wait() -> None:
    plain = parse_resource_claim(claim("c"))
    status = await wait_ready([plain], lambda c: None, 60, "ns/p", "n1")
    assert status.ok


# -- the plugin: the next attempt after a failure ---------------------------------------------


def test_a_failed_claim_rejects_every_node_and_post_filter_deallocates_it() -> None:
    """The attempt after a failed (or timed out) binding: Filter finds the claim unusable on
    every node, PostFilter deallocates it; at 1.35 the claim is only an allocated claim."""
    raw = claim("c", allocation=None)
    raw["status"]["allocation"] = {
        "devices": {
            "results": [
                {
                    "request": "r",
                    "driver": DRIVER,
                    "pool": "n1",
                    "device": "g0",
                    "bindingConditions": ["Attached"],
                    "bindingFailureConditions": ["AttachFailed"],
                }
            ]
        },
        "allocationTimestamp": stamp(0),
    }
    raw["status"]["devices"] = [
        {"driver": DRIVER, "pool": "n1", "device": "g0", "conditions": [condition("AttachFailed")]}
    ]
    for features, rejected in ((R37, {"n1", "n2"}), (R35, set())):
        cache = make_cache([node("n1"), node("n2")])
        cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))
        plugin = make_plugin("DynamicResources", cache, features=features)
        state = CycleState()
        info = parse_pod(claiming_pod())
        _, status = plugin.pre_filter(state, info, cache.table)
        assert status.ok
        result = plugin.filter(state, info, cache.table)
        assert set(rejected_reasons(result, cache)) == rejected, features.release
        if rejected:
            assert all(r == [NOT_AVAILABLE] for r in rejected_reasons(result, cache).values())
            after = plugin.post_filter(state, info, cache.table, Diagnosis(cache.table.n))
            assert after.status.message == DEALLOCATED


def claiming_pod() -> dict[str, Any]:
    raw = pod("x", namespace="ns")
    raw["metadata"]["uid"] = "pod-uid"
    raw["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": "c"}]
    return raw
