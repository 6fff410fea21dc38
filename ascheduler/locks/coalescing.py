"""Holds shared by binds: one lock write serves as many binds as it safely can.

* **Linger and park.** After its binds, a hold of ours is not released but *parked* for
  `linger` seconds (`LockSettings.linger`): the next binds to that node *take it up* again
  (no lock, unlock or list for them) while it has `REUSE_MARGIN` of its write budget left.
  A parked hold is let go (released) when it has been idle for the linger, when its budget
  runs short, or at once when another instance wants the lock (see `handover`); a hold whose
  binds failed, or that was lost, is released at once. HAMi's key never lingers: its value
  names one pod.
* **Lease groups joined.** A group's lock stands for several nodes: while its hold serves
  binds to one node, binds to another node of the group *join* it instead of waiting for it
  (`SharedHold`); the last user parks or releases it.
* **Several keys.** `hold_all` takes the locks of one node under every grouping in use, in
  sorted order (the order every instance takes them), and lets them go the last first.

Each lock key has an asyncio lock (`_local`): this instance's binds on one key are serialised
in process, and a lock write and its release run to completion even when the bind is
cancelled, so a lock that landed is always released and our next hold knows our own value.

A hold's *lineage* (`Hold.lineage`) counts this instance's holds on a lock object that were
not *undisturbed* (taken while the object was exactly as our own last release left it, or
taken up from parking): while it stays the same, nobody else has bound under the lock, and
the binder may trust what it recorded there (see `binding.revalidation`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from ascheduler import metrics
from ascheduler.locks.acquire import Acquiring
from ascheduler.locks.handover import YIELD_SECONDS
from ascheduler.locks.hold import REUSE_MARGIN, Hold, Holds, SharedHold
from ascheduler.locks.keys import is_group_key
from ascheduler.locks.state import uninterruptible
from ascheduler.locks.values import Known
from ascheduler.model import PodInfo


@dataclass
class _Open:
    """A lock held by `Coalescing._open`: its own asyncio lock held with it, or the group's
    hold joined."""

    key: str
    hold: Hold
    local: asyncio.Lock | None = None
    shared: SharedHold | None = None


class Coalescing(Acquiring):
    @contextlib.asynccontextmanager
    async def hold(
        self, node: str, pod: PodInfo, *, known: Known | None = None
    ) -> AsyncIterator[Hold]:
        """Hold both levels on `node` (`pod` is the one it binds under HAMi's key; a group's
        lock is shared, see `_join`); always releases, also on error and cancellation."""
        taken = await self._open(node, pod, known)
        ok = False
        try:
            yield taken.hold
            ok = True
        finally:
            await self._shut(taken, ok=ok)

    async def _open(self, key: str, pod: PodInfo, known: Known | None) -> _Open:
        """`key`'s lock held (a group's shared, see `_join`), with what `_shut` lets go."""
        if is_group_key(key):
            shared = await self._join(key, pod, known)
            return _Open(key, shared.hold, shared=shared)
        lock = self._local.setdefault(key, asyncio.Lock())
        started = self._clock()
        await lock.acquire()
        try:
            return _Open(key, await self._take(key, pod, known, started), local=lock)
        except BaseException:
            lock.release()
            raise

    async def _shut(self, taken: _Open, *, ok: bool) -> None:
        """What `_open` took, parked or released (`ok`: its binds all went well)."""
        if taken.shared is not None:
            await self._unjoin(taken.key, taken.shared, ok=ok)
            return
        assert taken.local is not None
        try:
            await self._give_back(taken.key, taken.hold, ok=ok)
        finally:
            taken.local.release()

    async def _take(self, node: str, pod: PodInfo, known: Known | None, started: float) -> Hold:
        """Our parked hold on `node` taken up, else the lock acquired (under `node`'s asyncio
        lock, which the caller holds)."""
        hold = None
        if node in self._parked:  # else nothing to take up or let go: no task for it
            hold = await uninterruptible(asyncio.ensure_future(self._unpark(node)))
        if hold is None:
            # Both writes run to completion even when the bind is cancelled meanwhile (once
            # or again), and the asyncio lock is only let go once the annotation is (or is a
            # leftover): a lock patch that landed is always released, and our next hold
            # knows our own value.
            taking = asyncio.ensure_future(self.acquire(node, pod, known=known))
            try:
                hold = await uninterruptible(taking)
            except asyncio.CancelledError:
                if taking.done() and not taking.cancelled() and taking.exception() is None:
                    await uninterruptible(asyncio.ensure_future(self.release(taking.result())))
                raise
        metrics.NODE_LOCK_WAIT.observe(self._clock() - started)
        if not hold.undisturbed:
            self._lineage[node] = self._lineage.get(node, 0) + 1
        hold.lineage = self._lineage.get(node, 0)
        return hold

    async def _give_back(self, node: str, hold: Hold, *, ok: bool) -> None:
        """After a hold's binds (under `node`'s asyncio lock): parked for the next ones if it
        may linger and nothing failed, else released."""
        if ok and self._parkable(node, hold):
            self._parked[node] = (hold, self._clock())
            if self._parked_due(node) < self._round_at:
                self._wake.set()  # due before the round `run()` waits for
        else:
            await uninterruptible(asyncio.ensure_future(self.release(hold)))

    async def _join(self, key: str, pod: PodInfo, known: Known | None) -> SharedHold:
        """The hold of a lock that stands for several nodes (a lease group): while it serves
        binds to one node, binds to another node of the group join it instead of waiting
        for it (each node's binds are still serialised by the caller). A hold is joined
        only while it may serve more binds and no other instance has asked for it; it is
        parked or released once its last user is done (`_unjoin`)."""
        started = self._clock()
        while True:
            shared = self._sharing.get(key)
            if shared is None:
                async with self._local.setdefault(key, asyncio.Lock()):
                    if key in self._sharing:
                        continue  # taken meanwhile by another node's binds: join it
                    hold = await self._take(key, pod, known, started)
                    shared = self._sharing[key] = SharedHold(hold)
                return shared
            if not shared.closing and key not in self._wanted and shared.hold.reusable():
                shared.users += 1
                return shared
            await shared.done.wait()

    async def _unjoin(self, key: str, shared: SharedHold, *, ok: bool) -> None:
        """`_join`'s way out: the last user parks or releases the hold."""
        shared.users -= 1
        shared.ok = shared.ok and ok
        if not shared.users:
            shared.closing = True
            # Parked or released even if the last user is cancelled meanwhile.
            await uninterruptible(asyncio.ensure_future(self._close(key, shared)))

    async def _close(self, key: str, shared: SharedHold) -> None:
        try:
            async with self._local.setdefault(key, asyncio.Lock()):
                await self._give_back(key, shared.hold, ok=shared.ok)
        finally:
            del self._sharing[key]
            shared.done.set()

    @contextlib.asynccontextmanager
    async def hold_all(
        self,
        keys: Iterable[str],
        pod: PodInfo,
        *,
        known: Callable[[str], Known | None] = lambda _key: None,
        node: str | None = None,
    ) -> AsyncIterator[Holds]:
        """`hold` each of `keys` (in sorted order, as every instance takes them; a group's
        lock shared, see `_join`); `known` gives each lock object as last seen. All are
        released on every path, the last taken first. Holds for `node` whose locks are all
        groups' are serialised by an asyncio lock of the node's own, as its own lock would."""
        ordered = sorted(set(keys))
        own = None
        if node is not None and node not in ordered:
            own = self._node_local.setdefault(node, asyncio.Lock())
            await own.acquire()
        opened: list[_Open] = []
        ok = False
        try:
            for key in ordered:
                opened.append(await self._open(key, pod, known(key)))
            yield Holds([taken.hold for taken in opened])
            ok = True
        finally:
            try:
                await self._shut_all(opened, ok=ok)
            finally:
                if own is not None:
                    own.release()

    async def _shut_all(self, opened: list[_Open], *, ok: bool) -> None:
        """`_shut` each of `opened`, the last first, every one even if another fails (then
        the ones after it count as failed too); the last failure is raised."""
        failure: BaseException | None = None
        for taken in reversed(opened):
            try:
                await self._shut(taken, ok=ok and failure is None)
            except BaseException as exc:
                failure = exc
        if failure is not None:
            raise failure

    def _parkable(self, node: str, hold: Hold) -> bool:
        if node in self._wanted:
            self._yield_until[node] = self._clock() + YIELD_SECONDS
            return False
        return (
            self.settings.lingers
            and self._clock() >= self._yield_until.get(node, 0.0)
            and self._held.get(node) is hold
            and hold.reusable()
        )

    async def _unpark(self, node: str) -> Hold | None:
        """Our parked hold on `node`, taken up again if it may still serve; one that may not
        is released here. None: take the lock afresh."""
        parked = self._parked.pop(node, None)
        if parked is None:
            return None
        hold = parked[0]
        if hold.reusable() and node not in self._wanted and self._held.get(node) is hold:
            hold.undisturbed = True
            return hold
        await self.release(hold)
        return None

    def _parked_due(self, node: str) -> float:
        """When a parked hold is let go: idle for the linger, or short of write budget."""
        hold, idle_since = self._parked[node]
        return min(idle_since + self.settings.linger, hold.write_until - REUSE_MARGIN)
