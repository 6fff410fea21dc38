"""Two-level node locks: an `asyncio.Lock` per lock key under an annotation lock in the API server.

The in-process lock serialises this instance's binds on a node; the annotation serialises binds
across scheduler instances (replicas, shards, or ascheduler beside HAMi). Where it is written
(`keys`): on a Lease by default, one per group of nodes (lease groups, 32 groups unless the
configuration says otherwise, see `settings.default_lease_groups`) or one per node; on the
Node itself under HAMi's key or with `object: node`. Staleness is counted from the sightings
of that object's informer (the Lease informer, or the node informer for locks on Nodes).

`NodeLocks` is one object built in layers, each in its own module with its own concern (see
`state`): what it sees and the hand-over (`handover`), the lock writes (`acquire`), holds shared
by binds (`coalescing`), the background round (`sweep`), and here its life: a node deleted, the
process stopping. docs/node-locks.md has the glossary and a lock's life from acquire to
release.

The one way in is `hold` (one key) or `hold_all` (a node's keys); both always release, also on
error and cancellation. `run()` does the background work until cancelled; `release_all` lets
every lock of ours go when the process stops.
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog

from ascheduler.kube import KubeError
from ascheduler.locks.sweep import Sweep
from ascheduler.locks.values import LockContended

log = structlog.get_logger(__name__)

#: How long a stopping instance tries to clear its locks (`NodeLocks.release_all`).
RELEASE_ALL_SECONDS: Final = 5.0


class NodeLocks(Sweep):
    def forget_node(self, node: str) -> None:
        """The node was deleted (and its annotations with it): drop what we know of it, and
        its in-memory lock unless a bind holds it now."""
        parked = self._parked.pop(node, None)
        if parked is not None and self._held.get(node) is parked[0]:
            del self._held[node]  # the lock object went with the node
        for table in (
            self._released,
            self._release_version,
            self._seen,
            self._watched,
            self._leftover,
            self._retry_at,
            self._yield_until,
            self._lineage,
        ):
            table.pop(node, None)
        self._wanted.discard(node)
        waiting = self._waiters.pop(node, None)
        if waiting and self.on_free is not None:
            self.on_free(list(waiting))  # its lock went with it
        lock = self._local.get(node)
        if lock is not None and not lock.locked():
            del self._local[node]
        lock = self._node_local.get(node)
        if lock is not None and not lock.locked():
            del self._node_local[node]

    async def release_all(self, timeout: float = RELEASE_ALL_SECONDS) -> dict[str, str]:
        """Stopping: every lock of ours still taken (held, parked, a release under way, or
        one that failed) cleared, all at once, within `timeout` seconds; returns those that
        were not (node -> value): they stand until they go stale for the others (`timeout` of
        the settings). Binds must be over or cancelled by now: a lock is cleared whoever uses
        it. A release under way (the background round's) is cleared here as well: it may be
        cancelled as the process stops, or fail after this call has looked."""
        holds = dict(self._held)
        values = {node: hold.value for node, hold in holds.items()}
        values.update(self._leftover)
        for node, value in self._releasing.items():
            values.setdefault(node, value)
        self._parked.clear()
        self._held.clear()
        self._leftover.clear()
        self._retry_at.clear()
        left = dict(values)

        async def clear(node: str, value: str) -> None:
            hold = holds.get(node)
            if hold is not None and hold.value == value:
                # The pods bound under it are left beside it, as a release leaves them.
                done = self._clear(
                    node, value, version=hold.version, record=hold.bound_after, obj=hold.node_obj
                )
            else:
                done = self._clear(node, value)
            try:
                await done
            except (KubeError, LockContended) as exc:
                log.warning("node_lock_release_failed", node=node, error=str(exc), retry="never")
                return
            del left[node]

        if values:
            try:
                async with asyncio.timeout(timeout):
                    outcomes = await asyncio.gather(
                        *(clear(n, v) for n, v in values.items()), return_exceptions=True
                    )
            except TimeoutError:
                outcomes = []
            for outcome in outcomes:
                if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                    raise outcome
                if isinstance(outcome, Exception):
                    log.error("node_lock_release_crashed", error=repr(outcome))
        if left:
            log.warning("node_locks_left", locks=sorted(left), until="stale for the others")
        else:
            log.info("node_locks_released", locks=len(values))
        return left
