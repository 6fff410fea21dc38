"""Member Leases: how an instance that shares the nodes says so (see `members`).

A member Lease (`ascheduler-member-<digest of its identity>`, in the lease namespace, labelled
`app.kubernetes.io/component=node-lock-member`) carries in its annotations the instance's
identity, the other members it has acknowledged (its *peers*), whether it may bind alone, and
how many lease groups it locks nodes in; its `spec.renewTime` changes on every renewal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: A member Lease: this prefix and a digest of the instance's identity.
MEMBER_PREFIX: Final = "ascheduler-member-"
#: On a member Lease: the instance's identity, and the other members it has acknowledged.
MEMBER_KEY: Final = "ascheduler.io/member"
PEERS_KEY: Final = "ascheduler.io/peers"
#: On the member Lease of an instance that never binds alone: "false" (nobody waits for its
#: acknowledgement before binding).
ALONE_KEY: Final = "ascheduler.io/binds-alone"
#: On a member Lease: how many lease groups the instance locks nodes in (0: a Lease per node).
GROUPS_KEY: Final = "ascheduler.io/lease-groups"
#: The label that tells member Leases from node-lock Leases.
MEMBER_LABEL: Final = ("app.kubernetes.io/component", "node-lock-member")
MEMBER_SELECTOR: Final = "=".join(MEMBER_LABEL)


def member_lease_name(identity: str) -> str:
    return MEMBER_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class Member:
    """Another instance's member Lease as last seen."""

    name: str
    identity: str
    #: Its `spec.renewTime` as written: a new value on every renewal.
    renewed: str
    peers: frozenset[str]
    version: str = ""
    #: Whether it may bind alone (else its acknowledgement is not awaited).
    may_be_alone: bool = True
    #: How many lease groups it locks nodes in (0: a Lease per node, also when not written).
    lease_groups: int = 0


def _groups(text: str) -> int:
    """A member's lease groups as written; 0 (a Lease per node) unless a count in range."""
    if not text.isdigit() or len(text) > 7:
        return 0
    return int(text)


def parse_member(raw: Mapping[str, Any]) -> Member | None:
    """A member Lease, or None for any other Lease (or one without an identity)."""
    meta = raw.get("metadata") or {}
    name = str(meta.get("name", ""))
    annotations = meta.get("annotations")
    if not name.startswith(MEMBER_PREFIX) or not isinstance(annotations, dict):
        return None
    identity = str(annotations.get(MEMBER_KEY, ""))
    if not identity:
        return None
    spec = raw.get("spec") or {}
    peers = str(annotations.get(PEERS_KEY, ""))
    return Member(
        name,
        identity,
        str(spec.get("renewTime", "") if isinstance(spec, dict) else ""),
        frozenset(p for p in peers.split(",") if p),
        str(meta.get("resourceVersion", "")),
        annotations.get(ALONE_KEY) != "false",
        _groups(str(annotations.get(GROUPS_KEY, ""))),
    )


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def member_lease_body(
    name: str,
    identity: str,
    peers: frozenset[str],
    *,
    may_be_alone: bool,
    lease_groups: int,
    duration: float,
) -> dict[str, Any]:
    """The member Lease `name` of `identity`, acknowledging `peers`, renewed now."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {
            "app.kubernetes.io/managed-by": "ascheduler",
            MEMBER_LABEL[0]: MEMBER_LABEL[1],
        },
        "annotations": {
            MEMBER_KEY: identity,
            PEERS_KEY: ",".join(sorted(peers)),
            ALONE_KEY: "true" if may_be_alone else "false",
            GROUPS_KEY: str(lease_groups),
        },
    }
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": max(1, round(duration)),
            "renewTime": _micro_time(),
        },
    }
