"""NodeDeclaredFeatures: a pod needing a feature fits only nodes declaring it, by the
release's registry and messages; nothing while the gate is off; the hints kube-scheduler's."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ClusterEvent, Code, CycleState, Handle
from ascheduler.model import parse_node
from ascheduler.model.nodefeatures import (
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
)
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.nodedeclaredfeatures import (
    NAME,
    REASON,
    NodeDeclaredFeatures,
    schedulable_features,
)
from tests.kit import make_cache, node, parsed, pod, rejected_reasons, rejection_codes
from tests.kit import run_filter as run

R35, R36, R37 = Release(1, 35), Release(1, 36), Release(1, 37)
RESTART_ALL = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]
BIND_MOUNT = [{"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]

NODES = [
    node("none"),
    node("restart", declared_features=[RESTART_ALL_CONTAINERS]),
    node("userns", declared_features=[USER_NAMESPACES_HOST_NETWORK]),
    node(
        "all",
        declared_features=[
            RESTART_ALL_CONTAINERS,
            USER_NAMESPACES_HOST_NETWORK,
            VOLUME_BIND_MOUNT_OPTIONS,
            "ExtendWebSocketsToKubelet",
        ],
    ),
]


def restarting() -> dict[str, Any]:
    return pod(containers=[{"name": "c", "restartPolicyRules": RESTART_ALL}])


def host_userns() -> dict[str, Any]:
    return pod(hostNetwork=True, hostUsers=False)


def bind_mounting() -> dict[str, Any]:
    return pod(containers=[{"name": "c", "volumeMounts": BIND_MOUNT}])


def plugin(features: Features) -> NodeDeclaredFeatures:
    registration = IN_TREE[NAME]
    built = registration.build(registration.decode_args(None, "args"), Handle(features=features))
    assert isinstance(built, NodeDeclaredFeatures)
    return built


def test_release_registries() -> None:
    assert schedulable_features(R35) == {RESTART_ALL_CONTAINERS}
    assert schedulable_features(R36) == {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK}
    assert schedulable_features(R37) == {
        RESTART_ALL_CONTAINERS,
        USER_NAMESPACES_HOST_NETWORK,
        VOLUME_BIND_MOUNT_OPTIONS,
    }


@pytest.mark.parametrize(
    ("release", "make", "rejected"),
    [
        pytest.param(R36, restarting, {"none", "userns"}, id="1.36-restart"),
        pytest.param(R36, host_userns, {"none", "restart"}, id="1.36-userns"),
        pytest.param(R36, bind_mounting, set(), id="1.36-bind-mounts-unknown"),
        pytest.param(R37, restarting, {"none", "userns"}, id="1.37-restart"),
        pytest.param(R37, host_userns, {"none", "restart"}, id="1.37-userns"),
        pytest.param(R37, bind_mounting, {"none", "restart", "userns"}, id="1.37-bind-mounts"),
        pytest.param(R37, pod, set(), id="1.37-plain"),
    ],
)
def test_filter_by_release(release: Release, make: Any, rejected: set[str]) -> None:
    cache = make_cache(NODES)
    result = run(plugin(Features.defaults(release)), make(), cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    assert set(rejection_codes(result, cache).values()) <= {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_a_pod_without_requirements_skips() -> None:
    cache = make_cache(NODES)
    for info in (parsed(pod()), parsed(bind_mounting())):
        state = CycleState()
        _, status = plugin(Features.defaults(R36)).pre_filter(state, info, cache.table)
        assert status.code is Code.SKIP


def test_gate_off_does_nothing_and_registers_nothing() -> None:
    cache = make_cache(NODES)
    off = plugin(Features.defaults(R35))
    _, status = off.pre_filter(CycleState(), parsed(restarting()), cache.table)
    assert status.code is Code.SKIP
    assert off.filter(CycleState(), parsed(restarting()), cache.table) is None
    assert off.events_to_register() == frozenset()


def test_1_35_with_the_gate_on_names_the_unsatisfied_features() -> None:
    cache = make_cache(NODES)
    on = plugin(parse_gates("NodeDeclaredFeatures=true", R35))
    result = run(on, restarting(), cache)
    message = (
        f"node declared features check failed - unsatisfied requirements: {RESTART_ALL_CONTAINERS}"
    )
    assert rejected_reasons(result, cache) == {"none": [message], "userns": [message]}
    # 1.35's library does not know the user-namespace feature.
    assert run(on, host_userns(), cache) is None


def test_declared_features_follow_node_updates_and_removals() -> None:
    cache = make_cache(NODES)
    on = plugin(Features.defaults(R37))
    cache.update_node(parse_node(node("none", declared_features=[RESTART_ALL_CONTAINERS])))
    cache.remove_node("restart")  # the last row moves into its place
    result = run(on, restarting(), cache)
    assert rejected_reasons(result, cache) == {"userns": [REASON]}


def test_explain_names_what_the_node_lacks() -> None:
    cache = make_cache(NODES)
    on = plugin(Features.defaults(R37))
    state = CycleState()
    info = parsed(
        pod(
            containers=[
                {"name": "c", "restartPolicyRules": RESTART_ALL, "volumeMounts": BIND_MOUNT}
            ]
        )
    )
    on.pre_filter(state, info, cache.table)
    row = cache.table.index["userns"]
    assert on.explain(state, info, cache.table, row) == [
        f"node does not declare {RESTART_ALL_CONTAINERS}, {VOLUME_BIND_MOUNT_OPTIONS}"
    ]


def test_node_hint_queues_only_when_declared_features_change() -> None:
    on = plugin(Features.defaults(R36))
    info = parsed(restarting())
    before = parse_node(node("n"))
    same = parse_node(node("n", cpu="8"))
    declared = parse_node(node("n", declared_features=[RESTART_ALL_CONTAINERS]))
    assert on.events_to_register() == {
        ClusterEvent.NODE_ADD,
        ClusterEvent.NODE_DECLARED_FEATURES,
        ClusterEvent.UNSCHEDULED_POD_UPDATE,
    }
    assert on.queueing_hint(info, ClusterEvent.NODE_ADD, None, declared)
    assert on.queueing_hint(info, ClusterEvent.NODE_DECLARED_FEATURES, before, declared)
    assert not on.queueing_hint(info, ClusterEvent.NODE_DECLARED_FEATURES, before, same)


def test_pod_hint_queues_only_when_its_requirements_change() -> None:
    on = plugin(Features.defaults(R36))
    old = parsed(restarting())
    plain = parsed(pod())
    event = ClusterEvent.UNSCHEDULED_POD_UPDATE
    assert on.queueing_hint(old, event, old, plain)
    assert not on.queueing_hint(old, event, old, parsed(restarting()))
    # A requirement the release does not know changes nothing.
    assert not on.queueing_hint(plain, event, plain, parsed(bind_mounting()))
    other = parsed(pod("q"))
    assert not on.queueing_hint(
        old, event, other, parsed(pod("q", hostNetwork=True, hostUsers=False))
    )
