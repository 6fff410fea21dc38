"""Which claim writes a binding cycle may reuse, and which it must undo, when several
instances schedule the same pods.

kube-scheduler assumes one scheduler per pod: a claim already reserved for the pod at PreBind
was reserved by an earlier attempt of its own, for the node that attempt chose, and Filter has
kept the pod to that node since. Several ascheduler instances on one schedulerName (allowed
without leader election) can run binding cycles for one pod at once, each choosing its own
node. The claim's allocation is what decides: a pod may only be bound to a node the
allocation's `nodeSelector` admits, whoever wrote it.

* PreBind reuses a claim reserved for the pod only when its allocation admits the node being
  bound (`reuse`); otherwise the cycle fails and the pod is tried again, its next attempt
  seeing the allocation (Filter keeps it to the nodes it admits).
* A failed binding cycle undoes only what it wrote itself (`release`): `reservedFor` holds one
  entry per pod uid, shared by every instance's cycle for that pod, so an entry another
  instance relies on must stay. Once the pod is bound (by anyone) to a node the allocation
  admits, the entry and the allocation are the winner's as much as ours: both stay. Bound to
  a node the allocation does not admit (or deleted, or replaced), the pod will never use the
  claim: the entry goes, and the allocation too if this cycle made it and nobody else uses
  the claim. Still pending, the entry goes as kube-scheduler's Unreserve takes it, and the
  allocation stays for the next attempt (or for PostFilter to deallocate).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ascheduler.model.dra import Allocation, ResourceClaim


class Reuse(enum.Enum):
    """What PreBind does with a claim (`reuse`)."""

    #: Not reserved for the pod yet: allocate (if Reserve found devices) and reserve it.
    WRITE = "write"
    #: Reserved for the pod with an allocation that admits the node: nothing to write.
    DONE = "done"
    #: Reserved for the pod, allocated for other nodes: the pod cannot be bound here.
    ELSEWHERE = "elsewhere"


def reuse(claim: ResourceClaim, pod_uid: str, node: str, labels: Mapping[str, str]) -> Reuse:
    if not claim.reserved_for_pod(pod_uid):
        return Reuse.WRITE
    if claim.allocation is not None and claim.allocation.admits(node, labels):
        return Reuse.DONE
    return Reuse.ELSEWHERE


class Placed(enum.Enum):
    """Where the pod of a failed binding cycle stands, as the API server has it."""

    #: Not bound: a later attempt (of any instance) may still use the claim.
    PENDING = "pending"
    #: Bound to a node the claim's allocation admits: the pod uses the claim as it is.
    USING = "using"
    #: Bound to a node the allocation does not admit, deleted, or replaced by a new pod.
    ELSEWHERE = "elsewhere"


def placed(
    pod: Mapping[str, Any] | None,
    pod_uid: str,
    claim: ResourceClaim,
    labels_of: Callable[[str], Mapping[str, str]],
) -> Placed:
    """`pod` as read back (None: not found); `labels_of(node)` the labels of a node by name
    (an empty mapping when unknown: a name term still matches)."""
    if pod is None or (pod.get("metadata") or {}).get("uid") != pod_uid:
        return Placed.ELSEWHERE
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node:
        return Placed.PENDING
    if claim.allocation is not None and claim.allocation.admits(node, labels_of(node)):
        return Placed.USING
    return Placed.ELSEWHERE


@dataclass(frozen=True, slots=True)
class Release:
    """What to undo on a claim a failed binding cycle wrote."""

    unreserve: bool
    deallocate: bool


def release(claim: ResourceClaim, pod_uid: str, ours: Allocation | None, where: Placed) -> Release:
    """`claim` as read back; `ours` the allocation the cycle wrote (None: it only added the
    reservation to an allocation it found)."""
    if where is Placed.USING:
        return Release(unreserve=False, deallocate=False)
    unreserve = claim.reserved_for_pod(pod_uid)
    others = any(c.uid != pod_uid for c in claim.reserved_for)
    deallocate = (
        where is Placed.ELSEWHERE
        and ours is not None
        and claim.allocation is not None
        and claim.allocation.devices == ours.devices
        and not others
    )
    return Release(unreserve=unreserve, deallocate=deallocate)
