"""The background round: what no bind is there to do.

`run()` calls `tend()` whenever a failed release is due for a retry (backing off per node),
when a parked hold is due to be let go, when something wakes it (a release failed, a hold was
parked sooner than the round it waits for, another instance wants a parked lock), and every
quarter timeout (1 s to 30 s) for the *sweep*. A round

* retries the *leftovers* (releases of ours that failed) that are due, until each lands or the
  lock is no longer ours;
* lets parked holds go: at once where another instance wants the lock (and ours then *yield*
  there for `YIELD_SECONDS`), else when idle for the linger or short of write budget;
* with the sweep, clears other holders' locks that have gone stale by the rule of `acquire`,
  so a lock left by a dead instance on a node nobody binds to any more goes away once the
  timeout passes.
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog

from ascheduler import metrics
from ascheduler.locks.acquire import LEFTOVER_RETRY
from ascheduler.locks.coalescing import Coalescing
from ascheduler.locks.handover import YIELD_SECONDS
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

#: The background loop's shortest pause between rounds.
MIN_PAUSE: Final = 0.05


class Sweep(Coalescing):
    async def run(self) -> None:
        """Until cancelled: `tend()` whenever a failed release is due for a retry (backing off
        per node), when one is added, and every quarter timeout (1 s to 30 s)."""
        sweep = min(max(self.settings.timeout / 4, 1.0), 30.0)
        next_sweep = self._clock() + sweep
        while True:
            due = [self._retry_at[n][0] for n in self._leftover if n in self._retry_at]
            due += [self._parked_due(n) for n in self._parked]
            # At least a short pause per round, whatever the table says: never a hot loop.
            pause = max(min([next_sweep, *due]) - self._clock(), MIN_PAUSE)
            self._round_at = self._clock() + pause
            await wait_event(self._wake, pause)
            self._wake.clear()
            sweeping = self._clock() >= next_sweep
            try:
                await self.tend(sweep=sweeping)
            except Exception:  # never ends the process: the next round tries again
                log.exception("node_lock_round_crashed")
            if sweeping:
                next_sweep = self._clock() + sweep

    async def tend(self, *, sweep: bool = True) -> None:
        """One round of background work: retry the failed releases that are due, and (with
        `sweep`) clear locks of others that have gone stale. Never raises (but for
        cancellation): its failures are logged and tried again next round."""
        for node, value in list(self._leftover.items()):
            await self._retry_leftover(node, value)
        for node in list(self._parked):
            if node not in self._parked:
                continue  # taken up (or let go) by a hold while an earlier one was released
            if node in self._wanted:
                self._yield_until[node] = self._clock() + YIELD_SECONDS
                await self._let_go(node)
            elif self._parked_due(node) <= self._clock():
                await self._let_go(node)
        now = self._clock()
        for node in [n for n, until in self._yield_until.items() if until <= now]:
            del self._yield_until[node]
        if sweep:
            for node, (value, _) in list(self._seen.items()):
                await self._clear_if_stale(node, value)

    async def _let_go(self, node: str) -> None:
        async with self._local.setdefault(node, asyncio.Lock()):
            parked = self._parked.pop(node, None)
            if parked is not None:
                await self.release(parked[0])

    async def _retry_leftover(self, node: str, value: str) -> None:
        at, delay = self._retry_at.get(node, (0.0, LEFTOVER_RETRY[0]))
        if at > self._clock():
            return
        async with self._local.setdefault(node, asyncio.Lock()):
            if self._leftover.get(node) != value:
                return  # a hold of ours took it over, or the node was deleted, meanwhile
            try:
                cleared = await self._clear(node, value)
            except Exception as exc:
                if self._leftover.get(node) == value:
                    delay = min(delay * 2, LEFTOVER_RETRY[1])
                    self._retry_at[node] = (self._clock() + delay, delay)
                log.info("node_lock_release_retry_failed", node=node, error=repr(exc))
                return
            if self._leftover.get(node) == value:
                self._leftover.pop(node, None)
                self._retry_at.pop(node, None)
            if cleared:
                self.stats.released_late += 1
                log.info("node_lock_released_late", node=node)

    async def _clear_if_stale(self, node: str, value: str) -> None:
        if self._ours(node, value) or not self._stale(node, value):
            return
        async with self._local.setdefault(node, asyncio.Lock()):
            if not self._stale(node, value):
                return
            try:
                cleared = await self._clear(node, value)
            except Exception as exc:
                log.info("node_lock_stale_clear_failed", node=node, error=repr(exc))
                return
            if cleared:
                self.stats.stale_cleared += 1
                metrics.NODE_LOCK_RECOVERED.labels("stale").inc()
                log.warning("node_lock_stale_cleared", node=node, holder=value[:200])
