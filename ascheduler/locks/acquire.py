"""Taking a lock, taking another holder's over, and letting it go: the lock writes.

Every write is guarded by the lock object's resourceVersion, so it never lands over a change
it has not seen. A lock *acquire* reads the object (or trusts a recent copy of it, `Known`),
and writes our value where it finds none, ours, or one that may be taken over; conflicts that
are not another holder (a heartbeat between our read and our write) are read again.

**Taking over a lock that is not ours.**

* *stale*: this instance has seen that exact value on the lock object for `timeout`.
  Staleness is counted on this instance's monotonic clock from when it first saw the value
  (through the lock object's informer or its own reads, see `handover`), never from the
  time written inside it: no assumption is made about clocks across instances, only that
  each one's clock runs at about real speed. A restarted instance therefore waits one full
  timeout before taking over a lock it finds.
* *dangling*: a value naming a pod (HAMi's format) whose pod is gone, deleting or finished.
* anything else is respected until stale: a live holder, HAMi's legacy value (a bare time),
  and a value that does not parse (reported once).

**Release** is a write guarded by the version our last write left, so it never clears someone
else's lock. When it fails (the API server is down, say), the value is kept as a *leftover*:
the background round (`sweep`) retries it until it lands or the lock is no longer ours, and
this instance's next hold on the node takes its own leftover over at once (HAMi's "node locked
for five minutes" bug, fixed at the root). An acquire that gives up after its write may have
landed leaves its value the same way: never a lock nobody owns.

A release also leaves beside the lock the record of pods bound under it (`<key>-bound`), which
the next holder reads as `Hold.bound_before`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

import structlog

from ascheduler import metrics
from ascheduler.kube import KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.locks.handover import Handover
from ascheduler.locks.hold import BOUND_KEPT, HOLD_BUDGET, HOLD_CUTOFF, Hold, Holds
from ascheduler.locks.values import (
    Holder,
    Known,
    LockContended,
    format_time,
    replaced,
    resource_version,
)
from ascheduler.model import PodInfo

log = structlog.get_logger(__name__)

#: Attempts per acquire or release: transient failures, and conflicts that are not a holder.
ATTEMPTS: Final = 6
RETRY_DELAY: Final = 0.1
#: How long our own release's answer is trusted over the informer's copy of the node.
RELEASE_HINT_SECONDS: Final = 5.0
#: Background retries of a failed release: first delay, and the cap of its doubling.
LEFTOVER_RETRY: Final = (0.5, 10.0)


class Acquiring(Handover):
    def _new_value(self, pod: PodInfo) -> str:
        stamp = format_time(self.now(), self._rng.randrange(1000))
        if self.settings.hami:
            return f"{stamp},{pod.namespace},{pod.name}"
        return f"{stamp},{self.settings.identity}"

    async def _write(
        self,
        node: str,
        version: str,
        value: str | None,
        *,
        record: tuple[str, ...] | None = None,
        obj: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Set (or, with None, remove) the lock if the node is still at `version`. Either
        clears a waiting instance's request: it was meant for the holder before. `obj`: the
        object as it is at `version`, if known (replaced rather than patched, see `replace`)."""
        annotations: dict[str, str | None] = {self.settings.key: value}
        if not self.settings.hami:
            annotations[self.settings.wanted_key] = None
        if record is not None:
            annotations[self.settings.bound_key] = ",".join(record[-BOUND_KEPT:])
        if self._replace and obj is not None and resource_version(obj) == version:
            return await self.kube.put(self._path(node), replaced(obj, version, annotations))
        patch = {"metadata": {"resourceVersion": version, "annotations": annotations}}
        return await self.kube.patch(self._path(node), patch, content_type=MERGE_PATCH)

    async def _read(self, node: str) -> tuple[str, str, dict[str, Any]]:
        """(resourceVersion, lock value or "", node) as the API server has it now."""
        try:
            obj = await self.kube.get(self._path(node))
        except KubeError as exc:
            if not exc.not_found or self._create is None:
                raise
            await self._create(node)
            obj = await self.kube.get(self._path(node))
        meta = obj.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        self.observe(node, annotations)
        return str(meta.get("resourceVersion", "")), annotations.get(self.settings.key, ""), obj

    async def _pause(self, attempt: int) -> None:
        await asyncio.sleep(RETRY_DELAY * 2**attempt * (1 + self._rng.uniform(-0.1, 0.1)))

    async def acquire(self, node: str, pod: PodInfo, *, known: Known | None = None) -> Hold:
        """Take the annotation lock. `known` is the node's (resourceVersion, annotations) as
        this instance's cache last saw them: when they show no lock, the patch goes out at once
        (one call instead of two); if the cache was stale the 409 only sends us to read.

        Conflicts that are not another holder (a heartbeat or label change between our read and
        our patch) are read again and retried, as are transient failures; our own value found
        on the node (an earlier patch of this acquire whose answer was lost, or a leftover of
        ours) is ours. Raises `LockContended`, or `KubeError` once attempts run out; if a patch
        had been sent by then, it may have landed, so its value becomes a leftover that `run()`
        clears (never a lock nobody owns)."""
        started = self._clock()
        value = self._new_value(pod)
        sent: list[bool] = []
        try:
            return await self._acquire(node, value, started, known, sent)
        except LockContended as exc:
            if sent:
                self._leave(node, value)
            self.wait_for(node, exc.value, [pod.uid])
            raise
        except BaseException:
            if sent:
                self._leave(node, value)
            raise

    async def _acquire(
        self, node: str, value: str, started: float, known: Known | None, sent: list[bool]
    ) -> Hold:
        hint = known
        released = self._released.pop(node, None)
        if released is not None and started - released[0] < RELEASE_HINT_SECONDS:
            # Just after our own release the informer has usually not seen it (nor our lock):
            # that write's answer is the node's newest version we know of.
            hint = released[1]
        # A hint without a version would make the patch unconditional: never use one.
        fast = (
            hint.version
            if hint is not None and hint.version and not hint.annotations.get(self.settings.key)
            else ""
        )
        obj: Mapping[str, Any] | None = None
        for attempt in range(ATTEMPTS):
            try:
                if fast:
                    version, fast = fast, ""
                    assert hint is not None
                    record: tuple[str, ...] | None = self._record(hint.annotations)
                    obj = hint.obj
                else:
                    version, current, obj = await self._read(node)
                    record = None
                    if current and current != value and not self._ours(node, current):
                        try:
                            await self._check_takeover(node, current)
                        except LockContended as exc:
                            if not (exc.asked and self.settings.handover_wait > 0):
                                raise
                            if attempt == ATTEMPTS - 1:
                                raise
                            await self._await_handover(node, current)
                            continue
                    elif not current:
                        meta = obj.get("metadata") or {}
                        record = self._record(meta.get("annotations") or {})
                    if current == value:
                        return self._took(node, value, started, obj)  # landed; answer did not
                try:
                    sent.append(True)
                    taken = await self._write(node, version, value, obj=obj)
                    undisturbed = version == self._release_version.get(node)
                    return self._took(
                        node, value, started, taken, undisturbed=undisturbed, record=record
                    )
                except KubeError as exc:
                    # A conflict, or an object not made yet (a stale hint): read (and make).
                    if not exc.conflict and not (exc.not_found and self._create is not None):
                        raise
                    # The node changed since we read it (or the cache was behind): read again.
            except KubeError as exc:
                if not exc.transient or attempt == ATTEMPTS - 1:
                    raise
                await self._pause(attempt)
        self.stats.contended += 1
        metrics.NODE_LOCK_CONTENDED.inc()
        raise LockContended(node, "a concurrent writer (the node kept changing)")

    def _record(self, annotations: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The bound-pods record in a lock object's annotations (empty when there is none)."""
        if self.settings.hami:
            return None
        text = str(annotations.get(self.settings.bound_key) or "")
        return tuple(uid for uid in text.split(",") if uid)

    def _took(
        self,
        node: str,
        value: str,
        started: float,
        obj: Mapping[str, Any],
        *,
        undisturbed: bool = False,
        record: tuple[str, ...] | None = None,
    ) -> Hold:
        timeout = self.settings.timeout
        hold = Hold(
            node=node,
            value=value,
            version=str((obj.get("metadata") or {}).get("resourceVersion", "")),
            node_obj=obj,
            write_until=started + timeout * HOLD_BUDGET,
            cutoff_at=started + timeout * HOLD_CUTOFF,
            clock=self._clock,
            undisturbed=undisturbed,
            bound_before=record,
            confirmed=self._watched.get(node) == value,
        )
        self._held[node] = hold
        self._leftover.pop(node, None)  # our new value replaced it
        self._retry_at.pop(node, None)
        self.stats.acquired += 1
        return hold

    async def _check_takeover(self, node: str, value: str) -> None:
        """Return if the lock holding `value` (not ours) may be taken over; else raise
        LockContended."""
        holder = Holder.parse(value)
        if holder is None and value not in self._reported:
            if len(self._reported) > 1024:
                self._reported.clear()
            self._reported.add(value)
            log.warning(
                "node_lock_unparseable", node=node, value=value[:200], respected_until="stale"
            )
        if self._stale(node, value):
            log.warning(
                "node_lock_stale", node=node, holder=value[:200], timeout=self.settings.timeout
            )
            self.stats.stale_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("stale").inc()
            return
        if holder is not None and holder.pod and not await self._owner_alive(holder):
            log.warning("node_lock_dangling", node=node, holder=value[:200])
            self.stats.dangling_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("dangling").inc()
            return
        self.stats.contended += 1
        metrics.NODE_LOCK_CONTENDED.inc()
        asked = holder is not None and bool(holder.instance) and not self.settings.hami
        if asked:
            await self._ask(node)
        described = holder.describe() if holder else f"value {value[:100]!r}"
        raise LockContended(node, described, asked=asked, value=value)

    async def _owner_alive(self, holder: Holder) -> bool:
        try:
            pod = await self.kube.get(f"/api/v1/namespaces/{holder.namespace}/pods/{holder.pod}")
        except KubeError as exc:
            if exc.not_found:
                return False
            raise
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        return phase not in ("Succeeded", "Failed") and not deleting

    async def still_ours(self, hold: Hold) -> bool:
        """Whether `hold` may go on writing: within its time budget, and the node still holds
        its value: as the watch shows it once it has confirmed the hold (see `Hold`), else
        read from the API server."""
        if not hold.writable() or hold.lost:
            return False
        if hold.confirmed:
            return True
        _, current, _ = await self._read(hold.node)
        if current != hold.value:
            hold.lost = True
            log.error("node_lock_lost", node=hold.node, ours=hold.value, found=current[:200])
            return False
        return True

    async def still_all_ours(self, holds: Holds) -> bool:
        """`still_ours` for each of `holds`."""
        for hold in holds.holds:
            if not await self.still_ours(hold):
                return False
        return True

    async def release(self, hold: Hold) -> None:
        """Clear `hold`'s lock if the node still holds its value. Never raises (but for
        cancellation): a release that fails is left to `run()`, and our next hold on the node
        takes it over."""
        node = hold.node
        if self._held.get(node) is hold:
            del self._held[node]
        parked = self._parked.get(node)
        if parked is not None and parked[0] is hold:
            del self._parked[node]
        # Until it is over, a stop's `release_all` clears the value too: this release may be
        # cut short (its task cancelled as the process stops) or fail after it looked.
        self._releasing[node] = hold.value
        try:
            await self._clear(
                node, hold.value, version=hold.version, record=hold.bound_after, obj=hold.node_obj
            )
        except (KubeError, LockContended) as exc:
            log.warning(
                "node_lock_release_failed", node=node, error=str(exc), retry="in the background"
            )
            self._leave(node, hold.value)
        except Exception:
            log.exception("node_lock_release_failed", node=node, retry="in the background")
            self._leave(node, hold.value)
        finally:
            if self._releasing.get(node) == hold.value:
                del self._releasing[node]

    def _leave(self, node: str, value: str) -> None:
        """`value` of ours may be on `node`: clear it in the background (`run()`)."""
        self._leftover[node] = value
        self._retry_at[node] = (self._clock() + LEFTOVER_RETRY[0], LEFTOVER_RETRY[0])
        self._wake.set()

    async def _clear(
        self,
        node: str,
        value: str,
        *,
        version: str = "",
        record: tuple[str, ...] | None = None,
        obj: Mapping[str, Any] | None = None,
    ) -> bool:
        """Remove the lock if it still holds `value`; True if this call removed it. `version`
        (the node's version after our last write, `obj` the object as that write left it) lets
        the first attempt skip a read."""
        for attempt in range(ATTEMPTS):
            try:
                if version:
                    guess, version = version, ""
                    try:
                        self._remember_release(
                            node, await self._write(node, guess, None, record=record, obj=obj)
                        )
                        return True
                    except KubeError as exc:
                        if not exc.conflict and not exc.not_found:
                            raise
                try:
                    current_version, current, read = await self._read(node)
                except KubeError as exc:
                    if exc.not_found:
                        return False  # the node is gone, and its annotations with it
                    raise
                if current != value:
                    return False  # released after all, or no longer ours
                try:
                    self._remember_release(
                        node,
                        await self._write(node, current_version, None, record=record, obj=read),
                    )
                    return True
                except KubeError as exc:
                    if not exc.conflict:
                        raise
            except KubeError as exc:
                if not exc.transient or attempt == ATTEMPTS - 1:
                    raise
                await self._pause(attempt)
        raise LockContended(node, "a concurrent writer (release kept conflicting)")

    def _remember_release(self, node: str, updated: Mapping[str, Any]) -> None:
        meta = updated.get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        version = str(meta.get("resourceVersion", ""))
        self._released[node] = (self._clock(), Known(version, annotations, updated))
        if version:
            self._release_version[node] = version
        self.observe(node, annotations)
