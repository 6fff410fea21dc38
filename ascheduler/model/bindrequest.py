"""BindRequests (`ascheduler.io/v1alpha1`): placements written down before they are bound.

In `--binding bindrequest` mode the Bind extension point writes one BindRequest per placed pod
(named after the pod, in its namespace, owned by it) and the binding cycle ends there;
`ascheduler binder` turns requests into Bindings. A request is

    Pending   --a bind fails, attempts < backoffLimit--> Pending (failedAttempts + 1, retried)
    Pending   --attempts reach backoffLimit, the pod is gone or bound elsewhere, the node
                is gone--> Failed
    Pending   --its pod is bound to the selected node--> finished: deleted by the binder a
                little later (no status written; the pod says it is bound)

A request with no status yet is Pending; `Succeeded` is read (a request so marked is
finished) but not written. The scheduler counts a pod with a Pending request as placed on its
node (also after a restart: the informer lists the requests); a Failed one it deletes, and
schedules the pod again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.model.pod import PodInfo

GROUP: Final = "ascheduler.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "BindRequest"
PLURAL: Final = "bindrequests"

PENDING: Final = "Pending"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
PHASES: Final = frozenset({PENDING, SUCCEEDED, FAILED})

#: Failed attempts before a request fails for good, when the scheduler is not told otherwise.
DEFAULT_BACKOFF_LIMIT: Final = 3


def collection_path(namespace: str | None = None) -> str:
    """The API path of the requests of `namespace` (None: of every namespace)."""
    base = f"/apis/{GROUP}/{VERSION}"
    return f"{base}/namespaces/{namespace}/{PLURAL}" if namespace else f"{base}/{PLURAL}"


def object_path(namespace: str, name: str) -> str:
    return f"{collection_path(namespace)}/{name}"


@dataclass(frozen=True, slots=True)
class BindRequest:
    namespace: str
    name: str
    uid: str
    resource_version: str
    pod_name: str
    pod_uid: str
    node: str
    scheduler_name: str
    backoff_limit: int
    phase: str
    failed_attempts: int
    reason: str
    #: What could not be read; a request with errors is never acted on, only reported.
    errors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    @property
    def pending(self) -> bool:
        return self.phase == PENDING and not self.errors

    @property
    def failed(self) -> bool:
        return self.phase == FAILED


def _text(value: Any, where: str, errors: list[str], *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            errors.append(f"{where}: required")
        return ""
    if not isinstance(value, str):
        errors.append(f"{where}: expected a string, got {type(value).__name__}")
        return ""
    return value


def _count(value: Any, where: str, errors: list[str], default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        errors.append(f"{where}: expected a non-negative integer, got {value!r}")
        return default
    return value


def parse_bind_request(obj: Any) -> BindRequest:
    """A BindRequest as the API server returns it. Whatever cannot be read is kept in `errors`
    (the request is then left alone), never raised."""
    errors: list[str] = []
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    status = obj.get("status") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    if not isinstance(spec, Mapping):
        errors.append("spec: expected an object")
        spec = {}
    status = status if isinstance(status, Mapping) else {}
    phase = _text(status.get("phase"), "status.phase", errors) or PENDING
    if phase not in PHASES:
        errors.append(f"status.phase: unknown phase {phase!r}")
    return BindRequest(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        pod_name=_text(spec.get("podName"), "spec.podName", errors, required=True),
        pod_uid=_text(spec.get("podUID"), "spec.podUID", errors, required=True),
        node=_text(spec.get("selectedNode"), "spec.selectedNode", errors, required=True),
        scheduler_name=_text(spec.get("schedulerName"), "spec.schedulerName", errors),
        backoff_limit=_count(
            spec.get("backoffLimit"), "spec.backoffLimit", errors, DEFAULT_BACKOFF_LIMIT
        ),
        phase=phase,
        failed_attempts=_count(status.get("failedAttempts"), "status.failedAttempts", errors, 0),
        reason=str(status.get("reason") or ""),
        errors=tuple(errors),
    )


def claim_names(pod: PodInfo) -> list[str]:
    """The ResourceClaims `pod` uses: named in its spec, or made from a template for it (as
    its status names them)."""
    made = dict(pod.claim_statuses)
    names = [c.claim_name or made.get(c.name) for c in pod.resource_claims]
    return [n for n in names if n]


def request_body(
    pod: PodInfo,
    node: str,
    *,
    profile: str,
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
    claims: Sequence[str] = (),
    devices: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The request for `pod` on `node`: named after the pod and owned by it (deleted with it);
    `claims` names the pod's ResourceClaims allocated for this placement, `devices` the
    extended resources it takes there."""
    spec: dict[str, Any] = {
        "podName": pod.name,
        "podUID": pod.uid,
        "selectedNode": node,
        "schedulerName": profile,
        "backoffLimit": backoff_limit,
    }
    if claims:
        spec["resourceClaims"] = [{"name": n} for n in sorted(claims)]
    if devices:
        spec["devices"] = dict(sorted(devices.items()))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}
            ],
        },
        "spec": spec,
    }
