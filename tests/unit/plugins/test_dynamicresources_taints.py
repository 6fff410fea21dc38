"""DynamicResources with device taints: the Filter's counts and the exact search leave out
devices whose NoSchedule/NoExecute taints a request does not tolerate (1.36, 1.37), see them
all at 1.35, and take DeviceTaintRules' taints (1.37); an allocated claim keeps its devices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.features import Features, Release
from ascheduler.framework import CycleState, Status
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from ascheduler.model.dra_taints import parse_device_taint_rule
from ascheduler.plugins.dynamicresources.state import CANNOT_ALLOCATE
from tests.kit import make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import DRIVER, allocated, claim, device, device_class

NAME = "DynamicResources"
R137 = Features.defaults(Release(1, 37))
R136 = Features.defaults(Release(1, 36))
R135 = Features.defaults(Release(1, 35))
EXISTS = {"key": "maintenance", "operator": "Exists"}


def cluster(features: Features, taints: dict[str, list[str | None]]) -> Cache:
    """Nodes n1.., each with a slice of one device per entry: None untainted, else the effect
    of a `maintenance` taint on it."""
    cache = Cache(features)
    for name, effects in taints.items():
        cache.add_node(parse_node(node(name)))
        devices = []
        for i, effect in enumerate(effects):
            raw = device(f"g{i}")
            if effect is not None:
                raw["taints"] = [{"key": "maintenance", "value": "", "effect": effect}]
            devices.append(raw)
        cache.resources.handlers["ResourceSlice"].on_add(
            parse_resource_slice(
                {
                    "metadata": {"name": name, "resourceVersion": "1"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices,
                    },
                }
            )
        )
    cache.resources.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    return cache


def request(name: str = "r", count: int = 1, *, mode: str = "ExactCount", **extra: Any) -> Any:
    body: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": mode, **extra}
    if mode == "ExactCount":
        body["count"] = count
    return {"name": name, "exactly": body}


def add_claim(cache: Cache, raw: dict[str, Any]) -> None:
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def claiming(name: str = "c") -> dict[str, Any]:
    raw = pod("x", namespace="ns")
    raw["metadata"]["uid"] = "pod-uid"
    raw["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": name}]
    return raw


def filtered(cache: Cache, features: Features) -> tuple[Any, dict[str, list[str]], CycleState]:
    plugin = make_plugin(NAME, cache, features=features)
    state = CycleState()
    info = parse_pod(claiming())
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    return plugin, rejected_reasons(plugin.filter(state, info, cache.table), cache), state


def test_an_untolerated_taint_keeps_the_device_from_1_36_and_not_at_1_35() -> None:
    taints = {"n1": ["NoSchedule"], "n2": [None], "n3": ["NoExecute"], "n4": ["None"]}
    for features in (R136, R137):
        cache = cluster(features, taints)
        add_claim(cache, claim("c", request()))
        _, rejected, _ = filtered(cache, features)
        # The allocator's words: a tainted device is just not a candidate.
        assert rejected == {"n1": [CANNOT_ALLOCATE], "n3": [CANNOT_ALLOCATE]}
    cache = cluster(R135, taints)
    add_claim(cache, claim("c", request()))
    assert filtered(cache, R135)[1] == {}


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ([EXISTS], {"n1", "n2", "n3"}),
        ([{**EXISTS, "effect": "NoSchedule"}], {"n1", "n2"}),
        ([{"key": "maintenance", "operator": "Equal", "value": "x"}], {"n2"}),
        ([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}], {"n2", "n3"}),
    ],
)
def test_a_request_s_tolerations_let_it_have_the_device(
    tolerations: list[dict[str, Any]], fits: set[str]
) -> None:
    cache = cluster(R137, {"n1": ["NoSchedule"], "n2": [None], "n3": ["NoExecute"]})
    add_claim(cache, claim("c", request(tolerations=tolerations)))
    _, rejected, _ = filtered(cache, R137)
    assert set(rejected) == {"n1", "n2", "n3"} - fits


def test_a_subrequest_s_tolerations_are_its_own() -> None:
    cache = cluster(R137, {"n1": ["NoSchedule"], "n2": [None]})
    sub = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    add_claim(
        cache,
        claim(
            "c",
            {
                "name": "r",
                "firstAvailable": [
                    {"name": "strict", **sub},
                    {"name": "lenient", **sub, "tolerations": [EXISTS]},
                ],
            },
        ),
    )
    plugin, rejected, state = filtered(cache, R137)
    assert rejected == {}
    # n1 only by the second subrequest: a lower firstAvailable score.
    scores = plugin.score(state, parse_pod(claiming()), cache.table, np.arange(2))
    assert scores.tolist() == [7, 8]


def test_an_all_request_fails_where_one_of_its_devices_is_tainted() -> None:
    cache = cluster(R137, {"n1": [None, "NoSchedule"], "n2": [None, None], "n3": ["None"]})
    add_claim(cache, claim("c", request(mode="All")))
    _, rejected, _ = filtered(cache, R137)
    assert rejected == {"n1": [CANNOT_ALLOCATE]}


def test_reserve_allocates_the_untainted_device_and_writes_the_tolerations() -> None:
    cache = cluster(R137, {"n1": ["NoSchedule", None, "NoExecute"]})
    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}
    add_claim(cache, claim("c", request(count=2, tolerations=[toleration])))
    plugin, rejected, state = filtered(cache, R137)
    assert rejected == {}
    assert plugin.reserve(state, parse_pod(claiming()), "n1").ok
    (allocation,) = state.read(NAME).allocations.values()
    assert [d.device for d in allocation.devices] == ["g1", "g2"]
    assert allocation.to_api()["devices"]["results"][0]["tolerations"] == [toleration]


def test_counting_agrees_with_the_search_on_random_taints() -> None:
    rng = np.random.default_rng(11)
    effects: list[str | None] = [None, None, "NoSchedule", "NoExecute", "None"]
    tolerations: list[list[dict[str, Any]]] = [
        [],
        [EXISTS],
        [{**EXISTS, "effect": "NoExecute"}],
    ]
    for trial in range(20):
        taints = {
            f"n{i}": [effects[int(rng.integers(0, len(effects)))] for _ in range(3)]
            for i in range(1, 5)
        }
        tol = tolerations[int(rng.integers(0, len(tolerations)))]
        cache = cluster(R137, taints)
        add_claim(cache, claim("c", request(count=int(rng.integers(1, 3)), tolerations=tol)))
        plugin, rejected, state = filtered(cache, R137)
        for name in taints:
            found = plugin._allocate_on(state.read(NAME), name)
            assert (name not in rejected) == (not isinstance(found, Status)), (trial, taints, tol)


def rule(name: str, selector: dict[str, str], effect: str = "NoSchedule") -> Any:
    return parse_device_taint_rule(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"deviceSelector": selector, "taint": {"key": "rule", "effect": effect}},
        }
    )


def test_a_device_taint_rule_taints_devices_until_it_is_deleted() -> None:
    cache = cluster(R137, {"n1": [None], "n2": [None]})
    add_claim(cache, claim("c", request()))
    handler = cache.resources.handlers["DeviceTaintRule"]
    r = rule("r", {"driver": DRIVER, "pool": "n1", "device": "g0"})
    handler.on_add(r)
    assert filtered(cache, R137)[1] == {"n1": [CANNOT_ALLOCATE]}
    handler.on_delete(r)
    assert filtered(cache, R137)[1] == {}


def test_a_rule_changes_nothing_while_its_gate_is_off() -> None:
    cache = cluster(R136, {"n1": [None]})
    add_claim(cache, claim("c", request()))
    cache.resources.handlers["DeviceTaintRule"].on_add(rule("r", {}))
    assert filtered(cache, R136)[1] == {}


def test_an_allocated_claim_keeps_its_noexecute_tainted_device() -> None:
    # Eviction is the device taint eviction controller's: the scheduler only checks where the
    # allocation is available.
    cache = cluster(R137, {"n1": ["NoExecute"], "n2": [None]})
    add_claim(cache, claim("c", request(), allocation=allocated("n1", ("n1", "g0"))))
    _, rejected, _ = filtered(cache, R137)
    assert "n1" not in rejected
