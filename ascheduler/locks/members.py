"""Who shares the nodes: binds skip the node lock while this instance is alone.

Node locks keep instances that share nodes from overcommitting them; an instance alone has
nobody to guard against. So every instance that takes node locks on Leases keeps a *member*
Lease of its own in the lease namespace (`ascheduler-member-<digest of its identity>`),
renewed every `duration / 5` seconds, and writes in it the other members it has seen
(`ascheduler.io/peers`, their identities).

* **Alone** (no other live member): binds go out without their node's lock, as with
  `--node-lock-policy none`, but for a node whose lock Lease shows someone else's lock.
* **Joining.** A new instance writes its Lease, then lists the members, before its informers
  list the cluster. Before its first bind every live member must name it among its peers; a
  member writes that only once it has stopped binding alone and every bind it started alone
  has finished. From then on all of them take node locks. Of two instances starting
  together, one at least finds the other (etcd orders the two writes and the two lists), and
  each acknowledges the other.
* **A member gone**: its Lease deleted (a graceful stop, after its last bind), or its
  `renewTime` unchanged for `duration` on this instance's clock (counted from when this
  instance first saw that value, so no clocks are compared) and the same on a fresh read. It
  is dropped from our peers. With nobody left, this instance lists the bound pods and waits
  until its cache has every one of them, then binds alone again.
* **Counted gone, but alive** (a partition that outlasted `duration`): the others removed
  its Lease (only if still at the version they saw unrenewed), so its next renewal finds
  none. It comes back under a new identity, as a newcomer, and binds again once every live
  member has acknowledged that one: no stale view of the old acknowledgements can pass.
* **A standby replica** (leader election) witnesses the member Leases while it waits to
  lead (`witness`), so a crashed leader's Lease has usually stood still for `duration`
  already when its successor joins: the successor binds once it has read it again.
* **Our own Lease late**: a bind starts (locked or not) only within `START` of the last
  renewal that succeeded (counted from when it was sent), and a bind made alone is cut off
  at `CUTOFF`, so all of ours have landed before anyone counts us gone: the node locks' own
  assumption, that a write the API server accepted is applied within the remaining quarter.
* **Re-validation.** Binds made alone are in no lock's record. After joining others (or
  being counted gone and coming back) the cache stands in for the API server's list of a
  node's pods only once it holds every pod bound at that moment (the same list and wait), and
  the records of earlier holds are dropped (`epoch` counts such changes).

**Lease groups.** Each member writes on its Lease how many lease groups it locks nodes in
(`ascheduler.io/lease-groups`; none written, as by an instance that predates them: a Lease per
node). A bind takes its node's lock under its own grouping and under every other live member's
(see `keys`). Any two instances then share a lock for every node they both bind to: of
the two, one at least knew the other before its first bind (the newcomer lists the members
after writing its Lease, and so does an instance coming back under a new identity, before it
binds again), and that one takes the other's locks too.

An instance that may not bind alone (`may_be_alone=False`: `ascheduler binder`, which keeps
no cache of pods, or `nodeLock.whenAlone: lock`) still registers and acknowledges others, so
they never bind alone beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

import structlog

from ascheduler.kube import KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.locks.memberlease import (
    MEMBER_SELECTOR,
    Member,
    member_lease_body,
    member_lease_name,
    parse_member,
)
from ascheduler.locks.memberview import RENEW, MemberView
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

T = TypeVar("T")


class Members(MemberView):
    # -- our Lease ---------------------------------------------------------------------------

    def _body(self, peers: frozenset[str]) -> dict[str, Any]:
        return member_lease_body(
            self.name,
            self.identity,
            peers,
            may_be_alone=self.may_be_alone,
            lease_groups=self.lease_groups,
            duration=self.duration,
        )

    async def _write(self, peers: frozenset[str]) -> None:
        """Renew our Lease with `peers`; on success they count as acknowledged."""
        sent = self._clock()
        body = self._body(peers)
        try:
            await self.kube.patch(f"{self._leases}/{self.name}", body, content_type=MERGE_PATCH)
        except KubeError as exc:
            if not exc.not_found:
                raise
            if self._renewed_at is not None:
                # Our Lease was removed: the others counted us gone (a partition outlasted
                # its duration, say). What they acknowledged is void, and a stale view of it
                # must not pass for a fresh one: come back under a new identity, which every
                # live member acknowledges anew before our next bind.
                self._readmit()
                body = self._body(peers)
            await self.kube.post(self._leases, body)
        if self._relist:
            # Back under a new identity: a member that joined meanwhile may not know it (it
            # listed before our Lease was back), so this instance must know that member, and
            # take its locks too, before binding again.
            await self._list()
            self._relist = False
        self._renewed_at = sent
        self._acked = peers
        self._changed.set()

    def _readmit(self) -> None:
        self._generation += 1
        old, self.identity = self.identity, f"{self._base}~{self._generation}"
        self.name = member_lease_name(self.identity)
        self._acked = frozenset()
        self._acknowledged = False
        self._relist = True
        self._set_alone(False)
        self.epoch += 1
        self.trusted = False
        self._changed.set()
        log.warning("node_lock_member_readmitted", was=old, identity=self.identity)

    async def _read(self) -> list[Member]:
        """The other members' Leases, from the API server."""
        listing = await self.kube.get(self._leases, params={"labelSelector": MEMBER_SELECTOR})
        members = (parse_member(raw) for raw in listing.get("items") or [])
        return [m for m in members if m is not None and m.identity != self.identity]

    async def _list(self) -> None:
        """The member Leases from the API server: new members met, gone ones dropped."""
        found: set[str] = set()
        for member in await self._read():
            found.add(member.identity)
            self.observe(member)
        for identity in [i for i in self._others if i not in found]:
            self.observe_gone(identity)

    async def _remove(self, member: Member) -> bool:
        """Delete a dead member's Lease unless it was renewed after all; whether it is gone
        now. Once it is, that member can never renew it: if it was alive after all, it comes
        back as a newcomer (see `_write`)."""
        body = {"preconditions": {"resourceVersion": member.version}} if member.version else None
        try:
            await self.kube.request("DELETE", f"{self._leases}/{member.name}", body=body)
        except KubeError as exc:
            if exc.not_found:
                return True
            log.info("node_lock_member_remove_failed", member=member.identity, error=str(exc))
            return False
        return True

    async def witness(self) -> None:
        """Until cancelled: read the member Leases now and then and note when each renewTime
        was first seen, without joining. A standby replica does this while it waits to lead,
        so when it takes over, its predecessor's Lease (killed with it, unrenewed since) has
        already stood still long enough on this instance's clock: the new leader counts it
        gone at once instead of after `duration` more."""
        while True:
            try:
                for member in await self._read():
                    self._note(member)
            except KubeError as exc:
                log.info("node_lock_member_witness_failed", error=str(exc))
            await asyncio.sleep(RENEW * self.duration)

    async def join_unless(self, stop: asyncio.Event) -> bool:
        """`join`, unless `stop` is set first (False then)."""
        joining = asyncio.ensure_future(self.join())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([joining, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in (joining, stopped):
            task.cancel()
        return not stop.is_set()

    async def join(self) -> None:
        """Register, then find the other members; retried until it succeeds. Call before the
        informers list the cluster: alone from the start, the cache's first list has every
        bind any member made."""
        delay = 0.2
        while True:
            try:
                await self._write(frozenset())
                await self._list()
                break
            except KubeError as exc:
                log.warning("node_lock_member_join_failed", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        if not self._others:
            self.trusted = True
            self._set_alone(self.may_be_alone)
        log.info("node_lock_member_joined", lease=self.name, peers=self.peers(), alone=self._alone)

    async def run(self) -> None:
        """Renew, acknowledge, and notice members gone, until cancelled."""
        while True:
            self._wake.clear()
            try:
                await self._round()
            except KubeError as exc:
                log.warning("node_lock_member_round_failed", error=str(exc))
            except Exception:  # never ends the process: binds wait while it cannot renew
                log.exception("node_lock_member_round_crashed")
            await wait_event(self._wake, RENEW * self.duration)

    async def _round(self) -> None:
        # Members unchanged for `duration` are gone if a fresh read agrees.
        if any(self._dead(m) for m in self._others.values()):
            await self._list()
            for member in list(self._others.values()):
                if self._dead(member):
                    log.warning("node_lock_member_expired", member=member.identity)
                    # Gone only once its Lease is: a member that renewed meanwhile stays.
                    if await self._remove(member):
                        self.observe_gone(member.identity)
        wanted = frozenset(self._others)
        # A newcomer is acknowledged only once no bind made alone is under way (each is cut
        # off in time); meanwhile our Lease is renewed without it.
        ack = wanted if self._drained.is_set() else self._acked & wanted
        if ack != self._acked or self._due():
            await self._write(ack)
        if ack != wanted and (self._draining is None or self._draining.done()):
            self._draining = asyncio.get_running_loop().create_task(self._wake_when_drained())
        if not self._others:
            self._maybe_alone()

    async def _wake_when_drained(self) -> None:
        await self._drained.wait()
        self._wake.set()

    def _due(self) -> bool:
        return self._renewed_at is None or (
            self._clock() - self._renewed_at >= RENEW * self.duration
        )

    async def leave(self) -> None:
        """Delete our Lease (after our last bind): the others need not wait for it to expire."""
        for task in (self._catching_up, self._draining):
            if task is not None:
                task.cancel()
        self._renewed_at = None
        self._alone = False
        try:
            await self.kube.request("DELETE", f"{self._leases}/{self.name}")
        except KubeError as exc:
            if not exc.not_found:
                log.warning("node_lock_member_leave_failed", error=str(exc))


async def witnessing(members: Members | None, waiting: Awaitable[T]) -> T:
    """`waiting` (a standby's wait to lead), `members` witnessing the member Leases meanwhile
    (see `Members.witness`)."""
    watch = None if members is None else asyncio.ensure_future(members.witness())
    try:
        return await waiting
    finally:
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
