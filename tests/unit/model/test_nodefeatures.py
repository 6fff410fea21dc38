"""What a pod's spec requires of its node's declared features (component-helpers'
`InferForScheduling` of each feature), and bad input named, never raised."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.model import parse_pod
from ascheduler.model.nodefeatures import (
    BITS,
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
    infer_for_scheduling,
    mask,
    names_of,
)
from tests.kit import pod

RESTART_ALL = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]
RESTART_ONE = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]
BIND_MOUNT = [{"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]


@pytest.mark.parametrize(
    ("spec", "needs"),
    [
        pytest.param({"containers": [{"name": "c"}]}, set(), id="plain"),
        pytest.param(
            {"containers": [{"name": "c", "restartPolicyRules": RESTART_ALL}]},
            {RESTART_ALL_CONTAINERS},
            id="container-restart-all",
        ),
        pytest.param(
            {
                "containers": [{"name": "c"}],
                "initContainers": [{"name": "i", "restartPolicyRules": RESTART_ALL}],
            },
            {RESTART_ALL_CONTAINERS},
            id="init-container-restart-all",
        ),
        pytest.param(
            {"containers": [{"name": "c", "restartPolicyRules": RESTART_ONE}]},
            set(),
            id="restart-one-container-only",
        ),
        pytest.param(
            {
                "containers": [{"name": "c"}],
                "ephemeralContainers": [{"name": "e", "restartPolicyRules": RESTART_ALL}],
            },
            set(),
            id="ephemeral-restart-rules-do-not-count",
        ),
        pytest.param(
            {"containers": [{"name": "c"}], "hostNetwork": True, "hostUsers": False},
            {USER_NAMESPACES_HOST_NETWORK},
            id="host-network-user-namespace",
        ),
        pytest.param(
            {"containers": [{"name": "c"}], "hostNetwork": True},
            set(),
            id="host-network-host-users-unset",
        ),
        pytest.param(
            {"containers": [{"name": "c"}], "hostNetwork": True, "hostUsers": True},
            set(),
            id="host-network-host-users",
        ),
        pytest.param(
            {"containers": [{"name": "c"}], "hostUsers": False},
            set(),
            id="user-namespace-pod-network",
        ),
        pytest.param(
            {"containers": [{"name": "c", "volumeMounts": BIND_MOUNT}]},
            {VOLUME_BIND_MOUNT_OPTIONS},
            id="bind-mount-options",
        ),
        pytest.param(
            {
                "containers": [{"name": "c"}],
                "ephemeralContainers": [{"name": "e", "volumeMounts": BIND_MOUNT}],
            },
            {VOLUME_BIND_MOUNT_OPTIONS},
            id="ephemeral-bind-mount-options",
        ),
        pytest.param(
            {
                "containers": [
                    {"name": "c", "volumeMounts": [{**BIND_MOUNT[0], "bindMountOptions": []}]}
                ]
            },
            set(),
            id="empty-bind-mount-options",
        ),
        pytest.param(
            {
                "containers": [
                    {"name": "c", "restartPolicyRules": RESTART_ALL, "volumeMounts": BIND_MOUNT}
                ],
                "hostNetwork": True,
                "hostUsers": False,
            },
            {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS},
            id="all-three",
        ),
    ],
)
def test_infer_for_scheduling(spec: dict[str, Any], needs: set[str]) -> None:
    errors: list[str] = []
    assert infer_for_scheduling(spec, errors) == needs
    assert errors == []


def test_the_pod_records_its_requirements() -> None:
    info = parse_pod(pod(containers=[{"name": "c", "restartPolicyRules": RESTART_ALL}]))
    assert info.node_features == {RESTART_ALL_CONTAINERS}
    assert not info.errors
    assert parse_pod(pod()).node_features == frozenset()


@pytest.mark.parametrize(
    ("container", "field"),
    [
        ({"name": "c", "restartPolicyRules": "all"}, "spec.containers[0].restartPolicyRules"),
        ({"name": "c", "restartPolicyRules": [3]}, "spec.containers[0].restartPolicyRules[0]"),
        ({"name": "c", "volumeMounts": {"a": 1}}, "spec.containers[0].volumeMounts"),
        (
            {"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": "ro"}]},
            "spec.containers[0].volumeMounts[0].bindMountOptions",
        ),
    ],
)
def test_bad_fields_are_named_not_raised(container: dict[str, Any], field: str) -> None:
    info = parse_pod(pod(containers=[container]))
    assert any(e.startswith(field + ":") for e in info.errors), info.errors


def test_bits_follow_the_librarys_sorted_order_and_round_trip() -> None:
    assert list(BITS) == sorted(BITS)
    both = mask([RESTART_ALL_CONTAINERS, VOLUME_BIND_MOUNT_OPTIONS, "SomethingElse"])
    assert names_of(both) == [RESTART_ALL_CONTAINERS, VOLUME_BIND_MOUNT_OPTIONS]
    assert mask(["ExtendWebSocketsToKubelet"]) == 0
