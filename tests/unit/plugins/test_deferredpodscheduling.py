"""DeferredPodScheduling and the deferred-resize rules of kube-scheduler 1.37 (gate
InPlacePodVerticalScalingSchedulerPreemption): the plugin, its place in the default profile,
the plugins that skip a deferred pod, NodeResourcesFit's increase-only check."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import SKIP, ClusterEvent, Code, CycleState, Handle
from ascheduler.framework.profile import default_plugins, multipoint
from ascheduler.framework.registry import Registry
from ascheduler.framework.runtime.framework import Framework
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.resources import RequestsRule
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.deferredpodscheduling import (
    PERMIT_REASON,
    REASON_DISABLED,
    REASON_OTHER_NODE,
    DeferredPodScheduling,
)
from tests.kit import make_cache, node, pod, rejected_reasons, rejection_codes
from tests.kit import run_filter as run

GATE = "InPlacePodVerticalScalingSchedulerPreemption"
ON = parse_gates(f"{GATE}=true", Release(1, 37))
OFF = Features.defaults(Release(1, 37))
DEFERRED = {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}


def with_conditions(raw: dict[str, Any], *conditions: dict[str, str]) -> dict[str, Any]:
    return {**raw, "status": {**raw.get("status", {}), "conditions": list(conditions)}}


def deferred(name: str = "p", **fields: Any) -> dict[str, Any]:
    return with_conditions(pod(name, node_name="n1", **fields), DEFERRED)


def resized(spec_cpu: str, allocated_cpu: str, **fields: Any) -> dict[str, Any]:
    """A deferred pod on n1 whose spec asks `spec_cpu` while `allocated_cpu` runs."""
    raw = deferred(cpu=spec_cpu, **fields)
    raw["status"]["containerStatuses"] = [
        {
            "name": "c",
            "allocatedResources": {"cpu": allocated_cpu},
            "resources": {"requests": {"cpu": allocated_cpu}},
        }
    ]
    return raw


def disabled(name: str, **fields: Any) -> dict[str, Any]:
    raw = node(name, **fields)
    raw["spec"]["podPreemptionPolicy"] = {"disableResizePreemption": ["autoscaler"]}
    return raw


# -- the model ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        pytest.param((DEFERRED,), True, id="deferred"),
        pytest.param((INFEASIBLE,), False, id="infeasible"),
        pytest.param((), False, id="none"),
        pytest.param((INFEASIBLE, DEFERRED), False, id="first-decides"),
        pytest.param(({"type": "Ready", "reason": "Deferred"}, DEFERRED), True, id="other-type"),
    ],
)
def test_a_pod_is_deferred_by_its_first_resize_pending_condition(
    conditions: tuple[dict[str, str], ...], expected: bool
) -> None:
    """`resource.IsPodResizeDeferred`: the first PodResizePending condition's reason."""
    info = parse_pod(with_conditions(pod(node_name="n1"), *conditions))
    assert info.resize_deferred is expected


def test_a_status_update_reads_the_resize_condition_again() -> None:
    from ascheduler.model.pod import reparse_pod

    old = parse_pod(pod(node_name="n1"))
    new = reparse_pod(with_conditions(pod(node_name="n1"), DEFERRED), old)
    assert new.resize_deferred
    assert not reparse_pod(pod(node_name="n1"), new).resize_deferred


def test_node_preemption_policy() -> None:
    assert parse_node(disabled("n1")).resize_preemption_disabled
    assert not parse_node(node("n1")).resize_preemption_disabled
    empty = node("n1")
    empty["spec"]["podPreemptionPolicy"] = {"disableResizePreemption": []}
    assert not parse_node(empty).resize_preemption_disabled
    bad = node("n1")
    bad["spec"]["podPreemptionPolicy"] = {"disableResizePreemption": "autoscaler"}
    info = parse_node(bad)
    assert not info.resize_preemption_disabled
    assert any("spec.podPreemptionPolicy.disableResizePreemption" in e for e in info.errors)


# -- the plugin ---------------------------------------------------------------------------


def test_the_default_profile_has_it_before_fit_only_with_the_gate() -> None:
    names = [ref.name for ref in default_plugins(IN_TREE, ON)]
    assert names.index("DeferredPodScheduling") == names.index("NodeResourcesFit") - 1
    for features in (OFF, Features.defaults(Release(1, 35))):
        assert "DeferredPodScheduling" not in [r.name for r in default_plugins(IN_TREE, features)]


def test_gate_off_it_does_nothing() -> None:
    plugin = DeferredPodScheduling(OFF)
    cache = make_cache([node("n1"), disabled("n2")])
    info = parse_pod(deferred())
    assert plugin.pre_filter(CycleState(), info, cache.table)[1] is SKIP
    assert plugin.filter(CycleState(), info, cache.table) is None
    assert plugin.permit(CycleState(), info, "n1")[0].ok
    assert not plugin.queueing_hint(info, ClusterEvent.NODE_ADD, None, parse_node(node("n1")))


def test_filter_keeps_the_pod_on_its_node_unless_resize_preemption_is_disabled() -> None:
    cache = make_cache([disabled("n1"), node("n2"), disabled("n3")])
    plugin = DeferredPodScheduling(ON)
    info = parse_pod(deferred())
    assert plugin.pre_filter(CycleState(), info, cache.table)[1].ok
    result = run(plugin, deferred(), cache)
    assert rejected_reasons(result, cache) == {
        "n1": [REASON_DISABLED],
        "n2": [REASON_OTHER_NODE],
        "n3": [REASON_OTHER_NODE],
    }
    assert set(rejection_codes(result, cache).values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    cache = make_cache([node("n1"), node("n2")])
    assert rejected_reasons(run(plugin, deferred(), cache), cache) == {"n2": [REASON_OTHER_NODE]}
    # Not deferred: skipped.
    assert plugin.pre_filter(CycleState(), parse_pod(pod()), cache.table)[1] is SKIP


def test_permit_rejects_a_deferred_pod_that_fits() -> None:
    status, _ = DeferredPodScheduling(ON).permit(CycleState(), parse_pod(deferred()), "n1")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == PERMIT_REASON


def test_hints_queue_for_the_pod_s_node_when_preemption_becomes_allowed() -> None:
    plugin = DeferredPodScheduling(ON)
    info = parse_pod(deferred())
    assert plugin.events_to_register() == {
        ClusterEvent.NODE_ADD,
        ClusterEvent.NODE_PREEMPTION_POLICY,
    }
    on, off = parse_node(node("n1")), parse_node(disabled("n1"))
    policy = ClusterEvent.NODE_PREEMPTION_POLICY
    assert plugin.queueing_hint(info, policy, off, on)
    assert not plugin.queueing_hint(info, policy, on, off)
    assert not plugin.queueing_hint(info, policy, on, on)
    assert not plugin.queueing_hint(
        info, policy, parse_node(disabled("n2")), parse_node(node("n2"))
    )
    assert plugin.queueing_hint(info, ClusterEvent.NODE_ADD, None, on)
    assert not plugin.queueing_hint(info, ClusterEvent.NODE_ADD, None, off)
    assert not plugin.queueing_hint(info, ClusterEvent.NODE_ADD, None, parse_node(node("n2")))
    assert not plugin.queueing_hint(parse_pod(pod()), ClusterEvent.NODE_ADD, None, on)


# -- the cycle ------------------------------------------------------------------------------


def framework(features: Features, cache: Any) -> Framework:
    return Framework(
        multipoint("x", tuple(default_plugins(IN_TREE, features))),
        Registry(list(IN_TREE.values())),
        Handle(nodes=cache.table, storage=cache.storage, features=features),
    )


def cached(raw: dict[str, Any], features: Features, cache: Any) -> Any:
    info = parse_pod(raw, rule=RequestsRule.of(features))
    cache.add_pod(info)
    return info


def test_a_deferred_pod_skips_the_node_s_taints_and_cordon_and_its_own_ports() -> None:
    """TaintToleration, NodeUnschedulable, NodePorts... Skip a deferred pod: it runs there."""
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    cache = make_cache([node("n1", taints=[taint], unschedulable=True), node("n2")])
    raw = deferred(cpu="1", host_port=8080)
    info = cached(raw, ON, cache)
    result = framework(ON, cache).find_nodes(CycleState(), info, cache.table)
    assert result.node == "n1"
    # Gate off, the same pod meets its own node as any pod would.
    info = parse_pod(raw)
    result = framework(OFF, cache).find_nodes(CycleState(), info, cache.table)
    assert result.node is None


@pytest.mark.parametrize(
    ("others", "fits"),
    [
        pytest.param("2", True, id="room-for-the-increase"),
        pytest.param("2500m", False, id="overcommitted"),
    ],
)
def test_fit_checks_only_what_the_node_does_not_count_yet(others: str, fits: bool) -> None:
    """The cache counts a resizing pod at max(desired, allocated): the deferred pod's node
    is short only when that leaves it overcommitted."""
    cache = make_cache([node("n1", cpu="4")], [pod("other", node_name="n1", cpu=others)])
    info = cached(resized("2", "1"), ON, cache)
    assert info.requests["cpu"] == 2000
    result = framework(ON, cache).find_nodes(CycleState(), info, cache.table)
    if fits:
        assert result.node == "n1"
    else:
        assert result.node is None
        assert "Insufficient cpu" in result.status.message


def test_fit_without_the_gate_checks_the_whole_request() -> None:
    cache = make_cache([node("n1", cpu="4")], [pod("other", node_name="n1", cpu="1")])
    info = cached(resized("2", "1"), OFF, cache)
    fit = framework(OFF, cache).filter_plugins
    plugin = next(p for p in fit if p.name == "NodeResourcesFit")
    result = plugin.filter(CycleState(), info, cache.table)
    assert result is not None
    assert result.rejected.tolist() == [True]
    plugin = next(p for p in framework(ON, cache).filter_plugins if p.name == "NodeResourcesFit")
    assert plugin.filter(CycleState(), info, cache.table) is None


def test_dynamic_resources_post_filter_returns_early_for_a_deferred_pod() -> None:
    from ascheduler.framework import Diagnosis

    cache = make_cache([node("n1")])
    info = cached(deferred(cpu="1"), ON, cache)
    fw = framework(ON, cache)
    dra = next(p for p in fw.post_filter_plugins if p.name == "DynamicResources")
    result = dra.post_filter(CycleState(), info, cache.table, Diagnosis(1))
    assert result.status.code is Code.UNSCHEDULABLE
    assert result.status.message == ""


def test_fit_hints_for_a_deferred_pod_look_at_its_node_only() -> None:
    cache = make_cache([node("n1"), node("n2")])
    fit = next(p for p in framework(ON, cache).filter_plugins if p.name == "NodeResourcesFit")
    info = parse_pod(deferred(cpu="2"))
    other = parse_pod(pod("o", node_name="n2", cpu="1"))
    beside = parse_pod(pod("o", node_name="n1", cpu="1"))
    hint = fit.queueing_hint  # type: ignore[attr-defined]
    assert not hint(info, ClusterEvent.ASSIGNED_POD_DELETE, other, None)
    assert hint(info, ClusterEvent.ASSIGNED_POD_DELETE, beside, None)
    assert not hint(info, ClusterEvent.NODE_ALLOCATABLE, None, parse_node(node("n2")))
    assert hint(info, ClusterEvent.NODE_ALLOCATABLE, None, parse_node(node("n1")))
    assert hint(info, ClusterEvent.ASSIGNED_POD_SCALE_UP, beside, beside)
    assert not hint(info, ClusterEvent.ASSIGNED_POD_SCALE_UP, other, other)
    # A pod that is not deferred: scale-ups never help it; other events as before.
    plain = parse_pod(pod(cpu="2"))
    assert not hint(plain, ClusterEvent.ASSIGNED_POD_SCALE_UP, beside, beside)
    assert hint(plain, ClusterEvent.ASSIGNED_POD_DELETE, other, None)
    off = next(p for p in framework(OFF, cache).filter_plugins if p.name == "NodeResourcesFit")
    assert off.queueing_hint(info, ClusterEvent.ASSIGNED_POD_DELETE, other, None)  # type: ignore[attr-defined]
