"""What `NodeLocks` knows: the tables every layer of it reads and writes.

`NodeLocks` is built in layers, each a class on top of the one before and owning one concern
(a layer calls only into itself and the layers below it):

* `LockTable` (here): the tables, grouped by the layer that mostly writes them, and the
  questions every layer asks of them (is a value ours, is it stale);
* `handover.Handover`: what this instance sees of the lock objects, and the hand-over between
  instances (asking for a lock, waiting for it, freeing the pods that waited);
* `acquire.Acquiring`: the writes: taking a lock, taking another's over, releasing it;
* `coalescing.Coalescing`: holds shared by binds: parking and taking up, lease groups joined,
  several keys held together;
* `sweep.Sweep`: the background round: failed releases retried, parked holds let go, stale
  locks of others cleared;
* `nodelocks.NodeLocks`: the whole, and its life (a node deleted, the process stopping).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ascheduler.kube import KubeClient
from ascheduler.locks.hold import Hold, LockStats, SharedHold
from ascheduler.locks.settings import LockSettings
from ascheduler.locks.values import Known

T = TypeVar("T")


async def uninterruptible(task: asyncio.Future[T]) -> T:
    """`task`'s outcome, waiting for it to finish even if the caller is cancelled meanwhile
    (any number of times); such a cancellation is raised once it has finished. A
    cancellation that arrives as `task` finishes (both in one turn of the loop) is raised
    too, never swallowed: the caller's cleanup for a cancelled call (releasing a lock that
    landed) must run."""
    cancelled = False
    while not task.done():
        try:
            with contextlib.suppress(Exception):  # the task's own failure: result() raises it
                await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True  # ours, or the task's own: either way the call is cancelled
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


class LockTable:
    def __init__(
        self,
        kube: KubeClient,
        settings: LockSettings | None = None,
        *,
        now: Callable[[], dt.datetime] | None = None,
        clock: Callable[[], float] | None = None,
        path: Callable[[str], str] | None = None,
        create: Callable[[str], Awaitable[None]] | None = None,
        replace: bool = False,
    ) -> None:
        """`now` is the wall clock written into values (informational); `clock` the monotonic
        one staleness and hold budgets are counted on (default: the event loop's).

        Without `path` the lock is written on the Node named by its key. `path` names another
        kind of object by key: the binder passes the lock Lease's path when the settings put
        the locks on Leases (their default), device locks their pool Lease's; `create` makes
        one that is missing the first time a lock is taken on it.

        With `replace`, a lock write whose object this instance knows whole at the version
        it is guarded by replaces it (PUT), which costs the API server less than a merge
        patch (it has no patch to apply); it is as guarded as the patch, by the same
        resourceVersion. Other writes patch. Not for Nodes, which others write all the
        time."""
        self.kube = kube
        self._path = path or (lambda name: f"/api/v1/nodes/{name}")
        self._create = create
        self._replace = replace
        self.settings = settings or LockSettings()
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self.stats = LockStats()
        self._rng = random.Random()

        # What this instance sees (written by `handover.observe`).
        #: node -> (a lock value on it, loop time this instance first saw that value): the
        #: staleness clock
        self._seen: dict[str, tuple[str, float]] = {}
        #: node -> the lock value the watch showed last (never our own reads): the watch can
        #: show a hold's value before the write's answer is read, and the hold is then
        #: confirmed as it is taken
        self._watched: dict[str, str] = {}
        #: nodes whose lock object says another instance waits for our lock
        self._wanted: set[str] = set()
        #: Binds waiting for another instance to hand a lock over: (the value they met, set
        #: once the lock object shows another).
        self._handovers: dict[str, list[tuple[str, asyncio.Event]]] = {}
        #: lock key -> pods that met another holder's value there (uid -> that value)
        self._waiters: dict[str, dict[str, str]] = {}
        #: Told which pods' lock was let go (`wait_for`), so they are retried at once rather
        #: than at the end of their backoff; None: nobody listens (no pod is remembered).
        self.on_free: Callable[[list[str]], None] | None = None

        # The lock writes (`acquire`).
        #: node -> our hold of its lock, from the acquire until the release is sent
        self._held: dict[str, Hold] = {}
        #: node -> the value of a release of ours under way (its hold is out of `_held`)
        self._releasing: dict[str, str] = {}
        #: node -> a value of ours whose release failed, and when to try it again (delay)
        self._leftover: dict[str, str] = {}
        self._retry_at: dict[str, tuple[float, float]] = {}
        #: node -> when our last release left it, and as what
        self._released: dict[str, tuple[float, Known]] = {}
        #: node -> the resourceVersion our last release left (kept however old)
        self._release_version: dict[str, str] = {}
        #: values that did not parse, reported once each
        self._reported: set[str] = set()

        # Holds shared by binds (`coalescing`).
        #: lock key -> the asyncio lock of this instance's binds under it
        self._local: dict[str, asyncio.Lock] = {}
        #: node -> the asyncio lock of its binds while its locks are groups'
        self._node_local: dict[str, asyncio.Lock] = {}
        #: node -> a hold of ours kept after its binds, and since when it is idle
        self._parked: dict[str, tuple[Hold, float]] = {}
        #: node -> until when our holds there do not linger (another instance asked)
        self._yield_until: dict[str, float] = {}
        #: lock key -> its lineage (see `Hold.lineage`)
        self._lineage: dict[str, int] = {}
        #: group key -> the hold binds to the group's nodes share now
        self._sharing: dict[str, SharedHold] = {}

        # The background round (`sweep`).
        #: set to run a round now
        self._wake = asyncio.Event()
        #: When `run()` next looks at its table unwoken (inf: not running)
        self._round_at = float("inf")

    def foreign(self, node: str) -> bool:
        """Whether `node`'s lock object, as last seen, holds a lock that is not ours."""
        seen = self._seen.get(node)
        return seen is not None and not self._ours(node, seen[0])

    def _stale(self, node: str, value: str) -> bool:
        seen = self._seen.get(node)
        return (
            seen is not None
            and seen[0] == value
            and self._clock() - seen[1] >= self.settings.timeout
        )

    def _ours(self, node: str, value: str) -> bool:
        hold = self._held.get(node)
        return (hold is not None and hold.value == value) or self._leftover.get(node) == value

    @property
    def held(self) -> dict[str, Hold]:
        return dict(self._held)

    @property
    def leftovers(self) -> dict[str, str]:
        """Locks of ours whose release has not landed yet (node -> value)."""
        return dict(self._leftover)
