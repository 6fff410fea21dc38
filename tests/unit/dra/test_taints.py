"""Device taints and tolerations: kube's ToleratesTaint and taintPreventsAllocation, the
taints each release lets the allocator see, and DeviceTaintRules' matching."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ascheduler.dra.taints import (
    DeviceTaints,
    blocked_column,
    prevents_allocation,
    tolerated_rows,
    tolerates,
)
from ascheduler.features import DRA_DEVICE_TAINT_RULES, Features, Release, parse_gates
from ascheduler.model.dra import ResourceSlice, parse_resource_slice
from ascheduler.model.dra_taints import DeviceTaint, DeviceTaintRule, parse_device_taint_rule
from tests.unit.dra.helpers import DRIVER, device, slice_

TAINT = DeviceTaint("gpu.example.com/unhealthy", "ecc", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"operator": "Exists"}, True),  # empty key with Exists: every taint
        ({"key": "gpu.example.com/unhealthy", "operator": "Exists"}, True),
        ({"key": "gpu.example.com/unhealthy", "value": "ecc"}, True),  # Equal by default
        ({"key": "gpu.example.com/unhealthy", "operator": "Equal", "value": "ecc"}, True),
        ({"key": "gpu.example.com/unhealthy", "operator": "Equal", "value": "other"}, False),
        ({"key": "gpu.example.com/unhealthy"}, False),  # Equal to an empty value
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "gpu.example.com/unhealthy", "operator": "Lt", "value": "ecc"}, False),
    ],
)
def test_tolerates_as_resourceclaim_toleratestaint(
    toleration: dict[str, Any], expected: bool
) -> None:
    assert tolerates(toleration, TAINT) is expected


@pytest.mark.parametrize(
    ("effect", "blocks"),
    [("NoSchedule", True), ("NoExecute", True), ("None", False), ("PreferNoSchedule", False)],
)
def test_only_noschedule_and_noexecute_keep_a_device(effect: str, blocks: bool) -> None:
    taints = (DeviceTaint("k", "", effect),)
    assert prevents_allocation(taints, ()) is blocks
    assert not prevents_allocation(taints, ({"key": "k", "operator": "Exists"},))


def test_every_blocking_taint_must_be_tolerated() -> None:
    taints = (DeviceTaint("a", "", "NoSchedule"), DeviceTaint("b", "", "NoExecute"))
    assert prevents_allocation(taints, ({"key": "a", "operator": "Exists"},))
    assert not prevents_allocation(
        taints, ({"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"})
    )


def tainted_slice(name: str = "s", pool: str = "p", **taints: str) -> ResourceSlice:
    """Devices g0..g2; `taints`: device -> effect of a taint `k` on it."""
    devices = []
    for d in ("g0", "g1", "g2"):
        raw = device(d)
        if d in taints:
            raw["taints"] = [{"key": "k", "effect": taints[d]}]
        devices.append(raw)
    return parse_resource_slice(slice_(name, devices, node="n1", pool=pool))


def test_the_columns_of_blocked_and_tolerated_rows() -> None:
    s = tainted_slice(g0="NoSchedule", g2="None")
    blocked = blocked_column(s.devices)
    assert blocked.tolist() == [True, False, False]
    taints_of = lambda row: s.devices[row].taints  # noqa: E731
    assert np.array_equal(tolerated_rows(blocked, taints_of, ()), [False, True, True])
    tolerating = tolerated_rows(blocked, taints_of, ({"key": "k", "operator": "Exists"},))
    assert tolerating is not None
    assert tolerating.all()
    assert tolerated_rows(np.zeros(3, dtype=np.bool_), taints_of, ()) is None


@pytest.mark.parametrize(
    ("release", "enabled", "rules"),
    [((1, 35), False, False), ((1, 36), True, False), ((1, 37), True, True)],
)
def test_each_release_s_defaults(release: tuple[int, int], enabled: bool, rules: bool) -> None:
    taints = DeviceTaints.of(Features.defaults(Release(*release)))
    assert (taints.enabled, taints.rules_enabled) == (enabled, rules)


def test_with_the_gate_off_the_allocator_sees_no_taint() -> None:
    s = tainted_slice(g0="NoSchedule")
    (seen,) = DeviceTaints.of(Features.defaults(Release(1, 35))).slices([s])
    assert all(d.taints == () for d in seen.devices)
    (kept,) = DeviceTaints.of(Features.defaults(Release(1, 36))).slices([s])
    assert kept is s


def rule(name: str, selector: dict[str, str] | None, effect: str = "NoExecute") -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": {"key": "rule", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return parse_device_taint_rule(
        {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}
    )


def rule_taints(taints: DeviceTaints, *slices: ResourceSlice) -> list[list[str]]:
    return [[t.key for t in d.taints] for s in taints.slices(slices) for d in s.devices]


@pytest.mark.parametrize(
    ("selector", "tainted"),
    [
        ({}, [True, True, True, True]),  # empty selector: every device
        ({"driver": DRIVER}, [True, True, True, True]),
        ({"driver": "other.example.com"}, [False, False, False, False]),
        ({"pool": "p"}, [True, True, True, False]),
        ({"pool": "p", "device": "g1"}, [False, True, False, False]),
        ({"device": "g0"}, [True, False, False, True]),
    ],
)
def test_a_rule_taints_the_devices_its_selector_matches(
    selector: dict[str, str], tainted: list[bool]
) -> None:
    taints = DeviceTaints.of(Features.defaults(Release(1, 37)))
    taints.rule_changed(None, rule("r", selector))
    p = tainted_slice("s1", "p")
    q = parse_resource_slice(slice_("s2", [device("g0")], node="n2", pool="q"))
    assert rule_taints(taints, p, q) == [["rule"] if t else [] for t in tainted]


def test_a_rule_without_selector_taints_nothing_from_1_37_and_everything_in_1_36() -> None:
    s = tainted_slice()
    new = DeviceTaints.of(Features.defaults(Release(1, 37)))
    new.rule_changed(None, rule("r", None))
    assert rule_taints(new, s) == [[], [], []]
    old = DeviceTaints.of(parse_gates(f"{DRA_DEVICE_TAINT_RULES}=true", Release(1, 36)))
    assert old.rules_enabled
    old.rule_changed(None, rule("r", None))
    assert rule_taints(old, s) == [["rule"]] * 3


def test_a_rule_adds_to_the_device_s_own_taints_and_goes_with_its_deletion() -> None:
    s = tainted_slice(g0="NoSchedule")
    taints = DeviceTaints.of(Features.defaults(Release(1, 37)))
    r = rule("r", {"device": "g0"})
    taints.rule_changed(None, r)
    assert rule_taints(taints, s)[0] == ["k", "rule"]
    taints.rule_changed(r, None)
    assert rule_taints(taints, s)[0] == ["k"]


def test_rules_are_ignored_while_their_gate_is_off_and_unreadable_ones_always() -> None:
    s = tainted_slice()
    off = DeviceTaints.of(Features.defaults(Release(1, 36)))
    off.rule_changed(None, rule("r", {}))
    assert rule_taints(off, s) == [[], [], []]
    assert not off.changes_devices(None, rule("r", {}), [s])
    on = DeviceTaints.of(Features.defaults(Release(1, 37)))
    broken = parse_device_taint_rule(
        {"metadata": {"name": "b"}, "spec": {"deviceSelector": {"pool": 1}, "taint": {"key": "x"}}}
    )
    on.rule_changed(None, broken)
    assert rule_taints(on, s) == [[], [], []]


def test_only_a_rule_change_that_changes_some_device_s_taints_counts() -> None:
    s = tainted_slice("s1", "p")
    taints = DeviceTaints.of(Features.defaults(Release(1, 37)))
    matching, elsewhere = rule("r", {"pool": "p"}), rule("r", {"pool": "elsewhere"})
    assert taints.changes_devices(None, matching, [s])
    assert not taints.changes_devices(None, elsewhere, [s])
    assert taints.changes_devices(matching, None, [s])
    assert not taints.changes_devices(matching, matching, [s])  # a status update
    assert taints.changes_devices(matching, rule("r", {"pool": "p"}, "None"), [s])
    assert taints.changes_devices(matching, elsewhere, [s])
    assert not taints.changes_devices(elsewhere, elsewhere, [s])
