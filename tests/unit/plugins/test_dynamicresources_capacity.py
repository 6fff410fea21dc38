"""DynamicResources with consumable capacity: the count-first Filter never over-counts a shared
device (the search decides where one is a candidate), Reserve's shares count for the next
pod, capacity asks refuse devices without that capacity, and v1.35 stays as it was."""

from __future__ import annotations

from typing import Any

import numpy as np

from ascheduler.cache import Cache
from ascheduler.features import Features, Release
from ascheduler.framework import CycleState, Status
from ascheduler.model import parse_pod
from ascheduler.model.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_slice,
)
from ascheduler.plugins.dynamicresources.state import CANNOT_ALLOCATE
from tests.kit import make_cache, make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import DRIVER, claim, device_class, exactly, slice_

NAME = "DynamicResources"
V135 = Features.defaults(Release(1, 35))
V137 = Features.defaults(Release(1, 37))


def shared(name: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": memory}},
    }


def cluster(devices: dict[str, list[dict[str, Any]]]) -> Cache:
    cache = make_cache([node(n) for n in ("n1", "n2", "n3")])
    for name, listed in devices.items():
        cache.resources.handlers["ResourceSlice"].on_add(
            parse_resource_slice(slice_(name, listed, node=name))
        )
    cache.resources.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    return cache


def add_claim(cache: Cache, name: str, memory: str | None) -> None:
    request = exactly("r")
    if memory is not None:
        request["exactly"]["capacity"] = {"requests": {"memory": memory}}
    raw = claim(name, request, uid=f"uid-{name}")
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def claiming(name: str) -> dict[str, Any]:
    raw = pod(f"p-{name}", namespace="ns")
    raw["metadata"]["uid"] = f"pod-{name}"
    raw["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": name}]
    return raw


def filtered(cache: Cache, name: str, features: Features) -> tuple[Any, Any, CycleState, Any]:
    plugin = make_plugin(NAME, cache, features=features)
    state = CycleState()
    info = parse_pod(claiming(name))
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    return plugin, plugin.filter(state, info, cache.table), state, info


def test_a_shared_device_is_split_and_the_pod_it_cannot_hold_is_refused() -> None:
    cache = cluster({"n1": [shared("g0", "40Gi")], "n2": [{"name": "plain"}]})
    for name, memory in (("a", "30Gi"), ("b", "10Gi"), ("c", "1Gi")):
        add_claim(cache, name, memory)
    plugin, result, state, info = filtered(cache, "a", V137)
    # n2's device has no memory capacity: the ask refuses it; n3 has no device.
    assert rejected_reasons(result, cache) == {"n2": [CANNOT_ALLOCATE], "n3": [CANNOT_ALLOCATE]}
    assert plugin.reserve(state, info, "n1").ok
    plugin, result, state, info = filtered(cache, "b", V137)
    assert "n1" not in rejected_reasons(result, cache)
    assert plugin.reserve(state, info, "n1").ok
    _, result, _, _ = filtered(cache, "c", V137)
    assert rejected_reasons(result, cache)["n1"] == [CANNOT_ALLOCATE]


def test_1_35_holds_a_shared_device_alone_and_ignores_capacity_asks() -> None:
    cache = cluster({"n1": [shared("g0", "40Gi")], "n2": [{"name": "plain"}]})
    add_claim(cache, "a", "30Gi")
    add_claim(cache, "b", "1Gi")
    plugin, result, state, info = filtered(cache, "a", V135)
    assert rejected_reasons(result, cache) == {"n3": [CANNOT_ALLOCATE]}
    assert plugin.reserve(state, info, "n1").ok
    _, result, _, _ = filtered(cache, "b", V135)
    assert rejected_reasons(result, cache) == {"n1": [CANNOT_ALLOCATE], "n3": [CANNOT_ALLOCATE]}


def test_filter_verdicts_agree_with_the_exact_search_on_shared_devices() -> None:
    """Random shares taken ahead: the Filter and a search per node give one verdict."""
    rng = np.random.default_rng(11)
    for trial in range(12):
        sizes = {n: int(rng.integers(1, 5)) * 8 for n in ("n1", "n2", "n3")}
        cache = cluster(
            {n: [shared("g0", f"{gi}Gi"), shared("g1", "8Gi")] for n, gi in sizes.items()}
        )
        for i in range(int(rng.integers(0, 4))):
            add_claim(cache, f"pre{i}", f"{int(rng.integers(1, 9)) * 4}Gi")
            plugin, result, state, info = filtered(cache, f"pre{i}", V137)
            open_nodes = [n for n in ("n1", "n2", "n3") if n not in rejected_reasons(result, cache)]
            if open_nodes:
                assert plugin.reserve(state, info, open_nodes[0]).ok
        add_claim(cache, "c", f"{int(rng.integers(1, 5)) * 8}Gi")
        plugin, result, state, _ = filtered(cache, "c", V137)
        rejected = set(rejected_reasons(result, cache))
        for name in ("n1", "n2", "n3"):
            found = plugin._allocate_on(state.read(NAME), name)
            assert (name not in rejected) == (not isinstance(found, Status)), (trial, sizes, name)
