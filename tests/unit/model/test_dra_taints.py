"""Device taints in ResourceSlices and DeviceTaintRules, as parsed (never raising)."""

from __future__ import annotations

from ascheduler.model.dra import parse_resource_slice
from ascheduler.model.dra_taints import DeviceTaint, parse_device_taint_rule
from tests.unit.dra.helpers import device, slice_


def test_a_device_s_taints_are_read_with_their_effect_as_written() -> None:
    raw = device("g0")
    raw["taints"] = [
        {"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"},
        {"key": "later", "effect": "SomeFutureEffect"},
    ]
    parsed = parse_resource_slice(slice_("s", [raw, device("g1")], node="n1"))
    assert parsed.errors == ()
    assert parsed.devices[0].taints == (
        DeviceTaint("k", "v", "NoSchedule", "2026-01-01T00:00:00Z"),
        DeviceTaint("later", "", "SomeFutureEffect"),
    )
    assert parsed.devices[1].taints == ()


def test_unreadable_taints_are_errors_with_their_path() -> None:
    bad = device("g0")
    bad["taints"] = [{"key": 3, "effect": "NoExecute"}]
    worse = device("g1")
    worse["taints"] = "NoSchedule"
    parsed = parse_resource_slice(slice_("s", [bad, worse], node="n1"))
    assert parsed.errors == (
        "spec.devices[0].taints[0].key: expected a string",
        "spec.devices[1].taints: expected a list",
    )


def test_a_rule_s_selector_and_taint() -> None:
    rule = parse_device_taint_rule(
        {
            "metadata": {"name": "r", "resourceVersion": "7"},
            "spec": {
                "deviceSelector": {"driver": "gpu.example.com", "pool": "p"},
                "taint": {"key": "maintenance", "effect": "NoExecute"},
            },
        }
    )
    assert (rule.name, rule.resource_version, rule.has_selector) == ("r", "7", True)
    assert (rule.driver, rule.pool, rule.device) == ("gpu.example.com", "p", None)
    assert rule.taint == DeviceTaint("maintenance", "", "NoExecute")
    assert rule.errors == ()


def test_a_rule_without_selector_and_one_unreadable() -> None:
    bare = parse_device_taint_rule({"metadata": {"name": "r"}, "spec": {"taint": {"key": "k"}}})
    assert not bare.has_selector
    broken = parse_device_taint_rule(
        {"metadata": {"name": "b"}, "spec": {"deviceSelector": {"device": ["g0"]}, "taint": 1}}
    )
    assert broken.errors == (
        "spec.deviceSelector.device: expected a string",
        "spec.taint: expected an object",
    )
    assert parse_device_taint_rule("r").errors == ("devicetaintrule: expected an object",)
