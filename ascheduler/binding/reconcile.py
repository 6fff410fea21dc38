"""What the binder does with one BindRequest, decided from what it knows: pure logic, no I/O.

    request unreadable (errors)          -> leave it (reported once)
    Succeeded                            -> delete it (finished; marked so by hand or an
                                            earlier binder: bound requests are not marked)
    Failed                               -> leave it for the scheduler; delete it once it is
                                            older than the retention (no scheduler took it)
    Pending, and
      the pod is gone, or has another UID  -> Failed: "pod ... no longer exists"
      the pod is bound to the selected node -> finished (an earlier bind landed): collected
      the pod is bound to another node      -> Failed: "pod ... is bound to X"
      the selected node does not exist     -> Failed: "node ... does not exist"
      otherwise                            -> bind, once its backoff has passed

A failed bind counts an attempt: below `backoffLimit` attempts the request stays Pending and is
tried again after 1, 2, 4 .. 60 seconds; at the limit it is Failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from ascheduler.model import PodInfo
from ascheduler.model.bindrequest import FAILED, PENDING, SUCCEEDED, BindRequest

#: The longest wait between two attempts of one request.
MAX_BACKOFF: Final = 60.0


class Act(Enum):
    LEAVE = "leave"
    DELETE = "delete"
    SUCCEED = "succeed"
    FAIL = "fail"
    BIND = "bind"


@dataclass(frozen=True, slots=True)
class Decision:
    act: Act
    reason: str = ""


def backoff(failed_attempts: int) -> float:
    """Seconds before the next attempt of a request that failed `failed_attempts` times."""
    if failed_attempts <= 0:
        return 0.0
    return min(MAX_BACKOFF, 2.0 ** (failed_attempts - 1))


def decide(
    req: BindRequest,
    pod: PodInfo | None,
    *,
    node_exists: bool,
    failed_age: float = 0.0,
    retention: float = 600.0,
) -> Decision:
    """`pod` is the pod named by the request as the API server has it (None: not found);
    `failed_age` how long a Failed request has been seen so."""
    if req.errors:
        return Decision(Act.LEAVE, "; ".join(req.errors))
    if req.phase == SUCCEEDED:
        return Decision(Act.DELETE, "bound")
    if req.phase == FAILED:
        if failed_age >= retention:
            return Decision(Act.DELETE, "failed and not taken by a scheduler")
        return Decision(Act.LEAVE)
    if pod is None or pod.uid != req.pod_uid:
        return Decision(Act.FAIL, f"pod {req.pod_key} (uid {req.pod_uid}) no longer exists")
    if pod.node_name == req.node:
        return Decision(Act.SUCCEED, f"pod {req.pod_key} is bound to {req.node}")
    if pod.node_name:
        return Decision(Act.FAIL, f"pod {req.pod_key} is bound to {pod.node_name}, not {req.node}")
    if not node_exists:
        return Decision(Act.FAIL, f"node {req.node} does not exist")
    return Decision(Act.BIND)


def after_failed_bind(req: BindRequest, reason: str) -> dict[str, Any]:
    """The status a failed attempt leaves: Pending with one more attempt counted, or Failed
    when that was the last one `backoffLimit` allows."""
    attempts = req.failed_attempts + 1
    phase = FAILED if attempts >= max(req.backoff_limit, 1) else PENDING
    if phase == FAILED:
        reason = f"{reason} (attempt {attempts} of {max(req.backoff_limit, 1)}; giving up)"
    return {"phase": phase, "failedAttempts": attempts, "reason": reason}
