"""`pod_requests`: a pod's requests with an in-place resize's status, as component-helpers'
`PodRequests` reads them for kube-scheduler v1.35 (cases from its `helpers_test.go` where they
apply), for 1.36 and 1.37 (`RequestsRule`), and `resize_digest`."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import POD_LEVEL_RESIZE, Features, Release, parse_gates
from ascheduler.model.pod import parse_pod, reparse_pod
from ascheduler.model.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    V1_35,
    PodRequests,
    RequestsRule,
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


# -- releases ----------------------------------------------------------------------------------

V1_36 = RequestsRule(aggregates=False, pod_level_status=True)
V1_37 = RequestsRule(aggregates=True, pod_level_status=True)


def run_as(spec: dict[str, Any], status: dict[str, Any], rule: RequestsRule) -> PodRequests:
    errors: list[str] = []
    out = pod_requests(spec, status, errors, rule)
    assert errors == []
    return out


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("1.35", V1_35),
        ("1.36", V1_36),
        ("1.37", V1_37),
    ],
)
def test_the_rule_of_each_release(release: str, expected: RequestsRule) -> None:
    assert RequestsRule.of(Features.defaults(Release.parse(release))) == expected


def test_the_pod_level_gate_chooses_pod_level_status_whatever_the_release() -> None:
    off = parse_gates(f"{POD_LEVEL_RESIZE}=false", Release(1, 37))
    assert RequestsRule.of(off) == RequestsRule(aggregates=True, pod_level_status=False)
    on = parse_gates(f"{POD_LEVEL_RESIZE}=true,NodeDeclaredFeatures=true", Release(1, 35))
    assert RequestsRule.of(on) == RequestsRule(aggregates=False, pod_level_status=True)


#: Container a resized down from 2 cpus to 1 and b up from 1 to 2, both actuated.
SWAPPED: tuple[dict[str, Any], dict[str, Any]] = (
    {"containers": [c("a", cpu="2"), c("b", cpu="1")]},
    {
        "containerStatuses": [
            cs("a", {"cpu": "1"}, {"cpu": "1"}),
            cs("b", {"cpu": "2"}, {"cpu": "2"}),
        ]
    },
)


@pytest.mark.parametrize(
    ("spec", "status", "before", "after"),
    [
        pytest.param(*SWAPPED, {"cpu": 4000}, {"cpu": 3000}, id="max-of-sums-not-sum-of-maxes"),
        pytest.param(
            {"containers": [c("main", cpu="1")], "initContainers": [c("init", cpu="1")]},
            {"initContainerStatuses": [cs("init", {"cpu": "3"}, {"cpu": "3"})]},
            {"cpu": 1000},
            {"cpu": 3000},
            id="plain-init-container-status-read",
        ),
        pytest.param(
            {"containers": [c("main", cpu="1")]},
            {"containerStatuses": [cs("main", None, {"cpu": "2"})]},
            {"cpu": 1000},
            {"cpu": 2000},
            id="allocated-without-resources-read",
        ),
        pytest.param(
            {"containers": [c("a", cpu="2"), c("b", cpu="1")]},
            {"conditions": [INFEASIBLE], "containerStatuses": [cs("a", {"cpu": "1"})]},
            {"cpu": 2000},
            {"cpu": 1000},
            id="infeasible-container-without-status-counts-nothing",
        ),
        pytest.param(
            {"containers": [c("main", cpu="1", memory="1Gi")]},
            {"containerStatuses": [cs("main", {"cpu": "2"}, {"memory": "2Gi"})]},
            {"cpu": 2000, "memory": 2 * 1024 * MI},
            {"cpu": 2000, "memory": 2 * 1024 * MI},
            id="one-container-unchanged",
        ),
        pytest.param(
            {"containers": [c("main", cpu="1")]},
            {},
            {"cpu": 1000},
            {"cpu": 1000},
            id="no-status-unchanged",
        ),
    ],
)
def test_v1_37_takes_the_largest_whole_pod_aggregate(
    spec: dict[str, Any],
    status: dict[str, Any],
    before: dict[str, int],
    after: dict[str, int],
) -> None:
    assert run_as(spec, status, V1_35).requests == before
    assert run_as(spec, status, V1_36).requests == before
    assert run_as(spec, status, V1_37).requests == after


def test_v1_37_nonzero_defaults_every_aggregate() -> None:
    # a asks for nothing: each aggregate counts it at the defaults, its resize to 300m cpu
    # included (its status lists cpu only: memory stays defaulted).
    spec = {"containers": [c("a"), c("b", cpu="1", memory="1Gi")]}
    status = {"containerStatuses": [cs("a", {"cpu": "300m"}, {"cpu": "300m"})]}
    got = run_as(spec, status, V1_37)
    assert got.requests == {"cpu": 1300, "memory": 1024 * MI}
    assert got.nonzero == (1300, 1024 * MI + DEFAULT_MEMORY_REQUEST)
    # What Fit scores the pod with is its spec, defaulted, in every release.
    assert got.score_nonzero == (1000 + DEFAULT_MILLI_CPU_REQUEST, got.nonzero[1])


#: Pod-level cpu 2, which the kubelet runs at 3; its memory is the container's 100Mi, which
#: the pod-level status reports at 1Gi.
POD_LEVEL_SPEC: dict[str, Any] = {
    "containers": [c("c0", memory="100Mi")],
    "resources": {"requests": {"cpu": "2"}},
}
POD_LEVEL_STATUS: dict[str, Any] = {
    "resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
    "allocatedResources": {"cpu": "2", "memory": "1Gi"},
}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        pytest.param(V1_35, {"cpu": 2000, "memory": 100 * MI}, id="gate-off"),
        # Only what the spec's pod-level requests name follows the status.
        pytest.param(V1_36, {"cpu": 3000, "memory": 100 * MI}, id="1.36"),
        # The pod-level maps stand for the aggregates, and every supported resource of the
        # largest replaces the containers'.
        pytest.param(V1_37, {"cpu": 3000, "memory": 1024 * MI}, id="1.37"),
        pytest.param(
            RequestsRule(aggregates=True, pod_level_status=False),
            {"cpu": 2000, "memory": 100 * MI},
            id="1.37-gate-off",
        ),
    ],
)
def test_pod_level_requests_follow_the_pod_status_with_the_gate(
    rule: RequestsRule, expected: dict[str, int]
) -> None:
    got = run_as(POD_LEVEL_SPEC, POD_LEVEL_STATUS, rule)
    assert got.requests == expected
    # NodeResourcesFit filters a pod being scheduled by its spec alone.
    assert (got.spec_requests or got.requests) == {"cpu": 2000, "memory": 100 * MI}


def test_pod_level_infeasible_resize_leaves_the_spec_out() -> None:
    status = {
        "conditions": [INFEASIBLE],
        "resources": {"requests": {"cpu": "1"}},
        "allocatedResources": {"cpu": "1"},
    }
    assert run_as(POD_LEVEL_SPEC, status, V1_35).requests["cpu"] == 2000
    assert run_as(POD_LEVEL_SPEC, status, V1_36).requests["cpu"] == 1000
    assert run_as(POD_LEVEL_SPEC, status, V1_37).requests["cpu"] == 1000


def test_parse_pod_reads_by_the_rule_and_reparse_keeps_it() -> None:
    obj = {
        "metadata": {"name": "p", "namespace": "d", "uid": "u"},
        "spec": {"nodeName": "n1", **SWAPPED[0]},
        "status": SWAPPED[1],
    }
    old = parse_pod(obj, rule=V1_37)
    assert old.requests == {"cpu": 3000}
    assert parse_pod(obj).requests == {"cpu": 4000}
    relabelled = {**obj, "metadata": {**obj["metadata"], "labels": {"a": "b"}}}
    assert reparse_pod(relabelled, old, rule=V1_37).requests == {"cpu": 3000}


def test_resize_digest_follows_what_v1_37_and_the_pod_level_gate_read() -> None:
    allocated_only = {"containerStatuses": [cs("main", None, {"cpu": "2"})]}
    assert resize_digest(allocated_only) not in (0, -1)
    assert resize_digest(allocated_only) != resize_digest(
        {"containerStatuses": [cs("main", None, {"cpu": "3"})]}
    )
    assert resize_digest(POD_LEVEL_STATUS) not in (0, -1)
    moved = {**POD_LEVEL_STATUS, "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    assert resize_digest(moved) != resize_digest(POD_LEVEL_STATUS)
