"""DynamicResources' names, arguments and cycle state; the resolution of a pod's claims
(PreEnqueue and PreFilter both need it, as kube-scheduler's plugin does) and PreFilter's check
of their requests.

PreEnqueue holds a pod until every claim it names exists: `resourceClaimName` directly, a
`resourceClaimTemplateName` once the resourceclaim controller has created the claim and
written its name into `status.resourceClaimStatuses` (the claim must be owned by the pod).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.dra.extended import Extended
from ascheduler.dra.store import ResourceObjects
from ascheduler.framework import SUCCESS, IntArray, PluginArgsError, Seconds, Status
from ascheduler.model import PodInfo
from ascheduler.model.dra import Allocation, ResourceClaim

NAME: Final = "DynamicResources"
CANNOT_ALLOCATE: Final = "cannot allocate all claims"
NOT_AVAILABLE: Final = "resourceclaim not available on the node"
TIMED_OUT: Final = "timed out trying to allocate devices"
#: Why a pod waits before its cycle (PreEnqueue; never shown as a condition).
SELECTORS_PENDING: Final = "waiting for costly device selectors to be evaluated"
IN_USE: Final = "resourceclaim in use"
NO_NEW_CLAIMS: Final = "no new claims to deallocate"
#: The error kube-scheduler's cycle state gives for a key never written.
STATE_NOT_FOUND: Final = "not found"
STILL_NOT: Final = "still not schedulable"
DEALLOCATED: Final = "deallocation of ResourceClaim completed"
#: 1.37's PodGroupPostFilter, once the claims of a failed group's pods are released.
CLAIMS_RELEASED: Final = "deallocation and deletion of ResourceClaims completed"
CLAIM_NOT_CREATED: Final = "ResourceClaim not created yet"
API_UNSUPPORTED: Final = "none of the supported fields are set"
#: How often PreBind retries a claim write that conflicted (client-go's DefaultRetry).
WRITE_ATTEMPTS: Final = 5


DEFAULT_FILTER_TIMEOUT: Final = Seconds(10.0)


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    """kube-scheduler's `DynamicResourcesArgs`: `filterTimeout` (DRASchedulerFilterTimeout,
    on by default: 10s, 0 turns it off) bounds the search on one node. `bindingTimeout`
    bounds PreBind's wait for device binding conditions: with DRADeviceBindingConditions and
    DRAResourceClaimDeviceStatus on (from 1.36) it defaults to 10 minutes and must be at
    least a second; with either off, setting it is refused (`bindingconditions.args_problems`,
    `with_binding_timeout`), as kube-scheduler does."""

    filter_timeout: Seconds = DEFAULT_FILTER_TIMEOUT
    binding_timeout: Seconds | None = None

    def __post_init__(self) -> None:
        if self.filter_timeout < 0:
            raise PluginArgsError("filterTimeout: must be zero or positive")


class ClaimsUnavailable(Exception):
    """A pod's claims cannot be resolved (the message is kube-scheduler's)."""


def go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pod_claims(pod: PodInfo, objects: ResourceObjects) -> list[ResourceClaim]:
    """The claims of `pod`, in `spec.resourceClaims` order, skipping those the controller
    decided need no claim; ClaimsUnavailable with kube-scheduler's message otherwise."""
    out = []
    for pc in pod.resource_claims:
        must_own = False
        if pc.claim_name is not None:
            name: str | None = pc.claim_name
        elif pc.template_name is not None:
            for claim_of, generated in pod.claim_statuses:
                if claim_of == pc.name:
                    name, must_own = generated, True
                    break
            else:
                raise ClaimsUnavailable(f'pod "{pod.namespace}/{pod.name}": {CLAIM_NOT_CREATED}')
        else:
            raise ClaimsUnavailable(
                f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim {go_quote(pc.name)}: '
                f"{API_UNSUPPORTED}"
            )
        if name is None:
            continue
        claim = objects.claim(pod.namespace, name)
        if claim is None:
            raise ClaimsUnavailable(f"resourceclaim.resource.k8s.io {go_quote(name)} not found")
        if claim.deleting:
            raise ClaimsUnavailable(f"resourceclaim {go_quote(claim.name)} is being deleted")
        if must_own and claim.owner_pod_uid != pod.uid:
            raise ClaimsUnavailable(
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
        out.append(claim)
    return out


def check_requests(objects: ResourceObjects, claim: ResourceClaim) -> Status:
    """Every request's classes exist (the claim limit is the allocator's, at Filter, as
    in kube-scheduler)."""
    for req in claim.requests:
        if req.exactly is not None:
            status = _check_class(objects, req.exactly.class_name, req.name)
        elif req.first_available:
            status = SUCCESS
            for sub in req.first_available:
                status = _check_class(objects, sub.class_name, f"{req.name}/{sub.name}")
                if not status.ok:
                    break
        else:
            return Status.unschedulable(
                f"resource claim {claim.namespace}/{claim.name}, request {req.name}: "
                "unknown request type",
                resolvable=False,
            )
        if not status.ok:
            return status
    return SUCCESS


def _check_class(objects: ResourceObjects, name: str, request: str) -> Status:
    if not name:
        return Status.error(f"request {request}: unsupported request type")
    if objects.device_class(name) is None:
        return Status.unschedulable(
            f"request {request}: device class {name} does not exist", resolvable=False
        )
    return SUCCESS


@dataclass(slots=True)
class _State:
    claims: list[ResourceClaim]
    to_allocate: list[int]
    #: Per claim: the node selector terms of its allocation (None: any node).
    available_on: list[Any]
    unavailable: set[int] = field(default_factory=set)
    #: Per node row: the firstAvailable score (None: nothing to score).
    scores: IntArray | None = None
    #: Exact allocations found by Filter's search, by node name.
    found: dict[str, list[Allocation]] = field(default_factory=dict)
    #: Set by Reserve, written by PreBind (claim index -> allocation).
    allocations: dict[int, Allocation] = field(default_factory=dict)
    #: The claims whose reservation PreBind wrote, with the allocation it wrote beside it
    #: (None: the claim was allocated already): all a failed cycle may undo.
    written: dict[int, Allocation | None] = field(default_factory=dict)
    #: The pod's extended resources backed by DRA (`extended`); None: it has none.
    extended: Extended | None = None


def claim_status(claim: ResourceClaim) -> Any:
    """What of a claim its queueing hint compares: its status as the API server has it."""
    raw = claim.raw or {}
    return raw.get("status") if raw else (claim.allocation, claim.reserved_for)
