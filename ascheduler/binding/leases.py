"""Lock Leases: the objects node locks live on (by default), as the binder makes and watches them.

A node's own lock Lease (`ascheduler-node-<node>`) is made the first time its lock is taken,
owned by the Node (when the cache knows its uid) so the garbage collector removes it with the
node; a group's (`ascheduler-nodes-<G>-<index>`) stays, there being as many as groups. Each is
annotated with the key it stands for. One informer over this project's Leases in the lease
namespace (`LEASE_INFORMER`) feeds the locks' staleness clocks and hand-overs
(`NodeLocks.observe`), keeps the Lease each lock write may replace at its version (`Known`),
and shows the member Leases to `Members`.

`lock_keys` names the locks a bind to a node takes: the node's own (on Nodes, or a Lease per
node), or its group's, under this instance's grouping and every other member's (see
`locks.keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.informer import Informer
from ascheduler.locks import Known, Members, NodeLocks
from ascheduler.locks.keys import is_group_key, lock_keys, lock_lease_name
from ascheduler.locks.memberlease import Member, parse_member

#: On a node's lock Lease: the node it stands for.
LEASE_NODE: Final = "ascheduler.io/node"
#: On a group's lock Lease (lease groups): its lock key, `<index>/<groups>`.
LEASE_GROUP: Final = "ascheduler.io/node-group"
#: The name of the informer over node-lock Leases.
LEASE_INFORMER: Final = "node-lock-leases"
#: The label selector of this project's Leases.
MANAGED_BY: Final = "app.kubernetes.io/managed-by=ascheduler"


@dataclass(frozen=True, slots=True)
class LockLease:
    """A lock Lease as the informer keeps it: the lock key it stands for (a node's name, or
    a group's key), and its annotations (the lock value among them)."""

    name: str
    node: str
    resource_version: str
    annotations: Mapping[str, str]
    #: A member Lease (an instance sharing the nodes) instead of a node's lock.
    member: Member | None = None
    #: The whole Lease (but its managedFields): a lock write may replace it at its version.
    raw: Mapping[str, Any] | None = None


def parse_lock_lease(raw: Mapping[str, Any]) -> LockLease:
    meta = raw.get("metadata") or {}
    raw_annotations = meta.get("annotations")
    annotations = {
        str(k): str(v)
        for k, v in (raw_annotations.items() if isinstance(raw_annotations, dict) else ())
    }
    key = annotations.get(LEASE_NODE) or annotations.get(LEASE_GROUP, "")
    return LockLease(
        str(meta.get("name", "")),
        key,
        str(meta.get("resourceVersion", "")),
        annotations,
        parse_member(raw),
        {**raw, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        if key
        else None,
    )


class LeaseEvents:
    """Lock Leases as they change: each lock value seen starts its staleness clock, as the
    node informer does for locks on Nodes, so a dead instance's lock is cleared in the
    background and taken over on time."""

    def __init__(self, locks: NodeLocks, members: Members | None) -> None:
        self.locks = locks
        self.members = members
        #: node -> its Lease's (resourceVersion, annotations) as last seen: a lock may go out
        #: on it unread (a stale copy only costs a conflict and a read)
        self.known: dict[str, Known] = {}

    def on_add(self, lease: LockLease) -> None:
        if lease.member is not None:
            if self.members is not None:
                self.members.observe(lease.member)
        elif lease.node:
            self.known[lease.node] = Known(lease.resource_version, lease.annotations, lease.raw)
            self.locks.observe(lease.node, lease.annotations, watched=True)

    def on_update(self, old: LockLease, new: LockLease) -> None:
        self.on_add(new)

    def on_delete(self, lease: LockLease) -> None:
        if lease.member is not None:
            if self.members is not None:
                self.members.observe_gone(lease.member.identity)
        elif lease.node:
            self.known.pop(lease.node, None)
            self.locks.observe(lease.node, {}, watched=True)


class LockLeases:
    """The binder's lock objects: its lock Leases made and watched, and the keys it locks."""

    kube: KubeClient
    locks: NodeLocks
    members: Members | None
    on_lease: bool
    lease_groups: int
    _leases: str
    _lease_events: LeaseEvents
    #: node -> its uid, as the cache last had it (the owner of the node's lock Lease)
    _node_uids: dict[str, str]

    async def _create_lease(self, key: str) -> None:
        """A lock Lease, made the first time its lock is taken. A node's own is owned by the
        node (when the cache knows its uid) so the garbage collector removes it with the
        node; a group's stays (there are as many as groups)."""
        group = is_group_key(key)
        meta: dict[str, Any] = {
            "name": lock_lease_name(key),
            "labels": {"app.kubernetes.io/managed-by": "ascheduler"},
            "annotations": {LEASE_GROUP if group else LEASE_NODE: key},
        }
        node = key
        uid = None if group else self._node_uids.get(node)
        if uid:
            meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
            ]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta}
        try:
            await self.kube.post(self._leases, {**body, "spec": {}})
        except KubeError as exc:
            if not exc.conflict:  # made by another instance meanwhile
                raise

    def lease_informer(self, kube: KubeClient) -> Informer[LockLease] | None:
        """With locks on Leases, an informer over them (this project's Leases in the lease
        namespace) feeding the locks' staleness clocks; None with locks on Nodes."""
        if not self.on_lease:
            return None
        return Informer(
            kube,
            self._leases,
            parse=parse_lock_lease,
            key=lambda lease: lease.name,
            version=lambda lease: lease.resource_version,
            handler=self._lease_events,
            label_selector=MANAGED_BY,
            name=LEASE_INFORMER,
        )

    def _known_for(self, key: str, cached: Known | None) -> Known | None:
        """The lock object as last seen: the cache's Node (`cached`), or with locks on
        Leases, the Lease of `key` as the informer has it."""
        return self._lease_events.known.get(key) if self.on_lease else cached

    def lock_keys(self, node: str) -> list[str]:
        """The locks a bind to `node` takes: the node's own (on Nodes, or a Lease per node),
        or its group's, under this instance's grouping and every other member's."""
        if not self.on_lease:
            return [node]
        groupings = {self.lease_groups}
        if self.members is not None:
            groupings |= self.members.groupings()
        return lock_keys(node, groupings)
