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
(see `nodelock`). Any two instances then share a lock for every node they both bind to: of
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
import datetime as dt
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import structlog

from ascheduler import metrics
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

T = TypeVar("T")

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
DEFAULT_MEMBER_SECONDS: Final = 15.0
#: Fractions of the member duration: renewals every RENEW; binds start within START of the
#: last renewal and binds made alone are cut off at CUTOFF.
RENEW: Final = 0.2
START: Final = 0.5
CUTOFF: Final = 0.75


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


class Members:
    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        identity: str,
        *,
        duration: float = DEFAULT_MEMBER_SECONDS,
        may_be_alone: bool = True,
        catch_up: Callable[[], Awaitable[bool]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        lease_groups: int = 0,
    ) -> None:
        """`catch_up` lists the bound pods and returns whether the cache came to hold them
        all; without it this instance never binds alone once it has met another."""
        if not duration > 0:
            raise ValueError(f"member lease duration must be positive, got {duration:g}s")
        self.kube = kube
        self.identity = identity
        #: The identity this instance started with; after being counted gone it comes back
        #: as `<base>~<generation>`.
        self._base = identity
        self._generation = 0
        self.duration = duration
        self.may_be_alone = may_be_alone
        self.lease_groups = lease_groups
        self._catch_up = catch_up
        self._clock = clock
        self.name = member_lease_name(identity)
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        #: identity -> the other live members, as last seen
        self._others: dict[str, Member] = {}
        #: identity -> (its renewTime value, when this instance first saw that value)
        self._seen: dict[str, tuple[str, float]] = {}
        #: the identities written in our Lease's peers (acknowledged)
        self._acked: frozenset[str] = frozenset()
        #: when our last successful renewal was sent (our clock); None: not registered
        self._renewed_at: float | None = None
        self._alone = False
        #: the cache may stand in for the API server's list of a node's pods
        self.trusted = False
        #: changes when binds made alone may have gone out unseen by this instance's records
        self.epoch = 0
        self._lockless = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._wake = asyncio.Event()
        #: set on every change a waiting bind may care about
        self._changed = asyncio.Event()
        self._catching_up: asyncio.Task[None] | None = None
        self._draining: asyncio.Task[None] | None = None
        #: every other member (one at least) names us among its peers
        self._acknowledged = False
        #: back under a new identity: the members are listed again before a bind
        self._relist = False

    # -- what binds ask ----------------------------------------------------------------------

    @property
    def alone(self) -> bool:
        """Whether a bind may go out without its node's lock now."""
        return self._alone and self.fresh()

    def fresh(self) -> bool:
        """Our Lease was renewed recently enough for a bind to start."""
        return (
            self._renewed_at is not None
            and self._clock() - self._renewed_at < START * self.duration
        )

    def ready(self) -> bool:
        """Whether a bind may start: registered, renewed, and acknowledged by every live
        member that may bind alone (none of them does now)."""
        if not self.fresh() or self._relist:
            return False
        return all(self.identity in m.peers or not m.may_be_alone for m in self._others.values())

    async def wait_ready(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for `ready()`."""
        deadline = self._clock() + timeout
        while not self.ready():
            left = deadline - self._clock()
            if left <= 0:
                return False
            self._changed.clear()
            await wait_event(self._changed, min(left, 1.0))
        return True

    def remaining(self) -> float:
        """Seconds left before a bind made alone is cut off."""
        if self._renewed_at is None:
            return 0.0
        return max(0.0, self._renewed_at + CUTOFF * self.duration - self._clock())

    @contextlib.contextmanager
    def lockless(self) -> Iterator[None]:
        """Brackets a bind made alone: acknowledging another member waits for it."""
        self._lockless += 1
        self._drained.clear()
        try:
            yield
        finally:
            self._lockless -= 1
            if not self._lockless:
                self._drained.set()

    def peers(self) -> list[str]:
        return sorted(self._others)

    def groupings(self) -> frozenset[int]:
        """This instance's lease groups and every other live member's: a bind takes its
        node's lock under each."""
        return frozenset({self.lease_groups, *(m.lease_groups for m in self._others.values())})

    # -- what the informer and our reads show -----------------------------------------------

    def observe(self, member: Member) -> None:
        if member.identity == self.identity:
            return
        self._note(member)
        if member.identity not in self._others:
            log.info("node_lock_member_seen", member=member.identity)
            self._set_alone(False)
            self.epoch += 1  # voids a catch-up under way: it may predate this member's binds
        self._others[member.identity] = member
        self._wake.set()
        self._check()

    def _note(self, member: Member) -> None:
        """When this instance first saw the member's current renewTime."""
        seen = self._seen.get(member.identity)
        if seen is None or seen[0] != member.renewed:
            self._seen[member.identity] = (member.renewed, self._clock())

    def observe_gone(self, identity: str) -> None:
        if identity == self.identity or identity not in self._others:
            return
        log.info("node_lock_member_gone", member=identity)
        del self._others[identity]
        self._seen.pop(identity, None)
        self._wake.set()
        self._check()

    def _check(self) -> None:
        """After a change: wake waiting binds; once every other member acknowledges us (anew),
        binds made alone before that may be missing from our records and cache: distrust them
        until the cache has caught up."""
        acknowledged = bool(self._others) and all(
            self.identity in m.peers for m in self._others.values()
        )
        if acknowledged and not self._acknowledged:
            self.epoch += 1
            self.trusted = False
            self._start_catch_up(then_alone=False)
        self._acknowledged = acknowledged
        self._changed.set()

    def _set_alone(self, alone: bool) -> None:
        if alone == self._alone:
            return
        self._alone = alone
        metrics.NODE_LOCK_ALONE.set(1 if alone else 0)
        log.info("node_lock_alone" if alone else "node_lock_shared", peers=self.peers())

    def _dead(self, member: Member) -> bool:
        seen = self._seen.get(member.identity)
        return (
            seen is not None
            and seen[0] == member.renewed
            and self._clock() - seen[1] >= self.duration
        )

    # -- our Lease ---------------------------------------------------------------------------

    def _body(self, peers: frozenset[str]) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.name,
            "labels": {
                "app.kubernetes.io/managed-by": "ascheduler",
                MEMBER_LABEL[0]: MEMBER_LABEL[1],
            },
            "annotations": {
                MEMBER_KEY: self.identity,
                PEERS_KEY: ",".join(sorted(peers)),
                ALONE_KEY: "true" if self.may_be_alone else "false",
                GROUPS_KEY: str(self.lease_groups),
            },
        }
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.duration)),
                "renewTime": _micro_time(),
            },
        }

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

    def _maybe_alone(self) -> None:
        """With no other member left: alone, once the cache holds every pod bound now (the
        members gone may have bound pods it has not seen yet)."""
        if self._alone or (self._catching_up is not None and not self._catching_up.done()):
            return
        if not self.may_be_alone:
            if not self.trusted:  # trust the cache again once it caught up
                self._start_catch_up(then_alone=False)
            return
        self.epoch += 1
        self.trusted = False
        self._start_catch_up(then_alone=True)

    def _start_catch_up(self, *, then_alone: bool) -> None:
        if self._catching_up is not None and not self._catching_up.done():
            self._catching_up.cancel()
        if self._catch_up is None:
            return
        self._catching_up = asyncio.get_running_loop().create_task(self._caught_up(then_alone))

    async def _caught_up(self, then_alone: bool) -> None:
        assert self._catch_up is not None
        epoch = self.epoch
        try:
            ok = await self._catch_up()
        except (KubeError, TimeoutError) as exc:
            log.warning("node_lock_catch_up_failed", error=str(exc))
            ok = False
        except Exception:
            log.exception("node_lock_catch_up_crashed")
            ok = False
        if not ok or epoch != self.epoch:
            if then_alone and not self._others:
                self._wake.set()  # try again next round
            return
        self.trusted = True
        if then_alone and not self._others:
            self._set_alone(True)

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
