"""What an instance knows of the others sharing its nodes, and what its binds ask of it.

`MemberView` holds the state behind `members.Members`: the other members as last seen (their
Leases, through the informer or our reads), whether this instance is *alone*, its *epoch*, and
whether the cache is *trusted*; and the catch-up that ends being alone or distrusted. `Members`
adds the writes: our own Lease, its renewal, and removing members gone. The design is in
`members`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Final

import structlog

from ascheduler import metrics
from ascheduler.kube import KubeClient, KubeError
from ascheduler.locks.memberlease import Member, member_lease_name
from ascheduler.locks.settings import DEFAULT_MEMBER_SECONDS
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

#: Fractions of the member duration: renewals every RENEW; binds start within START of the
#: last renewal and binds made alone are cut off at CUTOFF.
RENEW: Final = 0.2
START: Final = 0.5
CUTOFF: Final = 0.75


class MemberView:
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

    @contextlib.asynccontextmanager
    async def alone_for(self) -> AsyncIterator[None]:
        """Brackets work done alone (a bind, a pod's claim writes): `lockless`, and cut off
        (TimeoutError) in time for the others' count of our member Lease."""
        with self.lockless():
            async with asyncio.timeout(self.remaining()):
                yield

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
