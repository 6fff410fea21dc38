"""BindRequests read from what the API server returns and written for a placed pod."""

from __future__ import annotations

from typing import Any

from ascheduler.model.bindrequest import (
    API_VERSION,
    DEFAULT_BACKOFF_LIMIT,
    FAILED,
    PENDING,
    claim_names,
    collection_path,
    parse_bind_request,
    request_body,
)
from tests.kit import parsed, pod


def test_a_written_request_reads_back_as_pending_for_its_pod() -> None:
    p = parsed(pod("web-0", namespace="shop", uid="u-1"))
    body = request_body(
        p, "n7", profile="ascheduler", claims=["gpu-claim"], devices={"nvidia.com/gpu": 2}
    )
    assert body["apiVersion"] == API_VERSION
    assert body["metadata"]["name"] == "web-0"
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Pod", "u-1")
    assert body["spec"]["resourceClaims"] == [{"name": "gpu-claim"}]
    body["metadata"] |= {"namespace": "shop", "uid": "r-1", "resourceVersion": "9"}
    req = parse_bind_request(body)
    assert (req.key, req.pod_key, req.pod_uid, req.node) == (
        "shop/web-0",
        "shop/web-0",
        "u-1",
        "n7",
    )
    assert (req.phase, req.pending, req.failed_attempts) == (PENDING, True, 0)
    assert req.backoff_limit == DEFAULT_BACKOFF_LIMIT
    assert req.errors == ()
    assert collection_path("shop") == "/apis/ascheduler.io/v1alpha1/namespaces/shop/bindrequests"
    assert collection_path() == "/apis/ascheduler.io/v1alpha1/bindrequests"


def test_status_and_bad_fields_are_read_without_raising() -> None:
    failed = parse_bind_request(
        {
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"podName": "a", "podUID": "u", "selectedNode": "n", "backoffLimit": 1},
            "status": {"phase": "Failed", "failedAttempts": 1, "reason": "node n is gone"},
        }
    )
    assert (failed.phase, failed.failed, failed.pending) == (FAILED, True, False)
    assert failed.reason == "node n is gone"
    bad: dict[str, Any] = {
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"podName": 3, "selectedNode": "", "backoffLimit": -1},
        "status": {"phase": "Sideways", "failedAttempts": "two"},
    }
    req = parse_bind_request(bad)
    assert req.errors == (
        "status.phase: unknown phase 'Sideways'",
        "spec.podName: expected a string, got int",
        "spec.podUID: required",
        "spec.selectedNode: required",
        "spec.backoffLimit: expected a non-negative integer, got -1",
        "status.failedAttempts: expected a non-negative integer, got 'two'",
    )
    assert not req.pending  # never acted on
    for junk in (None, [], "x", {"spec": []}):
        assert parse_bind_request(junk).errors


def test_a_request_names_the_claims_the_pod_uses() -> None:
    body = pod("p", uid="u")
    body["spec"]["resourceClaims"] = [
        {"name": "direct", "resourceClaimName": "shared-gpu"},
        {"name": "made", "resourceClaimTemplateName": "tpl"},
        {"name": "not-made-yet", "resourceClaimTemplateName": "tpl"},
    ]
    body["status"] = {"resourceClaimStatuses": [{"name": "made", "resourceClaimName": "p-made-x"}]}
    assert claim_names(parsed(body)) == ["shared-gpu", "p-made-x"]
