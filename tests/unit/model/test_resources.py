"""`pod_requests`: a pod's requests with an in-place resize's status, as component-helpers'
`PodRequests` reads them for kube-scheduler v1.35 (cases from its `helpers_test.go` where they
apply), and `resize_digest`."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.model.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    PodRequests,
    pod_requests,
    resize_digest,
)

MI = 2**20
INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
DEFERRED = {"type": "PodResizePending", "status": "True", "reason": "Deferred"}


def c(name: str, *, sidecar: bool = False, **requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "pause"}
    if requests:
        out["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def cs(
    name: str, actuated: dict[str, str] | None, allocated: dict[str, str] | None = None
) -> dict[str, Any]:
    """A container status; `actuated` None: no `resources` reported at all."""
    out: dict[str, Any] = {"name": name}
    if actuated is not None:
        out["resources"] = {"requests": actuated}
    if allocated is not None:
        out["allocatedResources"] = allocated
    return out


def run(spec: dict[str, Any], status: dict[str, Any] | None = None) -> PodRequests:
    errors: list[str] = []
    out = pod_requests(spec, status or {}, errors)
    assert errors == []
    return out


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param(
            {"containers": [c("container-1", cpu="4")]},
            {"conditions": [INFEASIBLE], "containerStatuses": [cs("container-1", {"cpu": "2"})]},
            {"cpu": 2000},
            id="resized-infeasible",
        ),
        pytest.param(
            {"containers": [c("container-1", cpu="6")]},
            {
                "conditions": [INFEASIBLE],
                "containerStatuses": [cs("container-1", {"cpu": "2"}, {"cpu": "4"})],
            },
            {"cpu": 4000},
            id="resized-infeasible-and-in-progress",
        ),
        pytest.param(
            {"containers": [c("container-1", cpu="4")]},
            {"containerStatuses": [cs("container-1", {"cpu": "2"})]},
            {"cpu": 4000},
            id="resized-no-resize-status",
        ),
        pytest.param(
            {"containers": [c("container-1", cpu="30m", memory="20M", ephemeral_storage="10G")]},
            {
                "containerStatuses": [
                    cs(
                        "container-1",
                        {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                        {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                    )
                ]
            },
            {"cpu": 30, "memory": 30 * 10**6, "ephemeral-storage": 30 * 10**9},
            id="resized-per-resource-3-way-maximum",
        ),
        pytest.param(
            {"initContainers": [c("restartable-init-1", sidecar=True, cpu="4")]},
            {
                "conditions": [INFEASIBLE],
                "initContainerStatuses": [cs("restartable-init-1", {"cpu": "2"})],
            },
            {"cpu": 2000},
            id="resized-restartable-init-container-infeasible",
        ),
        pytest.param(
            {"initContainers": [c("restartable-init-1", sidecar=True, cpu="4")]},
            {"initContainerStatuses": [cs("restartable-init-1", {"cpu": "2"})]},
            {"cpu": 4000},
            id="resized-restartable-init-container-no-resize-status",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")]},
            {"containerStatuses": [cs("a", {"cpu": "3"})]},
            {"cpu": 3000},
            id="actuated-above-spec-holds-until-done",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")]},
            {"containerStatuses": [cs("a", None, {"cpu": "3"})]},
            {"cpu": 1000},
            id="allocated-ignored-without-status-resources",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")]},
            {
                "containerStatuses": [
                    {"name": "a", "resources": {}, "allocatedResources": {"cpu": "3"}}
                ]
            },
            {"cpu": 3000},
            id="empty-status-resources-still-read",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")]},
            {"conditions": [INFEASIBLE], "containerStatuses": [cs("a", {})]},
            {},
            id="infeasible-with-nothing-actuated-holds-nothing",
        ),
        pytest.param(
            {"containers": [c("a", cpu="4")]},
            {
                "conditions": [DEFERRED, INFEASIBLE],
                "containerStatuses": [cs("a", {"cpu": "2"})],
            },
            {"cpu": 4000},
            id="first-resize-pending-condition-decides",
        ),
        pytest.param(
            {"initContainers": [c("i", cpu="1")], "containers": [c("a", cpu="100m")]},
            {"initContainerStatuses": [cs("i", {"cpu": "5"})]},
            {"cpu": 1000},
            id="regular-init-container-status-ignored",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")]},
            {"containerStatuses": [cs("b", {"cpu": "5"})]},
            {"cpu": 1000},
            id="status-of-another-name-ignored",
        ),
        pytest.param(
            {
                "initContainers": [c("s", sidecar=True, cpu="1"), c("i", cpu="2")],
                "containers": [c("a", cpu="1")],
            },
            {"initContainerStatuses": [cs("s", {"cpu": "3"})]},
            {"cpu": 5000},
            id="resized-sidecar-counts-in-init-phase-too",
        ),
        pytest.param(
            {
                "containers": [c("a", cpu="1", memory="1Mi")],
                "resources": {"requests": {"cpu": "2"}},
            },
            {
                "containerStatuses": [cs("a", {"cpu": "4", "memory": "3Mi"})],
                "resources": {"requests": {"cpu": "6"}},
                "allocatedResources": {"cpu": "6"},
            },
            {"cpu": 2000, "memory": 3 * MI},
            id="pod-level-spec-replaces-status-aggregate-pod-status-ignored",
        ),
        pytest.param(
            {"containers": [c("a", cpu="1")], "overhead": {"cpu": "100m"}},
            {"containerStatuses": [cs("a", {"cpu": "2"})]},
            {"cpu": 2100},
            id="overhead-added-to-status",
        ),
    ],
)
def test_requests(spec: dict[str, Any], status: dict[str, Any], expected: dict[str, int]) -> None:
    assert run(spec, status).requests == expected


def test_spec_requests_kept_only_when_the_status_changes_them() -> None:
    spec = {"containers": [c("a", cpu="1")]}
    grown = run(spec, {"containerStatuses": [cs("a", {"cpu": "2"})]})
    assert grown.requests == {"cpu": 2000}
    assert grown.spec_requests == {"cpu": 1000}
    same = run(spec, {"containerStatuses": [cs("a", {"cpu": "1"})]})
    assert same.requests == {"cpu": 1000}
    assert same.spec_requests is None


@pytest.mark.parametrize(
    ("spec", "status", "nonzero", "score"),
    [
        pytest.param(
            {"containers": [c("a")]},
            {"containerStatuses": [cs("a", {"cpu": "250m"})]},
            (250, DEFAULT_MEMORY_REQUEST),
            (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
            id="status-cpu-is-not-missing-but-scored-from-the-spec",
        ),
        pytest.param(
            {
                "containers": [c("a", memory="100Mi"), c("b")],
                "resources": {"requests": {"cpu": "1"}},
            },
            {},
            (1000, 100 * MI),
            (2 * DEFAULT_MILLI_CPU_REQUEST, 100 * MI + DEFAULT_MEMORY_REQUEST),
            id="pod-level-no-default-for-a-resource-some-container-requests",
        ),
        pytest.param(
            {"containers": [c("a"), c("b")], "resources": {"requests": {"memory": "1Gi"}}},
            {},
            (2 * DEFAULT_MILLI_CPU_REQUEST, 1024 * MI),
            (2 * DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST),
            id="pod-level-default-for-what-neither-level-requests",
        ),
        pytest.param(
            {"containers": [c("a", cpu="0")], "resources": {"requests": {"memory": "1Gi"}}},
            {},
            (0, 1024 * MI),
            (0, DEFAULT_MEMORY_REQUEST),
            id="pod-level-explicit-zero-cpu-not-defaulted",
        ),
    ],
)
def test_nonzero(
    spec: dict[str, Any],
    status: dict[str, Any],
    nonzero: tuple[int, int],
    score: tuple[int, int] | None,
) -> None:
    out = run(spec, status)
    assert out.nonzero == nonzero
    assert out.score_nonzero == score


def test_bad_status_quantity_is_an_error_naming_the_field() -> None:
    errors: list[str] = []
    out = pod_requests(
        {"containers": [c("a", cpu="1")]},
        {"containerStatuses": [cs("a", {"cpu": "lots"}, {"memory": "-1"})]},
        errors,
    )
    assert out.requests == {"cpu": 1000}
    assert any(e.startswith("status.containerStatuses[0].resources.requests.cpu") for e in errors)
    assert any(
        e.startswith("status.containerStatuses[0].allocatedResources.memory") for e in errors
    )


def test_resize_digest() -> None:
    assert resize_digest({}) == 0
    assert resize_digest({"phase": "Running", "containerStatuses": [{"name": "a"}]}) == 0
    base = {"containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "1"})]}
    digest = resize_digest(base)
    assert digest not in (0, -1)
    # What the kubelet changes on every update leaves it.
    assert resize_digest({**base, "phase": "Running", "conditions": [{"type": "Ready"}]}) == digest
    different = [
        {"containerStatuses": [cs("a", {"cpu": "2"}, {"cpu": "1"})]},
        {"containerStatuses": [cs("a", {"cpu": "1"}, {"cpu": "2"})]},
        {"containerStatuses": [cs("a", {"cpu": "1"})]},
        {"containerStatuses": [{"name": "a", "resources": {}, "allocatedResources": {"cpu": "1"}}]},
        {**base, "conditions": [INFEASIBLE]},
    ]
    digests = {resize_digest(s) for s in different}
    assert digest not in digests
    assert len(digests) == len(different)
    # Init container or not: the name is what a container's status is looked up by.
    assert resize_digest({"initContainerStatuses": base["containerStatuses"]}) == digest
    assert resize_digest({"containerStatuses": ["not an object"]}) == -1
