"""The binder's decision for one BindRequest, from the request, its pod and its node."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.binding.reconcile import Act, after_failed_bind, backoff, decide
from ascheduler.model import PodInfo
from ascheduler.model.bindrequest import parse_bind_request
from tests.kit import parsed, pod


def request(phase: str | None = None, **status: Any) -> Any:
    body: dict[str, Any] = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podName": "w", "podUID": "u-1", "selectedNode": "n1", "backoffLimit": 3},
    }
    if phase is not None:
        body["status"] = {"phase": phase, **status}
    return parse_bind_request(body)


def the_pod(uid: str = "u-1", node: str | None = None) -> PodInfo:
    return parsed(pod("w", namespace="ns", uid=uid, node_name=node))


@pytest.mark.parametrize(
    ("pod_", "exists", "act", "reason"),
    [
        (the_pod(), True, Act.BIND, ""),
        (None, True, Act.FAIL, "pod ns/w (uid u-1) no longer exists"),
        (the_pod(uid="u-2"), True, Act.FAIL, "pod ns/w (uid u-1) no longer exists"),
        (the_pod(node="n1"), True, Act.SUCCEED, "pod ns/w is bound to n1"),
        (the_pod(node="n1"), False, Act.SUCCEED, "pod ns/w is bound to n1"),
        (the_pod(node="n2"), True, Act.FAIL, "pod ns/w is bound to n2, not n1"),
        (the_pod(), False, Act.FAIL, "node n1 does not exist"),
    ],
)
def test_a_pending_request(pod_: PodInfo | None, exists: bool, act: Act, reason: str) -> None:
    got = decide(request(), pod_, node_exists=exists)
    assert (got.act, got.reason) == (act, reason)


def test_finished_and_unreadable_requests() -> None:
    assert decide(request("Succeeded"), None, node_exists=True).act is Act.DELETE
    failed = request("Failed", reason="x")
    assert decide(failed, None, node_exists=True, failed_age=5).act is Act.LEAVE
    assert decide(failed, None, node_exists=True, failed_age=600).act is Act.DELETE
    bad = parse_bind_request({"metadata": {"name": "b"}, "spec": {"podName": "b"}})
    got = decide(bad, the_pod(), node_exists=True)
    assert (got.act, got.reason) == (
        Act.LEAVE,
        "spec.podUID: required; spec.selectedNode: required",
    )


def test_failed_attempts_back_off_then_give_up_at_the_limit() -> None:
    assert [backoff(n) for n in (0, 1, 2, 3, 7, 8, 30)] == [0, 1, 2, 4, 60, 60, 60]
    first = after_failed_bind(request(), "binding failed: timeout")
    assert first == {"phase": "Pending", "failedAttempts": 1, "reason": "binding failed: timeout"}
    last = after_failed_bind(request("Pending", failedAttempts=2), "binding failed: timeout")
    assert last == {
        "phase": "Failed",
        "failedAttempts": 3,
        "reason": "binding failed: timeout (attempt 3 of 3; giving up)",
    }
