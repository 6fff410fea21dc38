"""Locks around device allocations, so several instances never hand out one device twice.

kube-scheduler assumes it is the only allocator: its cache's view of the claims decides which
devices are free. Two ascheduler instances sharing nodes each see the other's allocations
only once their informers bring them, so without more, both could give the same device to
two different claims. With node locks on (policy `devices` or `all`), DynamicResources writes
a claim's *new* allocation only inside `DeviceLocks.hold`, which holds

* the node lock of the pod's node (`nodelocks`), when any device comes from a node-local
  slice: such a device can only ever be allocated to a pod on that node, so every instance
  allocating it holds that node's lock;
* for each network-attached pool the allocation draws from (slices with a node selector or
  `allNodes`), the same annotation lock on a Lease named after the pool
  (`ascheduler-pool-<hash>` in the scheduler's namespace, created on first use).

Locks are taken in one order (the node first, then the pools by name), so instances never wait
on each other in a cycle; a lock held by another instance ends the attempt at once: the pod
waits (PreBind says `Pending`, not an error) and is tried again with backoff (a node's lock:
as soon as its Lease shows it let go).

Under the locks, the allocation is checked against the API server itself: every claim this
project allocates carries one label per pool it draws devices from (`pool_label`), so one
consistent LIST per pool returns every claim allocated from it, and a device any of them holds
(but for admin access) makes the bind fail with `DeviceTaken`. Partitionable devices share
their pool's counter sets, whichever node they reach: a new allocation of a device consuming
counters also holds its pool's lock, and the check adds what the other claims' devices of the
pool consume to what the new devices do (`overdrawn`, the caller's arithmetic): a counter
set overdrawn makes the bind fail with `CountersTaken`. Claims allocated by a scheduler
that does not take these locks (kube-scheduler beside ascheduler) are outside this guarantee.

A share of a device that allows multiple allocations (consumable capacity) does not take the
device: the check sums what the API server's other shares of it consume, and fails the bind
(`CapacityTaken`) when ours would take it past its capacity, or when another claim holds it
alone.

While no other instance shares the nodes (locks on Leases, `whenAlone: skip`: the member
Leases' protocol, `locks.members`), a new allocation needs neither the locks nor the check,
as a bind needs no node lock then: `DeviceLocks.alone` gives the member view the writes are
bracketed and cut off by (`MemberView.lockless`, `remaining`), so an instance that joins
waits for them before it binds, and then finds them in its own check. A pod's claims then
cost the API server what kube-scheduler's cost: no LIST per pod.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from ascheduler.kube import KubeClient, KubeError
from ascheduler.locks.hold import Hold
from ascheduler.locks.memberview import MemberView
from ascheduler.locks.nodelocks import RELEASE_ALL_SECONDS, NodeLocks
from ascheduler.locks.settings import LockSettings
from ascheduler.locks.values import Known
from ascheduler.model import PodInfo
from ascheduler.model.dra import parse_resource_claim

#: Claims allocated from a pool carry `<LABEL_PREFIX><hash of driver/pool>: "true"`.
LABEL_PREFIX: Final = "dra.ascheduler.io/pool-"
LEASE_PREFIX: Final = "ascheduler-pool-"

DeviceId = tuple[str, str, str]


def _digest(driver: str, pool: str) -> str:
    return hashlib.sha256(f"{driver}/{pool}".encode()).hexdigest()[:20]


def pool_label(driver: str, pool: str) -> str:
    """The label key marking a claim allocated devices of `pool`."""
    return LABEL_PREFIX + _digest(driver, pool)


def lease_name(driver: str, pool: str) -> str:
    return LEASE_PREFIX + _digest(driver, pool)


class DeviceTaken(Exception):
    """A device about to be allocated is allocated to another claim already."""

    def __init__(self, device: DeviceId, holder: str) -> None:
        self.device = device
        self.holder = holder
        driver, pool, name = device
        super().__init__(
            f"device {name} of pool {pool} (driver {driver}) is allocated to claim {holder}"
        )


class CountersTaken(DeviceTaken):
    """The devices about to be allocated would overdraw a counter set of their pool, beside
    the devices other claims hold there."""

    def __init__(self, device: DeviceId, reason: str) -> None:
        Exception.__init__(self, f"device {device[2]} of pool {device[1]}: {reason}")
        self.device = device
        self.holder = ""


#: (driver, pool, devices other claims hold there, devices being allocated there) -> why
#: that overdraws a counter set ("" when it does not).
Overdrawn = Callable[[str, str, set[str], set[str]], str]


class CapacityTaken(DeviceTaken):
    """A share would take a device past its capacity beside the other claims' shares."""

    def __init__(self, device: DeviceId, capacity: str, holders: Iterable[str]) -> None:
        DeviceTaken.__init__(self, device, ", ".join(sorted(holders)))
        driver, pool, name = device
        Exception.__init__(
            self,
            f"device {name} of pool {pool} (driver {driver}) has not enough {capacity} left "
            f"beside the shares of claims {self.holder}",
        )


#: Per shared device: what our shares consume of it, and its capacity (name -> value).
SharedUse = Mapping[DeviceId, tuple[Mapping[str, Fraction], Mapping[str, Fraction]]]


@dataclass
class Held:
    """The locks `DeviceLocks.hold` took: writes may go on while every one of them allows."""

    holds: list[Hold] = field(default_factory=list)

    def writable(self) -> bool:
        return all(h.writable() for h in self.holds)

    def remaining(self) -> float | None:
        """Seconds until the first cutoff; None without locks."""
        return min((h.remaining() for h in self.holds), default=None)


class DeviceLocks:
    def __init__(
        self, kube: KubeClient, node_locks: NodeLocks, namespace: str, settings: LockSettings
    ) -> None:
        self.kube = kube
        self.node_locks = node_locks
        #: What the node lock's object looked like (the cache's Node, given by the caller, or
        #: the lock's own Lease when locks live on Leases): set by the binder.
        self.known_for: Callable[[str, Known | None], Known | None] = lambda _node, known: known
        #: The locks a bind to a node takes (see `LockedBinder.lock_keys`): set by the binder.
        self.lock_keys: Callable[[str], list[str]] = lambda node: [node]
        #: The instances sharing the nodes, with locks on Leases (set by the binder; None:
        #: the locks are always taken).
        self.members: MemberView | None = None
        self.namespace = namespace
        self._leases = leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.pool_locks = NodeLocks(
            kube,
            # HAMi's key names a pod; pool locks always use this project's own value format.
            # Pool locks are let go at once: nothing tells their holder another instance waits.
            LockSettings(timeout=settings.timeout, identity=settings.identity, linger=0.0),
            path=lambda name: f"{leases}/{name}",
            create=self._create_lease,
        )

    async def _create_lease(self, name: str) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/managed-by": "ascheduler"},
            },
            "spec": {},
        }
        try:
            await self.kube.post(self._leases, body)
        except KubeError as exc:
            if not exc.conflict:  # created by another instance meanwhile
                raise

    async def run(self) -> None:
        """The pool locks' background work (the node locks' is the binder's)."""
        await self.pool_locks.run()

    async def release_all(self, timeout: float = RELEASE_ALL_SECONDS) -> dict[str, str]:
        """The pool locks still ours, let go (the node locks are the binder's)."""
        return await self.pool_locks.release_all(timeout)

    def alone(self, node: str | None, pools: Iterable[tuple[str, str]]) -> MemberView | None:
        """The member view to bracket a pod's claim writes with, made without the locks and
        their check: when no other instance shares the nodes now and none of the locks the
        writes would take (`node`'s, None: no node-local device; the `pools`') is held by
        another (one left by a member gone, until swept). None: hold them, and check."""
        members = self.members
        if members is None or not members.alone:
            return None
        if node is not None and any(self.node_locks.foreign(k) for k in self.lock_keys(node)):
            return None
        if any(self.pool_locks.foreign(lease_name(d, p)) for d, p in pools):
            return None
        return members

    @contextlib.asynccontextmanager
    async def hold(
        self,
        node: str | None,
        pools: Iterable[tuple[str, str]],
        pod: PodInfo,
        *,
        known: Known | None = None,
    ) -> AsyncIterator[Held]:
        """Hold `node`'s lock (None: no node-local device; `known`: the node as the cache
        has it, saving a read when it shows no lock) and one lock per network-attached pool
        (driver, pool), in that order; all are released on every path."""
        held = Held()
        async with contextlib.AsyncExitStack() as stack:
            if node is not None:
                taking = self.node_locks.hold_all(
                    self.lock_keys(node),
                    pod,
                    known=lambda key: self.known_for(key, known),
                    node=node,
                )
                held.holds.extend((await stack.enter_async_context(taking)).holds)
            for name in sorted({lease_name(d, p) for d, p in pools}):
                held.holds.append(await stack.enter_async_context(self.pool_locks.hold(name, pod)))
            yield held

    async def check(
        self,
        devices: Iterable[DeviceId],
        claim_uids: Iterable[str],
        overdrawn: Overdrawn | None = None,
        shared: SharedUse | None = None,
    ) -> None:
        """Raise `DeviceTaken` if the API server shows one of `devices` allocated to a claim
        other than `claim_uids` (the ones being written), `CountersTaken` if `overdrawn` says
        the devices of a pool overdraw its counters beside those the other claims hold, or
        `DeviceTaken`/`CapacityTaken` if one of the `shared` devices is held alone by another
        claim or short of what our shares consume."""
        wanted: dict[tuple[str, str], set[str]] = {}
        for driver, pool, name in devices:
            wanted.setdefault((driver, pool), set()).add(name)
        shared = shared or {}
        for driver, pool, _ in shared:
            wanted.setdefault((driver, pool), set())
        others: dict[DeviceId, dict[str, Fraction]] = {}
        holders: dict[DeviceId, set[str]] = {}
        ours = set(claim_uids)
        for (driver, pool), names in sorted(wanted.items()):
            listing = await self.kube.get(
                "/apis/resource.k8s.io/v1/resourceclaims",
                params={"labelSelector": pool_label(driver, pool)},
            )
            taken: set[str] = set()
            for raw in listing.get("items") or []:
                claim = parse_resource_claim(raw)
                if claim.uid in ours or claim.allocation is None:
                    continue
                for d in claim.allocation.devices:
                    if d.admin_access or d.driver != driver or d.pool != pool:
                        continue
                    if d.device in names:
                        raise DeviceTaken(d.device_id, claim.key)
                    taken.add(d.device)
                    if d.device_id not in shared:
                        continue
                    if d.share_id is None:
                        raise DeviceTaken(d.device_id, claim.key)
                    holders.setdefault(d.device_id, set()).add(claim.key)
                    tally = others.setdefault(d.device_id, {})
                    for cap, amount in (d.consumed_capacity or {}).items():
                        tally[cap] = tally.get(cap, Fraction(0)) + amount.value
            reason = overdrawn(driver, pool, taken, names) if overdrawn is not None else ""
            if reason:
                raise CountersTaken((driver, pool, min(names)), reason)
        for device, (consumed, capacity) in sorted(shared.items()):
            tally = others.get(device, {})
            for cap, value in sorted(capacity.items()):
                if tally.get(cap, 0) + consumed.get(cap, 0) > value:
                    raise CapacityTaken(device, cap, holders.get(device, ()))
