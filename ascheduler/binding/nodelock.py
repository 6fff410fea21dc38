"""Two-level node locks: an `asyncio.Lock` per node under a Kubernetes Node-annotation lock.

The in-process lock serialises this instance's binds on a node; the annotation
(`<key>: <RFC3339 time>,<namespace>,<pod>`, HAMi's format) serialises binds across scheduler
instances (replicas, shards, or ascheduler beside HAMi with key `hami.io/mutex.lock`).

* **Acquire** is a JSON merge patch carrying the node's resourceVersion, so of two instances
  patching the same version only one wins; the loser's 409 is contention, reported at once.
  Transient errors (429, 5xx, connection) are retried 5 x 100 ms with 10% jitter.
* A lock older than the timeout (**stale**: its holder crashed mid-bind), or whose owner pod is
  gone or finished (**dangling**), is taken over; a value that does not parse is treated as
  stale, with a warning. The same pod acquiring again succeeds (a retried bind).
* **Release** clears the annotation only if this pod holds it (unless forced), so pod B can never
  release pod A's lock. HAMi's bug history shaped this: a lock held five minutes after a crash
  (dangling detection), leaked on error paths (`hold()` is the only way in and always releases,
  also on cancellation), an expired lock handed over while its holder still worked (the
  timeout is a floor on how long a bind may take, checked against the annotation's own time),
  a timeout setting that never took effect (`LockSettings.from_env` is what the CLI uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import structlog

from ascheduler import metrics
from ascheduler.kube import ApiError, KubeClient
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.model import PodInfo

log = structlog.get_logger(__name__)

DEFAULT_KEY: Final = "ascheduler.io/node-lock"
DEFAULT_TIMEOUT: Final = 300.0
EXPIRE_ENV: Final = "ASCHEDULER_NODELOCK_EXPIRE"
RETRIES: Final = 5
RETRY_DELAY: Final = 0.1
#: How long our own release's answer is trusted over the informer's copy of the node.
RELEASE_HINT_SECONDS: Final = 5.0


@dataclass(frozen=True)
class LockSettings:
    key: str = DEFAULT_KEY
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def from_env(cls, *, key: str = DEFAULT_KEY, timeout: float | None = None) -> LockSettings:
        """`timeout` if given (the CLI flag), else `$ASCHEDULER_NODELOCK_EXPIRE` (seconds, or a
        Go-style duration such as `90s` or `5m`), else 5 minutes."""
        if timeout is None:
            raw = os.environ.get(EXPIRE_ENV, "")
            timeout = parse_seconds(raw) if raw else DEFAULT_TIMEOUT
        return cls(key=key, timeout=timeout)


def parse_seconds(text: str) -> float:
    """`300`, `300s`, `5m`, `1h`, `1m30s` -> seconds; ValueError otherwise."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"not a duration: {text!r}")
    if number or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total


@dataclass(frozen=True)
class Holder:
    time: dt.datetime
    namespace: str
    pod: str

    @classmethod
    def parse(cls, value: str) -> Holder | None:
        parts = value.split(",")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            return None
        try:
            when = dt.datetime.fromisoformat(parts[0].replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            return None
        return cls(when, parts[1], parts[2])

    def format(self) -> str:
        stamp = self.time.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{stamp},{self.namespace},{self.pod}"


class LockContended(Exception):
    """Another pod holds the node's lock (or won the race for it)."""

    def __init__(self, node: str, holder: str) -> None:
        self.node = node
        self.holder = holder
        super().__init__(f"node {node} is locked by {holder}")


@dataclass
class LockStats:
    acquired: int = 0
    contended: int = 0
    stale_recovered: int = 0
    dangling_recovered: int = 0
    wait_seconds: list[float] = field(default_factory=list)
    binds_per_hold: list[int] = field(default_factory=list)


#: A node's (resourceVersion, annotations) as the scheduler's cache last saw them.
Known = tuple[str, Mapping[str, str]]


class NodeLocks:
    def __init__(
        self,
        kube: KubeClient,
        settings: LockSettings | None = None,
        *,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings or LockSettings()
        self.now = now or (lambda: dt.datetime.now(dt.UTC))
        self.stats = LockStats()
        self._local: dict[str, asyncio.Lock] = {}
        self._held: dict[str, PodInfo] = {}
        self._versions: dict[str, str] = {}
        #: node -> (when, resourceVersion, annotations) our last release left it with
        self._released: dict[str, tuple[float, str, Mapping[str, str]]] = {}

    # -- the one way in --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold(
        self, node: str, pod: PodInfo, *, known: Known | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Hold both levels for `pod` on `node`; yields the Node object read under the lock
        (authoritative allocatable, for re-validating the fit). Always releases."""
        lock = self._local.setdefault(node, asyncio.Lock())
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with lock:
            # Both writes run to completion even when the bind is cancelled meanwhile, and the
            # asyncio lock is only let go once the annotation is: a lock patch that landed is
            # always released, and the next holder never meets our own stale annotation.
            taking = asyncio.ensure_future(self.acquire(node, pod, known=known))
            try:
                node_obj = await asyncio.shield(taking)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await taking
                    await self._release_quietly(node, pod)
                raise
            waited = loop.time() - started
            self.stats.wait_seconds.append(waited)
            metrics.NODE_LOCK_WAIT.observe(waited)
            try:
                yield node_obj
            finally:
                releasing = asyncio.ensure_future(self._release_quietly(node, pod))
                try:
                    await asyncio.shield(releasing)
                except asyncio.CancelledError:
                    await releasing
                    raise

    async def _release_quietly(self, node: str, pod: PodInfo) -> None:
        try:
            await self.release(node, pod)
        except (LockContended, ApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("node_lock_release_failed", node=node, pod=pod.key, error=str(exc))

    # -- annotation level ------------------------------------------------------------------

    async def _retrying(self, attempt: Callable[[], Awaitable[Any]]) -> Any:
        for i in range(1, RETRIES + 1):
            try:
                return await attempt()
            except ApiError as exc:
                if not exc.retryable or i == RETRIES:
                    raise
            except (aiohttp.ClientError, TimeoutError):
                if i == RETRIES:
                    raise
            await asyncio.sleep(RETRY_DELAY * (1 + random.uniform(-0.1, 0.1)))
        raise AssertionError("unreachable")

    async def acquire(
        self, node: str, pod: PodInfo, *, known: Known | None = None
    ) -> dict[str, Any]:
        """Take the annotation lock. `known` is the node's (resourceVersion, annotations) as
        this instance's cache last saw them: when they show no lock, the patch goes out at once
        (one call instead of two); if the cache was stale the 409 only sends us to read."""
        key = self.settings.key
        hint = known
        released = self._released.pop(node, None)
        if released is not None and time.monotonic() - released[0] < RELEASE_HINT_SECONDS:
            # Just after our own release the informer has usually not seen it (nor our lock):
            # that write's answer is the node's newest version we know of.
            hint = (released[1], released[2])

        async def attempt() -> dict[str, Any]:
            nonlocal hint
            # A hint without a version would make the patch unconditional: never use one.
            if hint is not None and hint[0] and not hint[1].get(key):
                version: Any = hint[0]
                hint = None
                mine = Holder(self.now(), pod.namespace, pod.name).format()
                patch = {"metadata": {"resourceVersion": version, "annotations": {key: mine}}}
                try:
                    return await self.kube.patch(
                        f"/api/v1/nodes/{node}", patch, content_type=MERGE_PATCH
                    )
                except ApiError as exc:
                    if not exc.conflict:
                        raise
                    # Our cache was behind: read the node and decide on what it says.
            obj = await self.kube.get(f"/api/v1/nodes/{node}")
            meta = obj.get("metadata") or {}
            current = (meta.get("annotations") or {}).get(key)
            if current:
                await self._check_takeover(node, pod, str(current))
            mine = Holder(self.now(), pod.namespace, pod.name).format()
            patch = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {key: mine},
                }
            }
            try:
                return await self.kube.patch(
                    f"/api/v1/nodes/{node}", patch, content_type=MERGE_PATCH
                )
            except ApiError as exc:
                if exc.conflict:
                    self.stats.contended += 1
                    metrics.NODE_LOCK_CONTENDED.inc()
                    raise LockContended(node, "a concurrent holder") from exc
                raise

        result: dict[str, Any] = await self._retrying(attempt)
        self._held[node] = pod
        self._versions[node] = str((result.get("metadata") or {}).get("resourceVersion", ""))
        self.stats.acquired += 1
        return result

    async def _check_takeover(self, node: str, pod: PodInfo, value: str) -> None:
        """Return if `pod` may take the lock currently holding `value`; else LockContended."""
        holder = Holder.parse(value)
        if holder is None:
            log.warning("node_lock_unparseable", node=node, value=value[:200])
            self.stats.stale_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("unparseable").inc()
            return
        if (holder.namespace, holder.pod) == (pod.namespace, pod.name):
            return  # our own lock: a retried bind of the same pod
        age = (self.now() - holder.time).total_seconds()
        if age > self.settings.timeout:
            log.warning("node_lock_stale", node=node, holder=value, age_seconds=round(age))
            self.stats.stale_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("stale").inc()
            return
        if not await self._owner_alive(holder):
            log.warning("node_lock_dangling", node=node, holder=value)
            self.stats.dangling_recovered += 1
            metrics.NODE_LOCK_RECOVERED.labels("dangling").inc()
            return
        self.stats.contended += 1
        metrics.NODE_LOCK_CONTENDED.inc()
        raise LockContended(node, f"{holder.namespace}/{holder.pod}")

    async def _owner_alive(self, holder: Holder) -> bool:
        try:
            pod = await self.kube.get(f"/api/v1/namespaces/{holder.namespace}/pods/{holder.pod}")
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        return phase not in ("Succeeded", "Failed") and not deleting

    async def release(self, node: str, pod: PodInfo, *, force: bool = False) -> bool:
        """Clear the annotation if `pod` holds it (or `force`); True if it was cleared."""
        key = self.settings.key

        # We wrote the lock at this version: if the node has not changed since, it is still
        # ours and one patch releases it; otherwise read it and check the owner.
        version = self._versions.pop(node, None) if self._held.get(node) is pod else None

        def remember(updated: Mapping[str, Any]) -> None:
            meta = updated.get("metadata") or {}
            annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
            self._released[node] = (
                time.monotonic(),
                str(meta.get("resourceVersion", "")),
                annotations,
            )

        async def attempt() -> bool:
            nonlocal version
            if version:
                guarded = {"metadata": {"resourceVersion": version, "annotations": {key: None}}}
                version = None
                try:
                    remember(
                        await self.kube.patch(
                            f"/api/v1/nodes/{node}", guarded, content_type=MERGE_PATCH
                        )
                    )
                    return True
                except ApiError as exc:
                    if not exc.conflict:
                        raise
            obj = await self.kube.get(f"/api/v1/nodes/{node}")
            meta = obj.get("metadata") or {}
            current = (meta.get("annotations") or {}).get(key)
            if not current:
                return False
            holder = Holder.parse(str(current))
            ours = holder is not None and (holder.namespace, holder.pod) == (
                pod.namespace,
                pod.name,
            )
            if not ours and not force:
                log.info("node_lock_not_ours", node=node, pod=pod.key, holder=current)
                return False
            patch = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {key: None},
                }
            }
            remember(
                await self.kube.patch(f"/api/v1/nodes/{node}", patch, content_type=MERGE_PATCH)
            )
            return True

        for _ in range(RETRIES):
            try:
                cleared: bool = await self._retrying(attempt)
                break
            except ApiError as exc:
                if not exc.conflict:
                    raise
                # The node changed under us (kwok heartbeats it): read it again.
        else:
            raise LockContended(node, "release kept conflicting")
        if self._held.get(node) is pod or (self._held.get(node) is not None and force):
            self._held.pop(node, None)
        return cleared

    # -- lifecycle ---------------------------------------------------------------------------

    def forget_node(self, node: str) -> None:
        """The node was deleted: drop its in-memory lock unless a bind holds it now."""
        self._released.pop(node, None)
        lock = self._local.get(node)
        if lock is not None and not lock.locked():
            del self._local[node]

    async def release_all(self) -> None:
        """Graceful shutdown: release every annotation lock this instance still holds."""
        for node, pod in list(self._held.items()):
            await self._release_quietly(node, pod)

    @property
    def held(self) -> dict[str, PodInfo]:
        return dict(self._held)
