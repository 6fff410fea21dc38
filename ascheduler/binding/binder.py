"""The bind-phase protocol around the Bind extension point, for pods the lock policy selects.

    async with node_locks.hold_all(keys, first_pod) as hold:  # asyncio lock, then annotation
        pods on the node, from the API server              # one LIST per hold
        the binds queued for this node, in batches (a hold serves MAX_BINDS_PER_HOLD at most,
        one under HAMi's key, and only while its time budget lasts):
            from the second batch on: read the node back, stop if the lock is not ours
            re-validate each fit against that list plus the binds before it in this hold
            then, for the ones that fit, concurrently (each within the hold's cutoff):
                Bind plugins (POST pods/binding, carrying <prefix>/bind-phase and bind-time)
    (released on every path: success, error, cancellation)

**The bind phase rides on the Binding.** The API server copies a Binding's
`metadata.annotations` onto the pod in the same write that binds it, so the pod never needs a
write of its own, and the scheduler needs no `patch pods`: its role is no wider than
kube-scheduler's. The phase the Binding carries is `success`, or under HAMi's prefix
(`hami.io`) `allocating`: the state HAMi's own scheduler leaves a bound pod in, for HAMi's
device plugin to find on its node and mark `success` or `failed` after its allocation. A bind
that fails binds nothing, so nothing lands on the pod: the failure is reported as any other
(a FailedScheduling event and the pod's PodScheduled=False condition, through `pods/status`),
and the pod is scheduled again. A Binding that landed unanswered carries its phase all the
same.

Binds to one node are coalesced: the first binding cycle to reach a node leads, takes the lock
and serves, in order, every bind that queues for the node while it holds it; the others wait
for their result. Two Node writes (lock, unlock) and one read are then shared by the batch.

`keys` name the node's lock: the node itself, or with lease groups its group's Lease (and
while another instance groups the nodes differently, that grouping's too: see `nodelock`).

The re-validation is what makes several instances safe: each instance's cache may be stale
about the others' binds, but under the node's lock the API server's list of pods on the node
is complete, so two instances never overcommit a node.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import structlog

from ascheduler import metrics
from ascheduler.cache import Cache
from ascheduler.framework import Code, CycleState, Framework, Status
from ascheduler.framework.interface import BINDING_ANNOTATIONS
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.informer import Informer
from ascheduler.locks import (
    RELEASE_ALL_SECONDS,
    DeviceLocks,
    Holds,
    Known,
    LockContended,
    LockSettings,
    Members,
    NodeLocks,
    lock_wait_message,
)
from ascheduler.locks.keys import is_group_key, lock_keys, lock_lease_name
from ascheduler.locks.memberlease import Member, parse_member
from ascheduler.model import Node, PodInfo, parse_node, parse_pod

log = structlog.get_logger(__name__)

#: Which binds take their node's lock: pods requesting a device resource, all, or none.
LockPolicy = Literal["devices", "all", "none"]
POLICIES: Final[tuple[LockPolicy, ...]] = ("devices", "all", "none")
#: How a placement is bound: a Binding written by the scheduler, or a BindRequest that
#: `ascheduler binder` turns into one.
BindingMode = Literal["direct", "bindrequest"]
MODES: Final[tuple[BindingMode, ...]] = ("direct", "bindrequest")
DEFAULT_DEVICE_RESOURCES: Final = ("nvidia.com/gpu",)
#: The annotation prefix of HAMi's bind-phase protocol.
HAMI_PREFIX: Final = "hami.io"
NODE_LOCK: Final = "NodeLock"
#: On a node's lock Lease: the node it stands for.
LEASE_NODE: Final = "ascheduler.io/node"
#: On a group's lock Lease (lease groups): its lock key, `<index>/<groups>`.
LEASE_GROUP: Final = "ascheduler.io/node-group"
#: The name of the informer over node-lock Leases.
LEASE_INFORMER: Final = "node-lock-leases"
#: The label selector of this project's Leases.
MANAGED_BY: Final = "app.kubernetes.io/managed-by=ascheduler"
#: A hold serves at most this many binds, so one busy node cannot keep its lock for long.
MAX_BINDS_PER_HOLD: Final = 32
#: How long a bind waits for the other instances to acknowledge this one.
MEMBER_WAIT: Final = 10.0
#: How long the cache may take to show the pods of a fresh list of the bound ones.
CATCH_UP_SECONDS: Final = 30.0
#: How many of our own binds under a lock are remembered until the cache sees them bound.
VOUCHED_KEPT: Final = 8192


@dataclass(frozen=True)
class BindSettings:
    policy: LockPolicy = "devices"
    device_resources: frozenset[str] = frozenset(DEFAULT_DEVICE_RESOURCES)
    annotation_prefix: str = "ascheduler.io"
    lock: LockSettings = field(default_factory=LockSettings)
    mode: BindingMode = "direct"

    @property
    def bound_phase(self) -> str:
        """The bind phase a Binding carries onto its pod: `allocating` under HAMi's prefix
        (HAMi's device plugin finishes the protocol), `success` otherwise."""
        return "allocating" if self.annotation_prefix == HAMI_PREFIX else "success"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"binding mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.policy not in POLICIES:
            raise ValueError(
                f"node lock policy must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )


@dataclass(slots=True)
class _Usage:
    """What the pods counted on a node request of it, summed as they are counted: each pod
    once (by uid), finished ones not at all."""

    counted: dict[str, PodInfo] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=lambda: {"pods": 0})

    def add(self, pod: PodInfo) -> None:
        if pod.terminal or pod.uid in self.counted:
            return
        self.counted[pod.uid] = pod
        totals = self.totals
        totals["pods"] += 1
        for name, value in pod.requests.items():
            totals[name] = totals.get(name, 0) + value

    def shortfall(self, pod: PodInfo, allocatable: Mapping[str, int]) -> list[str]:
        """Resources `pod` does not fit in beside the pods counted (itself, if counted, not
        among them)."""
        own = self.counted.get(pod.uid)
        mine = own.requests if own is not None else {}
        totals = self.totals
        short = []
        if totals["pods"] - (own is not None) + 1 > allocatable.get("pods", 0):
            short.append("pods")
        for name, value in sorted(pod.requests.items()):
            if value > allocatable.get(name, 0) - totals.get(name, 0) + mine.get(name, 0):
                short.append(name)
        return short


@dataclass(slots=True)
class _NodeView:
    """The pods a hold re-validates against, each counted once as it comes (`usage`), so a
    re-validation costs the pod's own resources, not the node's pods; `fresh`: listed from
    the API server in this hold."""

    usage: _Usage
    fresh: bool
    #: The uids of the pods this hold bound (or tried to: a Binding may land unanswered).
    added: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, pods: Iterable[PodInfo], *, fresh: bool) -> _NodeView:
        view = cls(_Usage(), fresh)
        for pod in pods:
            view.add(pod)
        return view

    def read_again(self, pods: Iterable[PodInfo]) -> None:
        """Count `pods` instead (the API server's list, plus this hold's fitting binds)."""
        self.usage, self.fresh = _Usage(), True
        for pod in pods:
            self.add(pod)

    def add(self, pod: PodInfo) -> None:
        """Count `pod` too, unless it is counted already (the cache's view holds the pods
        of this hold's binds as assumed)."""
        self.usage.add(pod)


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


class _LeaseEvents:
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


@dataclass
class _Bind:
    fw: Framework
    state: CycleState
    pod: PodInfo
    result: asyncio.Future[Status]

    def finish(self, status: Status) -> None:
        if not self.result.done():  # its binding cycle may have been cancelled meanwhile
            self.result.set_result(status)


def _take(queue: deque[_Bind], most: int) -> list[_Bind]:
    """Up to `most` binds from the front of `queue`, skipping the ones whose binding cycle
    was cancelled while they waited."""
    taken: list[_Bind] = []
    while queue and len(taken) < most:
        bind = queue.popleft()
        if not bind.result.done():
            taken.append(bind)
    return taken


class LockedBinder:
    def __init__(
        self,
        kube: KubeClient,
        settings: BindSettings,
        *,
        lease_namespace: str = "kube-system",
        cache: Cache | None = None,
        register: bool = False,
    ) -> None:
        """`register`: with locks on Leases, take part in deciding who shares the nodes (see
        `members`): every instance that binds does; a scheduler whose binds go out as
        BindRequests does not. Binds skip the node lock while this instance is alone, when
        the settings allow it and there is a `cache` to catch up with the others' binds."""
        self.kube = kube
        #: The scheduler's cache: with it, a hold whose lock object's record of bound pods
        #: the cache has all seen re-validates against the cache instead of a LIST.
        self.cache = cache
        self.settings = settings
        self.on_lease = settings.lock.lock_object == "lease"
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases"
        #: node -> its uid, as the cache last had it (the owner of the node's lock Lease)
        self._node_uids: dict[str, str] = {}
        #: node -> what our last hold there counted (its list, plus its binds), the members'
        #: epoch then, and the lineage of its locks (see `Hold.lineage`)
        self._records: dict[str, tuple[int, tuple[tuple[str, int], ...], _NodeView]] = {}
        #: pod uid -> the node our Binding of it under the locks put it on (the API server
        #: said so), oldest first: the cache counts such a pod there while it is assumed, so
        #: it need not have seen it bound yet to stand in for the API server's list.
        self._vouched: dict[str, str] = {}
        self.locks = (
            NodeLocks(
                kube,
                settings.lock,
                path=lambda key: f"{self._leases}/{lock_lease_name(key)}",
                create=self._create_lease,
                replace=True,
            )
            if self.on_lease
            else NodeLocks(kube, settings.lock)
        )
        self.members = (
            Members(
                kube,
                lease_namespace,
                settings.lock.identity,
                duration=settings.lock.member_duration,
                may_be_alone=settings.lock.when_alone == "skip" and cache is not None,
                catch_up=self._catch_up if cache is not None else None,
                lease_groups=settings.lock.lease_groups,
            )
            if self.on_lease and register
            else None
        )
        self._lease_events = _LeaseEvents(self.locks, self.members)
        #: The locks DynamicResources writes new allocations under (network-attached pools'
        #: Leases live in `lease_namespace`).
        self.devices = DeviceLocks(kube, self.locks, lease_namespace, settings.lock)
        self.devices.known_for = self._known_for
        self.devices.lock_keys = self.lock_keys
        self.phase_key = f"{settings.annotation_prefix}/bind-phase"
        self.time_key = f"{settings.annotation_prefix}/bind-time"
        #: node -> binds waiting for the binding cycle that leads the node's current hold
        self._queues: dict[str, deque[_Bind]] = {}

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

    async def release_all(self, timeout: float = RELEASE_ALL_SECONDS) -> dict[str, str]:
        """Stopping: every node lock and device pool lock of this instance let go at once,
        within `timeout` seconds; returns those left (lock key or pool Lease -> value)."""
        nodes, pools = await asyncio.gather(
            self.locks.release_all(timeout), self.devices.release_all(timeout)
        )
        return {**nodes, **pools}

    def lock_keys(self, node: str) -> list[str]:
        """The locks a bind to `node` takes: the node's own (on Nodes, or a Lease per node),
        or its group's, under this instance's grouping and every other member's."""
        if not self.on_lease:
            return [node]
        groupings = {self.settings.lock.lease_groups}
        if self.members is not None:
            groupings |= self.members.groupings()
        return lock_keys(node, groupings)

    def observe_node(self, name: str, annotations: Mapping[str, str]) -> None:
        """A node as the informer shows it: its lock, when the lock lives on the Node."""
        if not self.on_lease:
            self.locks.observe(name, annotations, watched=True)

    def forget_node(self, name: str) -> None:
        self._node_uids.pop(name, None)
        self._records.pop(name, None)
        self.locks.forget_node(name)

    def needs_lock(self, pod: PodInfo) -> bool:
        policy = self.settings.policy
        if policy == "all":
            return True
        if policy == "none":
            return False
        return any(pod.requests.get(r, 0) > 0 for r in self.settings.device_resources)

    async def bind(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not self.needs_lock(pod):
            return await fw.bind(state, pod, node)
        members = self.members
        if members is not None:
            if not members.ready() and not await members.wait_ready(MEMBER_WAIT):
                return Status.error(
                    "node lock: the other scheduler instances have not acknowledged this one "
                    f"yet ({', '.join(members.peers()) or 'own member Lease not renewed'})",
                    NODE_LOCK,
                )
            if (
                members.alone
                and not any(self.locks.foreign(key) for key in self.lock_keys(node))
                and node not in self._queues
            ):
                return await self._bind_alone(members, fw, state, pod, node)
        mine = _Bind(fw, state, pod, asyncio.get_running_loop().create_future())
        queue = self._queues.get(node)
        if queue is not None:  # a hold on this node is being served: join it
            queue.append(mine)
            return await mine.result
        self._queues[node] = queue = deque([mine])
        try:
            await self._lead(node, queue)
        finally:
            # Whatever the leader did not serve (it failed, or was cancelled) fails with it;
            # the node is free for the next leader.
            del self._queues[node]
            while queue:
                queue.popleft().finish(Status.error("bind abandoned with its node lock", NODE_LOCK))
        return mine.result.result()

    async def _bind_alone(
        self, members: Members, fw: Framework, state: CycleState, pod: PodInfo, node: str
    ) -> Status:
        """A bind without the node's lock (no other instance shares the nodes), cut off in
        time for the others' count of our member Lease (see `members`)."""
        self._records.pop(node, None)  # no record of ours counts this bind
        state.write(BINDING_ANNOTATIONS, self._phase_annotations(str(int(time.time()))))
        metrics.NODE_LOCK_BINDS_ALONE.inc()
        with members.lockless():
            try:
                async with asyncio.timeout(members.remaining()):
                    return await fw.bind(state, pod, node)
            except TimeoutError:
                return Status.error(
                    f"node lock on {node}: bind cut off (member Lease not renewed)", NODE_LOCK
                )

    async def _catch_up(self) -> bool:
        """Whether the cache came to hold every pod the API server has on a node now (the
        binds of instances gone, or of others before they acknowledged us, included)."""
        assert self.cache is not None
        listing = await self.kube.get(
            "/api/v1/pods",
            params={
                "fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
            },
        )
        missing: dict[str, str] = {}
        for raw in listing.get("items") or []:
            meta = raw.get("metadata") or {}
            missing[str(meta.get("uid", ""))] = f"{meta.get('namespace')}/{meta.get('name')}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        checked = False
        while True:
            missing = {uid: key for uid, key in missing.items() if not self.cache.has_pod(uid)}
            if not missing:
                return True
            if loop.time() > deadline:
                log.warning("node_lock_catch_up_incomplete", missing=len(missing))
                return False
            if not checked and loop.time() > deadline - CATCH_UP_SECONDS + 2.0:
                checked = True  # deleted since the list: nothing to wait for
                for uid, key in list(missing.items()):
                    namespace, _, name = key.partition("/")
                    try:
                        pod = await self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
                    except KubeError as exc:
                        if exc.not_found:
                            del missing[uid]
                            continue
                        raise
                    if (pod.get("metadata") or {}).get("uid") != uid:
                        del missing[uid]
            await asyncio.sleep(0.1)

    async def _lead(self, node: str, queue: deque[_Bind]) -> None:
        """Take the node's lock and serve the queue, one hold after another."""
        most = 1 if self.settings.lock.hami else MAX_BINDS_PER_HOLD
        while queue:
            first = queue[0]
            if first.result.done():  # its binding cycle was cancelled while it waited
                queue.popleft()
                continue
            cached = first.fw.handle.nodes.node(node)
            known = None
            if cached is not None:
                self._node_uids[node] = cached.uid
                known = Known(cached.resource_version, cached.annotations)
            keys = self.lock_keys(node)
            try:
                async with self.locks.hold_all(
                    keys,
                    first.pod,
                    known=functools.partial(self._known_for, cached=known),
                    node=node,
                ) as hold:
                    if most == 1 and first.result.done():
                        continue  # HAMi's value names this pod, cancelled meanwhile: relock
                    allocatable = await self._allocatable(node, hold, cached)
                    view = await self._view(node, hold)
                    served = 0
                    while queue and served < most:
                        if served and not await self.locks.still_all_ours(hold):
                            break  # out of time (or robbed): the next hold serves the rest
                        batch = _take(queue, most - served)
                        await self._serve(hold, batch, node, allocatable, view)
                        served += len(batch)
                    metrics.NODE_LOCK_BINDS_PER_HOLD.observe(served)
                    # For our next hold here, if nobody else takes the locks meanwhile; and
                    # for whoever holds them next, the pods bound under them, left beside.
                    self._records[node] = (self._epoch(), hold.lineage, view)
                    hold.record(view.added)
            except LockContended as exc:
                # Another instance binds there: the pods wait for it, not fail (see `waiting`).
                waiting = [b for b in queue if not b.result.done()]
                self.locks.wait_for(exc.node, exc.value, [b.pod.uid for b in waiting])
                status = Status.pending(lock_wait_message(node, exc), NODE_LOCK)
                while queue:  # they would meet the same lock
                    queue.popleft().finish(status)
            except KubeError as exc:
                failed = Status.error(f"node lock: {exc}", NODE_LOCK)
                while queue:  # they would meet the same failure
                    queue.popleft().finish(failed)

    async def _serve(
        self,
        hold: Holds,
        batch: list[_Bind],
        node: str,
        allocatable: dict[str, int],
        view: _NodeView,
    ) -> None:
        """Re-validate each bind against the node's pods plus the ones before it, then write
        the fitting ones concurrently; every bind of the batch is finished when this returns,
        or fails with the batch if it is cancelled. A failed bind stays in the view: its
        Binding may have landed all the same, and counting too much never overcommits. A view
        from the record that refuses a bind is read again from the API server first (it may
        count a pod deleted since)."""
        try:
            fitting: list[_Bind] = []
            for bind in batch:
                status = self._revalidate(bind.pod, node, allocatable, view)
                if not status.ok and not view.fresh:
                    view.read_again([*await self._pods_on(node), *(b.pod for b in fitting)])
                    metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "refresh").inc()
                    status = self._revalidate(bind.pod, node, allocatable, view)
                if status.ok:
                    view.add(bind.pod)
                    view.added.append(bind.pod.uid)
                    fitting.append(bind)
                else:
                    bind.finish(status)
            outcomes: list[Status | BaseException]
            if len(fitting) == 1:  # the common case: no task to gather
                try:
                    outcomes = [await self._bind_one(hold, fitting[0], node)]
                except Exception as exc:
                    outcomes = [exc]
            else:
                outcomes = await asyncio.gather(
                    *(self._bind_one(hold, bind, node) for bind in fitting),
                    return_exceptions=True,
                )
            for bind, outcome in zip(fitting, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, Exception):
                        raise outcome  # cancellation and the like
                    log.error("bind_failed", pod=bind.pod.key, error=repr(outcome))
                    outcome = Status.error(f"bind: {outcome!r}", NODE_LOCK)
                bind.finish(outcome)
        finally:
            for bind in batch:  # only those not finished above: cancelled meanwhile
                bind.finish(Status.error("bind interrupted", NODE_LOCK))

    async def _bind_one(self, hold: Holds, bind: _Bind, node: str) -> Status:
        """The Bind plugins for one pod already re-validated, started only within the hold's
        time budget and cut off at its cutoff (see `nodelock`). The Binding carries the bind
        phase and time (see the module's docstring)."""
        pod = bind.pod
        if not hold.writable():
            return Status.error(f"node lock on {node}: the hold ran out of time", NODE_LOCK)
        bind.state.write(BINDING_ANNOTATIONS, self._phase_annotations(str(int(time.time()))))
        try:
            async with asyncio.timeout(hold.remaining()):
                status = await bind.fw.bind(bind.state, pod, node)
        except TimeoutError:
            status = Status.error(f"node lock on {node}: bind cut off with the hold", NODE_LOCK)
        if status.ok and self.cache is not None:
            self._vouch(pod, node)
        return status

    def _phase_annotations(self, stamp: str) -> dict[str, str]:
        """What a Binding carries onto its pod: the bind phase, and the bind time (unix s)."""
        return {self.phase_key: self.settings.bound_phase, self.time_key: stamp}

    async def _allocatable(self, node: str, hold: Holds, cached: Node | None) -> dict[str, int]:
        """The node's allocatable: off the Node our lock write returned, else the cache's
        (a Lease lock), else read."""
        if not self.on_lease:
            return dict(parse_node(hold.node_obj).allocatable)
        if cached is not None:
            return dict(cached.allocatable)
        return dict(parse_node(await self.kube.get(f"/api/v1/nodes/{node}")).allocatable)

    async def _view(self, node: str, hold: Holds) -> _NodeView:
        """The node's pods for re-validation: our record of them while the locks' lineage is
        the one it was recorded under (no hold of ours has found the locks taken by another
        holder since, so nobody else bound here: the record is what that hold saw, plus its
        own binds; a hold that went on all along, shared by the nodes of a group, keeps its
        lineage whatever it found when it was taken); else the cache, once it has seen the
        pods recorded beside the locks, or holds them where our own Bindings put them; else
        the API server's list."""
        record = self._records.pop(node, None)
        if record is not None and record[0] == self._epoch() and record[1] == hold.lineage:
            metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "record").inc()
            view = record[2]  # ours alone: a record is taken out to be used
            view.fresh = False
            view.added = []
            return view
        trusted = self.members is None or self.members.trusted
        if self.cache is not None and hold.bound_before is not None and trusted:
            cache = self.cache
            counted = cache.pods_on(node)
            # A group's record names pods bound on any of its nodes: the cache must have
            # seen each one bound, wherever, or count it where our own Binding put it.
            if all(cache.bound(uid) or self._counted(uid) for uid in hold.bound_before):
                # Every pod bound under the locks lately is in the cache as bound, or is
                # one of ours it counts where we bound it: it has caught up with the other
                # holders. Our own assumed pods count too (some are bound already); the
                # ones still on their way here count once, as each is re-validated without
                # itself.
                metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "cache").inc()
                return _NodeView.of(counted, fresh=False)
        metrics.labelled(metrics.NODE_LOCK_REVALIDATIONS, "list").inc()
        return _NodeView.of(await self._pods_on(node), fresh=True)

    def _epoch(self) -> int:
        return self.members.epoch if self.members is not None else 0

    def _vouch(self, pod: PodInfo, node: str) -> None:
        """Remember that our Binding put `pod` on `node` under the locks."""
        vouched = self._vouched
        vouched.pop(pod.uid, None)
        vouched[pod.uid] = node
        if len(vouched) > VOUCHED_KEPT:
            del vouched[next(iter(vouched))]

    def _counted(self, uid: str) -> bool:
        """Whether the cache counts pod `uid` on the node our Binding put it on: assumed
        there still, its bind confirmed by the API server's answer."""
        assert self.cache is not None
        node = self._vouched.get(uid)
        return node is not None and self.cache.pod_node(uid) == node

    async def _pods_on(self, node: str) -> list[PodInfo]:
        """The API server's pods on `node`: the one read a hold makes."""
        listing = await self.kube.get(
            "/api/v1/pods",
            params={
                "fieldSelector": f"spec.nodeName={node},status.phase!=Succeeded,"
                "status.phase!=Failed"
            },
        )
        return [parse_pod(raw) for raw in listing.get("items") or []]

    def _revalidate(
        self, pod: PodInfo, node: str, allocatable: dict[str, int], view: _NodeView
    ) -> Status:
        missing = view.usage.shortfall(pod, allocatable)
        if not missing:
            return Status()
        reasons = ", ".join(
            "Too many pods" if m == "pods" else f"Insufficient {m}" for m in missing
        )
        log.info("bind_revalidation_failed", pod=pod.key, node=node, reasons=reasons)
        return Status(Code.UNSCHEDULABLE, (f"node {node} no longer fits: {reasons}",), NODE_LOCK)
