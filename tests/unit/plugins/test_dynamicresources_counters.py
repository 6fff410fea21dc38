"""DynamicResources with partitionable devices: counting cannot see counter sets, so nodes
reaching counter-consuming devices go to the search, which refuses what would overdraw a set
(allocations in flight included); the binding cycle locks the pool of such devices and checks
the counters other instances' claims hold."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.cache import Cache
from ascheduler.dra.allocator import Allocator
from ascheduler.features import Features, Release
from ascheduler.framework import CycleState
from ascheduler.model import parse_pod
from ascheduler.model.dra import (
    AllocatedDevice,
    Allocation,
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from ascheduler.plugins.dynamicresources.state import CANNOT_ALLOCATE, _State
from tests.kit import make_cache, make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import DRIVER, allocated, claim, device_class, exactly
from tests.unit.dra.test_counters import MIG, counter_slice, device_slice, partition

NAME = "DynamicResources"
ON = Features.defaults(Release(1, 36))
#: n2: two devices each consuming the whole of one counter set.
TWINS = [
    counter_slice("twins-counters", "twins", {"twins": {"memory": "1Gi"}}, node="n2"),
    device_slice(
        "twins-parts",
        "twins",
        [partition("t0", "twins", memory="1Gi"), partition("t1", "twins", memory="1Gi")],
        node="n2",
    ),
]


def cluster(*slices: dict[str, Any], features: Features = ON) -> Cache:
    cache = make_cache([node(n) for n in ("n1", "n2", "n3")])
    cache.resources.features = features
    for raw in slices:
        cache.resources.handlers["ResourceSlice"].on_add(parse_resource_slice(raw))
    cache.resources.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    return cache


def plain(name: str, node_name: str, count: int) -> dict[str, Any]:
    raw = device_slice(name, name, [{"name": f"d{i}"} for i in range(count)], node=node_name)
    raw["spec"]["pool"]["resourceSliceCount"] = 1
    return raw


def claiming(*names: str, uid: str = "pod-uid") -> Any:
    raw = pod("x", namespace="ns")
    raw["metadata"]["uid"] = uid
    raw["spec"]["resourceClaims"] = [
        {"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(names)
    ]
    return parse_pod(raw)


def add_claim(cache: Cache, raw: dict[str, Any]) -> None:
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def filtered(plugin: Any, cache: Cache, info: Any) -> tuple[Any, CycleState]:
    state = CycleState()
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    return plugin.filter(state, info, cache.table), state


def test_counters_decide_where_counting_sees_free_partitions() -> None:
    cache = cluster(*MIG, plain("n2-plain", "n2", 1))
    add_claim(cache, claim("busy", exactly("r"), allocation=allocated("n1", ("gpu-0", "full"))))
    add_claim(cache, claim("c", exactly("r")))
    plugin = make_plugin(NAME, cache, features=ON)
    result, _ = filtered(plugin, cache, claiming("c"))
    # n1 has two free halves by count, but the full partition holds all the memory.
    assert rejected_reasons(result, cache) == {"n1": [CANNOT_ALLOCATE], "n3": [CANNOT_ALLOCATE]}


def test_an_allocation_in_flight_holds_its_counters() -> None:
    cache = cluster(*MIG)
    add_claim(cache, claim("first", exactly("r")))
    add_claim(cache, claim("second", exactly("r")))
    plugin = make_plugin(NAME, cache, features=ON)
    first = claiming("first", uid="pod-1")
    result, state = filtered(plugin, cache, first)
    assert "n1" not in rejected_reasons(result, cache)
    assert plugin.reserve(state, first, "n1").ok
    chosen = state.read(NAME).allocations[0]
    assert [d.device for d in chosen.devices] == ["full"]
    result, _ = filtered(plugin, cache, claiming("second", uid="pod-2"))
    assert rejected_reasons(result, cache)["n1"] == [CANNOT_ALLOCATE]
    plugin.unreserve(state, first, "n1")
    result, _ = filtered(plugin, cache, claiming("second", uid="pod-2"))
    assert "n1" not in rejected_reasons(result, cache)


def test_gate_off_partitions_are_never_allocated() -> None:
    cache = cluster(*MIG, features=Features.defaults(Release(1, 35)))
    add_claim(cache, claim("c", exactly("r")))
    plugin = make_plugin(NAME, cache)
    result, _ = filtered(plugin, cache, claiming("c"))
    assert set(rejected_reasons(result, cache)) == {"n1", "n2", "n3"}


def test_counter_pools_are_locked_and_checked_against_other_claims() -> None:
    shared = device_slice(
        "shared-parts",
        "shared",
        [
            {**partition("on-n1", "s", memory="1"), "nodeName": "n1"},
            {**partition("on-n2", "s", memory="2"), "nodeName": "n2"},
        ],
    )
    sets = {
        "metadata": {"name": "shared-counters", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 2},
            "allNodes": True,
            "sharedCounters": [{"name": "s", "counters": {"memory": {"value": "2"}}}],
        },
    }
    cache = cluster(sets, shared, plain("n3-plain", "n3", 1))
    plugin = make_plugin(NAME, cache, features=ON)

    def targets(*devices: AllocatedDevice) -> tuple[bool, list[tuple[str, str]]]:
        s = _State([], [], [])
        s.allocations[0] = Allocation(devices=devices)
        result: tuple[bool, list[tuple[str, str]]] = plugin.writer.lock_targets(s)
        return result

    # A partition on n1 locks n1 and its pool: devices of other nodes share its counters.
    assert targets(AllocatedDevice("r", DRIVER, "shared", "on-n1")) == (True, [(DRIVER, "shared")])
    assert targets(AllocatedDevice("r", DRIVER, "n3-plain", "d0")) == (True, [])

    overdrawn = plugin.writer.overdrawn
    assert overdrawn(DRIVER, "shared", set(), {"on-n2"}) == ""
    assert overdrawn(DRIVER, "shared", {"on-n1"}, {"on-n2"}) == (
        f"counter memory of counter set s in pool shared (driver {DRIVER}): 2 wanted, 1 left"
    )
    assert overdrawn(DRIVER, "n3-plain", {"d0"}, {"d1"}) == ""


def test_a_search_is_reused_for_the_same_claims_until_the_nodes_pools_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod of a steady state has a claim of the same spec: the search a node needed
    for one is the answer for the next, as long as no allocation of that node's pools came,
    went or changed meanwhile."""
    cache = cluster(*MIG, *TWINS)
    searched: list[str] = []
    real = Allocator.allocate

    def counted(self: Allocator) -> Any:
        searched.append(self.node_name)
        return real(self)

    monkeypatch.setattr(Allocator, "allocate", counted)
    for name in ("a", "b", "c", "two"):
        add_claim(cache, claim(name, exactly("r", count=2 if name == "two" else 1)))
    plugin = make_plugin(NAME, cache, features=ON)
    first, _ = filtered(plugin, cache, claiming("a", uid="pod-a"))
    assert sorted(searched) == ["n1", "n2"]
    searched.clear()
    again, _ = filtered(plugin, cache, claiming("b", uid="pod-b"))
    assert searched == []  # both answers reused
    assert rejected_reasons(again, cache) == rejected_reasons(first, cache)
    # n2's pool changes: only n2 is searched again, and the answer is the new one (t1
    # is free by count, but t0 took the counters it needs)
    add_claim(cache, claim("held", exactly("r"), allocation=allocated("n2", ("twins", "t0"))))
    third, _ = filtered(plugin, cache, claiming("c", uid="pod-c"))
    assert searched == ["n2"]
    assert rejected_reasons(third, cache)["n2"] == [CANNOT_ALLOCATE]
    # another spec is searched on its own (n1 answered the first spec already; n2 has one
    # device free by count, too few for it)
    searched.clear()
    filtered(plugin, cache, claiming("two", uid="pod-two"))
    assert searched == ["n1"]
