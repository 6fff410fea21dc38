"""`parse_node`: allocatable in scheduler units, garbage recorded per field, `spec_equal`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ascheduler.model import parse_node
from ascheduler.model.affinity import Taint
from ascheduler.model.node import Node

GI = 2**30


def node(
    *,
    allocatable: Any = None,
    capacity: Any = None,
    taints: Any = None,
    **meta: Any,
) -> Node:
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = allocatable
    if capacity is not None:
        status["capacity"] = capacity
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = taints
    return parse_node({"metadata": {"name": "n1", **meta}, "spec": spec, "status": status})


def test_allocatable_in_scheduler_units() -> None:
    info = node(
        allocatable={
            "cpu": "3500m",
            "memory": "8Gi",
            "pods": "110",
            "ephemeral-storage": "100G",
            "nvidia.com/gpu": "2",
            "hugepages-2Mi": "0",
        }
    )
    assert info.errors == ()
    assert dict(info.allocatable) == {
        "cpu": 3500,
        "memory": 8 * GI,
        "pods": 110,
        "ephemeral-storage": 100 * 10**9,
        "nvidia.com/gpu": 2,
        "hugepages-2Mi": 0,
    }


def test_capacity_is_used_without_allocatable() -> None:
    info = node(capacity={"cpu": "2", "pods": "10"})
    assert dict(info.allocatable) == {"cpu": 2000, "pods": 10}


def test_allocatable_wins_over_capacity() -> None:
    info = node(allocatable={"cpu": "1"}, capacity={"cpu": "2"})
    assert info.allocatable["cpu"] == 1000


@pytest.mark.parametrize("garbage", ["lots", "1.2.3", "10 Gi", "", None, True, ["1"], {"a": 1}])
def test_garbage_allocatable_is_absent_and_named(garbage: Any) -> None:
    info = node(allocatable={"cpu": garbage, "memory": "1Gi", "pods": "10"})
    assert info.allocatable.get("cpu", 0) == 0
    assert info.allocatable["memory"] == GI
    assert info.allocatable["pods"] == 10
    assert len(info.errors) == 1
    assert info.errors[0].startswith("status.allocatable.cpu: ")


def test_garbage_extended_resource_is_named() -> None:
    info = node(allocatable={"example.com/foo": "many", "cpu": "1"})
    assert "example.com/foo" not in info.allocatable
    assert info.errors == ("status.allocatable.example.com/foo: not a quantity: 'many'",)


def test_negative_allocatable_counts_as_zero() -> None:
    info = node(allocatable={"cpu": "-2", "memory": "1Gi"})
    assert info.allocatable["cpu"] == 0
    assert info.allocatable["memory"] == GI


@pytest.mark.parametrize("status", [{"allocatable": ["cpu"]}, {"allocatable": "4"}, None])
def test_allocatable_of_wrong_type_gives_no_resources(status: Any) -> None:
    info = parse_node({"metadata": {"name": "n"}, "status": status})
    assert dict(info.allocatable) == {}


def test_taints() -> None:
    info = node(
        taints=[
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "effect": "PreferNoSchedule"},
            {"key": "c", "value": "x", "effect": "NoExecute"},
        ]
    )
    assert info.errors == ()
    assert info.taints == (
        Taint("a", "1", "NoSchedule"),
        Taint("b", "", "PreferNoSchedule"),
        Taint("c", "x", "NoExecute"),
    )


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        ({"key": "b", "effect": "Sometimes"}, "spec.taints[1].effect"),
        ({"key": "b"}, "spec.taints[1].effect"),
        ({"key": "b", "effect": ""}, "spec.taints[1].effect"),
        ({"effect": "NoSchedule"}, "spec.taints[1].key"),
        ({"key": 3, "effect": "NoSchedule"}, "spec.taints[1].key"),
        ("a=b:NoSchedule", "spec.taints[1].key"),
    ],
)
def test_invalid_taints_are_recorded_and_skipped(bad: Any, path: str) -> None:
    info = node(
        taints=[
            {"key": "a", "effect": "NoSchedule"},
            bad,
            {"key": "c", "effect": "NoExecute"},
        ]
    )
    assert info.taints == (Taint("a", "", "NoSchedule"), Taint("c", "", "NoExecute"))
    assert len(info.errors) == 1
    assert info.errors[0].startswith(f"{path}: ")


def test_metadata() -> None:
    info = parse_node(
        {
            "metadata": {
                "name": "n1",
                "uid": "u",
                "resourceVersion": "7",
                "labels": {"zone": "a", "n": 1},
                "annotations": {"x": "y"},
            },
            "spec": {"unschedulable": True},
        }
    )
    assert (info.name, info.uid, info.resource_version) == ("n1", "u", "7")
    assert dict(info.labels) == {"zone": "a", "n": "1"}
    assert dict(info.annotations) == {"x": "y"}
    assert info.unschedulable
    assert info.errors == ()


def test_spec_equal() -> None:
    base = parse_node(
        {
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "resourceVersion": "1"},
            "spec": {"taints": [{"key": "t", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4"}},
        }
    )
    # Allocatable, annotations and the resource version are not part of the spec.
    assert base.spec_equal(replace(base, allocatable={"cpu": 8000}))
    assert base.spec_equal(replace(base, annotations={"a": "b"}, resource_version="2"))
    assert base.spec_equal(replace(base, labels={"zone": "a"}))
    # Labels, taints and unschedulable are.
    assert not base.spec_equal(replace(base, labels={"zone": "b"}))
    assert not base.spec_equal(replace(base, labels={"zone": "a", "extra": ""}))
    assert not base.spec_equal(replace(base, taints=()))
    assert not base.spec_equal(replace(base, taints=(Taint("t", "v", "NoSchedule"),)))
    assert not base.spec_equal(replace(base, unschedulable=True))


@pytest.mark.parametrize(
    ("declared", "parsed", "errors"),
    [
        pytest.param(None, (), (), id="absent"),
        pytest.param(["A", "Other"], ("A", "Other"), (), id="strings"),
        pytest.param(
            ["A", 7], ("A",), ("status.declaredFeatures[1]: expected a string, got 7",), id="mixed"
        ),
        pytest.param(
            "A", (), ("status.declaredFeatures: expected a list, got str",), id="not-a-list"
        ),
    ],
)
def test_declared_features_parsed_and_bad_entries_named(
    declared: Any, parsed: tuple[str, ...], errors: tuple[str, ...]
) -> None:
    status = {} if declared is None else {"declaredFeatures": declared}
    info = parse_node({"metadata": {"name": "n1"}, "status": status})
    assert info.declared_features == parsed
    assert info.errors == errors
