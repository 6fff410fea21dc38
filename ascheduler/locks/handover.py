"""What this instance sees of the lock objects, and the hand-over between instances.

Every sighting of a lock object (the informer's, `watched`, or one of our own reads) goes
through `observe`, which

* starts the *staleness clock* of a value the first time this instance sees it (see
  `acquire`: staleness is counted from then, never from the time inside the value);
* confirms a hold of ours once the watch shows its value, and finds it lost once the watch
  shows another (`Hold.confirmed`, `Hold.lost`);
* notes that another instance *wants* our lock (its identity under `<key>-wanted`): a parked
  hold is let go at once, a busy one after its binds, and ours then do not linger there for
  `YIELD_SECONDS` (see `coalescing`);
* wakes binds waiting for a hand-over (`_await_handover`) and frees the pods that waited for
  the value it replaced (`wait_for`, `on_free`).

**Hand-over.** A bind that meets another instance's live lock writes its own identity under
the wanted annotation (`_ask`) and, while it has attempts left, waits up to `handover_wait`
seconds for the lock object to show another value before it reads the lock again. Any lock
write of the holder (taking or releasing) clears the request: it was meant for the holder
before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Final

import structlog

from ascheduler.kube import KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.locks.state import LockTable
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

#: After letting a lock go for an instance that asked, our holds on that node do not linger
#: for this long, so the other instance's next try finds the lock free between them.
YIELD_SECONDS: Final = 30.0


class Handover(LockTable):
    def observe(self, node: str, annotations: Mapping[str, str], *, watched: bool = False) -> None:
        """A node as the informer (`watched`) or one of our reads shows it: starts the
        staleness clock of a lock value the first time this instance sees it. The watch,
        whose changes come in order, also confirms a hold of ours (it shows our value) and,
        once it has, finds it lost as soon as it shows another."""
        value = annotations.get(self.settings.key, "")
        if watched:
            if value:
                self._watched[node] = value
            else:
                self._watched.pop(node, None)
        if watched and (hold := self._held.get(node)) is not None and not hold.lost:
            if value == hold.value:
                hold.confirmed = True
            elif hold.confirmed:
                hold.lost = True
                log.error("node_lock_lost", node=node, ours=hold.value, found=value[:200])
        for awaited, changed in self._handovers.get(node, ()):
            if value != awaited:
                changed.set()
        if not value:
            self._seen.pop(node, None)
        elif (seen := self._seen.get(node)) is None or seen[0] != value:
            self._seen[node] = (value, self._clock())
        if node in self._waiters:
            self._free_waiters(node, value)
        wanted = annotations.get(self.settings.wanted_key, "")
        if wanted and wanted != self.settings.identity:
            self._wanted.add(node)
            if node in self._parked:
                self._wake.set()  # let it go now
        else:
            self._wanted.discard(node)

    def wait_for(self, node: str, value: str, uids: Iterable[str]) -> None:
        """Pods that met another holder's lock `value` on `node` and wait for it: `on_free`
        is told of them once the lock object shows another value (at once if it does by
        now). Nothing is remembered without a listener, or without a value to wait out."""
        if self.on_free is None or not value:
            return
        waiting = self._waiters.setdefault(node, {})
        for uid in uids:
            waiting[uid] = value
        seen = self._seen.get(node)
        self._free_waiters(node, seen[0] if seen is not None else "")

    def _free_waiters(self, node: str, value: str) -> None:
        waiting = self._waiters.get(node, {})
        freed = [uid for uid, met in waiting.items() if met != value]
        if not freed:
            return
        for uid in freed:
            del waiting[uid]
        if not waiting:
            del self._waiters[node]
        if self.on_free is not None:
            self.on_free(freed)

    async def _await_handover(self, node: str, value: str) -> None:
        """Until the lock object no longer shows `value` (as the informer, or a read of ours,
        sees it), or `handover_wait` seconds."""
        seen = self._seen.get(node)
        if seen is not None and seen[0] != value:
            return  # changed already
        entry = (value, asyncio.Event())
        waiting = self._handovers.setdefault(node, [])
        waiting.append(entry)
        try:
            await wait_event(entry[1], self.settings.handover_wait)
        finally:
            waiting.remove(entry)
            if not waiting:
                del self._handovers[node]

    async def _ask(self, node: str) -> None:
        """Tell the instance holding `node`'s lock that we wait for it (it lets a parked hold
        go at once); best effort."""
        patch = {"metadata": {"annotations": {self.settings.wanted_key: self.settings.identity}}}
        try:
            await self.kube.patch(self._path(node), patch, content_type=MERGE_PATCH)
        except KubeError as exc:
            log.info("node_lock_ask_failed", node=node, error=str(exc))
