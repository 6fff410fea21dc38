"""DynamicResources and NodeResourcesFit with extended resources backed by DRA, per release:
off at 1.35 (Fit's `Insufficient`), on at 1.36 and 1.37 (devices of the class serve nodes that
advertise none; a node that advertises the resource serves it the device-plugin way)."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.cache import Cache
from ascheduler.dra.extended import CLAIM_ANNOTATION, IN_MEMORY_NAME
from ascheduler.features import Features, Release
from ascheduler.framework import ClusterEvent, Code, CycleState, Diagnosis, Status
from ascheduler.model import parse_pod
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from ascheduler.plugins.dynamicresources.extended import CANNOT_FIT, DELETED, STALE
from ascheduler.plugins.dynamicresources.state import CANNOT_ALLOCATE, _State
from tests.kit import container, make_cache, make_plugin, node, pod, rejected_reasons
from tests.unit.dra.helpers import DRIVER, device, slice_

GPU = "example.com/gpu"
ON = [Features.defaults(Release(1, 36)), Features.defaults(Release(1, 37))]
OFF = Features.defaults(Release(1, 35))


def cluster() -> Cache:
    """n1: two devices; n2: one device; n3: advertises two natively; n4: nothing."""
    cache = make_cache([node("n1"), node("n2"), node("n3", **{GPU: "2"}), node("n4")])
    for name, count in (("n1", 2), ("n2", 1)):
        cache.resources.handlers["ResourceSlice"].on_add(
            parse_resource_slice(slice_(name, [device(f"g{i}") for i in range(count)], node=name))
        )
    cache.resources.handlers["DeviceClass"].on_add(
        parse_device_class(
            {
                "metadata": {"name": "gpu", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                    "extendedResourceName": GPU,
                },
            }
        )
    )
    return cache


def wanting(count: int, name: str = GPU) -> dict[str, Any]:
    return pod("x", namespace="ns", uid="pod-uid", containers=[container(extra={name: str(count)})])


def run(name: str, cache: Cache, raw: dict[str, Any], features: Features) -> Any:
    plugin = make_plugin(name, cache, features=features)
    state = CycleState()
    info = parse_pod(raw)
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, info, cache.table)
        if status.code is Code.SKIP:
            return plugin, None, state, info
        assert status.ok, status
    return plugin, plugin.filter(state, info, cache.table), state, info


def test_at_1_35_fit_refuses_and_dynamicresources_skips() -> None:
    cache = cluster()
    _, fit, _, _ = run("NodeResourcesFit", cache, wanting(1), OFF)
    assert rejected_reasons(fit, cache) == {n: [f"Insufficient {GPU}"] for n in ("n1", "n2", "n4")}
    _, dra, state, _ = run("DynamicResources", cache, wanting(1), OFF)
    assert dra is None
    assert state.read("DynamicResources").extended is None


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_fit_leaves_the_resource_to_dra_where_a_node_advertises_none(features: Features) -> None:
    cache = cluster()
    _, fit, _, _ = run("NodeResourcesFit", cache, wanting(1), features)
    assert fit is None
    # Where the node advertises it, Fit counts it as ever.
    _, fit, _, _ = run("NodeResourcesFit", cache, wanting(3), features)
    assert rejected_reasons(fit, cache) == {"n3": [f"Insufficient {GPU}"]}


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_devices_serve_nodes_without_the_resource(features: Features) -> None:
    cache = cluster()
    _, result, _, _ = run("DynamicResources", cache, wanting(2), features)
    # n3 advertises it natively: nothing for DRA to do there.
    assert rejected_reasons(result, cache) == {"n2": [CANNOT_ALLOCATE], "n4": [CANNOT_ALLOCATE]}
    assert all(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in result.rejections)


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_the_implicit_name_is_backed_too(features: Features) -> None:
    cache = cluster()
    raw = wanting(1, "deviceclass.resource.kubernetes.io/gpu")
    _, result, _, _ = run("DynamicResources", cache, raw, features)
    assert rejected_reasons(result, cache) == {"n3": [CANNOT_ALLOCATE], "n4": [CANNOT_ALLOCATE]}


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_an_unbacked_extended_resource_nowhere_advertised_cannot_fit(features: Features) -> None:
    cache = cluster()
    raw = pod(
        "x",
        namespace="ns",
        containers=[container(extra={GPU: "1", "example.com/fpga": "1"})],
    )
    _, result, _, _ = run("DynamicResources", cache, raw, features)
    assert rejected_reasons(result, cache) == {n: [CANNOT_FIT] for n in ("n1", "n2", "n3", "n4")}


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_reserve_makes_the_nodes_claim_and_holds_its_devices(features: Features) -> None:
    cache = cluster()
    plugin, _, state, info = run("DynamicResources", cache, wanting(2), features)
    assert plugin.reserve(state, info, "n1").ok
    s: _State = state.read("DynamicResources")
    assert s.extended is not None
    assert s.extended.index == 0
    claim = s.claims[0]
    assert claim.name == IN_MEMORY_NAME
    assert 0 in s.to_allocate
    assert [d.device for d in s.allocations[0].devices] == ["g0", "g1"]
    assert [(m.container, m.request) for m in s.extended.mappings] == [
        ("c", "container-0-request-0")
    ]
    assert cache.resources.has_pending_allocation(claim.uid)
    plugin.unreserve(state, info, "n1")
    assert not cache.resources.has_pending_allocation(claim.uid)


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_a_node_advertising_the_resource_gets_no_claim(features: Features) -> None:
    cache = cluster()
    plugin, _, state, info = run("DynamicResources", cache, wanting(1), features)
    assert plugin.reserve(state, info, "n3").ok
    s: _State = state.read("DynamicResources")
    assert s.claims == []
    assert s.extended is not None
    assert s.extended.index is None


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_an_earlier_cycles_claim_is_refused_then_deleted(features: Features) -> None:
    cache = cluster()
    cache.resources.handlers["ResourceClaim"].on_add(
        parse_resource_claim(
            {
                "metadata": {
                    "name": "x-extended-resources-abcde",
                    "namespace": "ns",
                    "uid": "old",
                    "annotations": {CLAIM_ANNOTATION: "true"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": "x",
                            "uid": "pod-uid",
                            "controller": True,
                        }
                    ],
                },
                "spec": {"devices": {"requests": []}},
            }
        )
    )
    plugin, result, state, info = run("DynamicResources", cache, wanting(1), features)
    assert rejected_reasons(result, cache) == {n: [STALE] for n in ("n1", "n2", "n3", "n4")}
    state.dry_run = True
    out = plugin.post_filter(state, info, cache.table, Diagnosis(4))
    assert out.status == Status.unschedulable(DELETED)


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_fit_registers_class_events(features: Features) -> None:
    cache = cluster()
    fit = make_plugin("NodeResourcesFit", cache, features=features)
    assert ClusterEvent.DEVICE_CLASS_ADD in fit.events_to_register()
    assert (
        ClusterEvent.DEVICE_CLASS_ADD
        not in make_plugin("NodeResourcesFit", cache, features=OFF).events_to_register()
    )


@pytest.mark.parametrize("features", ON, ids=["1.36", "1.37"])
def test_an_earlier_cycles_claim_in_use_by_another_pod_fails_prefilter(features: Features) -> None:
    cache = cluster()
    cache.resources.handlers["ResourceClaim"].on_add(
        parse_resource_claim(
            {
                "metadata": {
                    "name": "x-extended-resources-abcde",
                    "namespace": "ns",
                    "uid": "old",
                    "annotations": {CLAIM_ANNOTATION: "true"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": "x",
                            "uid": "pod-uid",
                            "controller": True,
                        }
                    ],
                },
                "spec": {"devices": {"requests": []}},
                "status": {
                    "allocation": {"devices": {"results": []}},
                    "reservedFor": [
                        {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)
                    ],
                },
            }
        )
    )
    plugin = make_plugin("DynamicResources", cache, features=features)
    _, status = plugin.pre_filter(CycleState(), parse_pod(wanting(1)), cache.table)
    assert status == Status.unschedulable("resourceclaim in use", resolvable=False)
